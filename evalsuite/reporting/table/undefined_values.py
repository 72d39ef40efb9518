"""A value of nan on the leaderboard (a metric undefined on a split: AUROC with one class present, Pearson r of a
constant prediction) is said where it changes what the wide table shows, never an internal error: one nan seed
makes its cell's mean nan (ranked last), and a column with no finite mean is not ranked at all (wide.py)."""

import math


def undefined_seed_notes(cells: dict, shown: dict, metrics: dict, split: str) -> list[str]:
    """One note per cell with a seed whose value is nan, naming the seeds; a column with no finite value at all
    gets one note from column_statistics.py instead."""
    finite_tasks = {task for (_, task), cell in cells.items() if math.isfinite(cell.mean)}
    notes = []
    for (model, task), cell in sorted(cells.items()):
        values = shown[(model, task, cell.probe, split)]
        undefined = [str(seed) for seed in cell.seeds if math.isnan(values[seed])]
        if undefined and task in finite_tasks:
            notes.append(f"model '{model}' on task '{task}' (probe {cell.probe}): {metrics[task]} on {split} is nan "
                         f"(undefined) for seed {', '.join(undefined)} of {len(cell.seeds)}, so its mean is nan and "
                         "ranks last; rerun that seed or pass --metric with a metric it defines")
    return notes
