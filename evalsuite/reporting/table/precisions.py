"""Like with like (issue 49 item 4): the precision each cell's backbone computed in, and one line where cells of
different precisions are compared.

`--precision auto` resolves per model (a registry pin such as EfficientNet-Lite0's fp32, else bf16 or fp16 on the
device), so one leaderboard can hold an fp32 model beside bf16 ones, and docs/compute.md measured bf16 autocast
moving the demo's kNN balanced accuracy by 0.078. Each cell carries its runs' precision (the leaderboard's
`precision` column, schema 4; several joined with ';' when its seeds ran in different ones; "" before schema 4);
the wide table's legend, the wide CSV (`TASK_precision`), the report and `--compare` show it, and a column whose
models ran in different precisions gives one note naming the columns, the models and their precisions.
"""

from dataclasses import replace

NOT_RECORDED = "not recorded"  # rows written before the precision column (schema 4)
WHY = ("docs/compute.md measured bf16 moving a kNN score by 0.078, so part of a difference may be the precision's; "
       "rerun them in one --precision (a sweep: precision:)")


def with_precisions(cells: dict, rows: list) -> dict:
    """Each Cell with `precision`: the precisions of the runs behind it (`rows`: the latest runs, any split)."""
    by_run = {}
    for row in rows:
        if row.get("precision"):
            by_run.setdefault(row["run_id"], set()).add(row["precision"])
    return {key: replace(cell, precision=";".join(sorted(set().union(*(by_run.get(run, set())
                                                                         for run in cell.run_ids)))))
            for key, cell in cells.items()}


def column_precisions(table, task: str) -> dict:
    """{model: precision} of the column's cells whose precision is recorded."""
    return {row.model: row.cells[task].precision for row in table.rows
            if task in row.cells and row.cells[task].precision}


def mixed_columns(table, tasks=None) -> dict:
    """{task: {model: precision}} of the columns (of `tasks`, default all) where two or more models ran in
    different precisions."""
    found = {}
    for task in table.tasks if tasks is None else tasks:
        precisions = column_precisions(table, task)
        if len(set(precisions.values())) > 1:
            found[task] = precisions
    return found


def mixed_precision_note(table, tasks=None, what: str = "the table compares") -> str | None:
    """One line naming the columns whose models ran in different precisions, the models and their precisions;
    None when every compared column is of one precision."""
    columns = mixed_columns(table, tasks)
    if not columns:
        return None
    grouped = {}  # the same models and precisions on several columns: said once
    for task, precisions in columns.items():
        grouped.setdefault(tuple(sorted(precisions.items())), []).append(task)
    parts = [f"{', '.join(tasks)}: {', '.join(f'{model} {precision}' for model, precision in precisions)}"
             for precisions, tasks in grouped.items()]
    return f"{what} models that ran in different precisions (the backbone's forward): {'; '.join(parts)}; {WHY}"


def precision_summary(by_model: dict) -> str:
    """`precision (the backbone's forward): fp32 in every cell`, else each model's (`bf16 on demo, fp32 on
    demo_seg` where its cells differ), from {model: {task: precision}}; "" when no cell's precision is recorded."""
    grouped = {}
    for model, cells in by_model.items():
        for task, precision in cells.items():
            grouped.setdefault(model, {}).setdefault(precision or NOT_RECORDED, []).append(task)
    shown = {precision for found in grouped.values() for precision in found}
    if not shown or shown == {NOT_RECORDED}:
        return ""
    if len(shown) == 1:
        return f"precision (the backbone's forward): {shown.pop()} in every cell"
    return "precision (the backbone's forward): " + "; ".join(
        f"{model} " + (next(iter(found)) if len(found) == 1 else
                       ", ".join(f"{precision} on {', '.join(tasks)}" for precision, tasks in found.items()))
        for model, found in grouped.items())


def precision_legend(table) -> str:
    """The wide table's legend line (precision_summary of its cells)."""
    return precision_summary({row.model: {task: cell.precision for task, cell in row.cells.items()}
                              for row in table.rows})
