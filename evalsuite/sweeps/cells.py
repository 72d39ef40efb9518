"""A sweep's cells: one (model, task) each, its seeds and probes sharing one feature cache; which of them are done.

A cell is done when the sweep's leaderboard holds a test row for each of its (probe, seed) pairs under its model
label and task, with the same weights (a checkpoint's content hash) and, when the sweep names one, the same
precision. The leaderboard is the truth: a cell is never re-run for rows it has, so re-running a sweep never
duplicates rows. A cell with some pairs done runs only the missing ones (`missing_runs`).
"""

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from evalsuite.config import RunConfig
from evalsuite.errors import EvalsuiteError
from evalsuite.results.leaderboard import LEADERBOARD_FILE, read_rows
from evalsuite.sweeps.spec import ModelEntry, Sweep, TaskEntry
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.resources import find_yaml, read_yaml_mapping, recipes_dir

SWEEPS_FOLDER = "sweeps"


@dataclass(frozen=True)
class Cell:
    id: str  # names the cell's files: a readable slug of label and task, made unique by a short hash
    model: ModelEntry
    task: TaskEntry
    task_name: str  # the card's name, the leaderboard's task column
    probes: tuple  # recipe file names the run is given
    probe_names: tuple  # the recipes' `name` fields, the leaderboard's probe column
    seeds: tuple

    @property
    def ref(self) -> dict:
        """What a state file and a Slurm element need to name the cell."""
        return {"cell": self.id, "model": self.model.label, "task": self.task_name}

    def config(self, sweep: Sweep, **changes) -> RunConfig:
        """The RunConfig of `evalsuite run` for this cell (all its probes and seeds unless `changes` say otherwise)."""
        fields = dict(task=self.task.task, model=self.model.model, weights=self.model.weights,
                      random_init=self.model.random_init, pooling=self.model.pooling, probes=list(self.probes),
                      out_dir=sweep.out, seeds=list(self.seeds), precision=sweep.precision,
                      data_root=self.task.data_root, label=self.model.label, **sweep.run_options)
        return dataclasses.replace(RunConfig(**fields), **changes)


def sweep_dir(sweep: Sweep) -> Path:
    return sweep.out / SWEEPS_FOLDER / sweep.name


def cells_of(sweep: Sweep) -> list:
    """Every cell, model by model (so one process loads each model once), tasks in the file's order."""
    cards = {entry.task: load_card(entry.task) for entry in sweep.tasks}
    names = [card.name for card in cards.values()]
    for name in names:
        if names.count(name) > 1:  # the leaderboard's task column could not tell their rows apart
            raise EvalsuiteError(f"sweep file {sweep.path}: two of its tasks are cards named '{name}'; give each card "
                                 "its own name:")
    cells = []
    for model in sweep.models:
        for task in sweep.tasks:
            card = cards[task.task]
            probes = task.probes or sweep.probes or tuple(card.probes)
            cells.append(Cell(id=cell_id(model.label, card.name), model=model, task=task, task_name=card.name,
                              probes=probes, probe_names=tuple(_recipe_name(p) for p in probes),
                              seeds=tuple(sweep.seeds)))
    return cells


def cell_id(label: str, task_name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{label}__{task_name}").strip("_")[:80]
    both = "\0".join((label, task_name)).encode()
    return f"{slug}-{hashlib.sha256(both).hexdigest()[:6]}"


def _recipe_name(recipe: str) -> str:
    raw, _ = read_yaml_mapping(find_yaml(recipe, recipes_dir(), "probe recipe", "probe"), "probe recipe")
    return str(raw.get("name") or Path(recipe).stem)


def done_pairs(sweep: Sweep, rows: list, cell: Cell, weights_ids: dict) -> set:
    """(probe, seed) pairs of the cell that the leaderboard rows already hold."""
    return pairs_present(rows, cell.ref, weights_ids.get(cell.model.weights) if cell.model.weights else None,
                         sweep.precision)


def pairs_present(rows: list, ref: dict, weights_id: str | None, precision: str) -> set:
    """(probe, seed) pairs with test rows for the cell `ref`, from these weights (None: any) and precision (auto and
    device, which resolve on the node a cell lands on: any; `leaderboard` names a column that mixes precisions)."""
    return {(row["probe"], int(row["seed"])) for row in rows
            if row["task"] == ref["task"] and row["model"] == ref["model"] and row["split"] == "test"
            and (weights_id is None or row.get("weights_id") == weights_id)
            and (precision in ("auto", "device") or row.get("precision") == precision)}


def missing_runs(cell: Cell, done: set) -> list:
    """[(probes, seeds)]: runs that produce exactly the cell's missing pairs, seeds with the same missing probes
    together. Empty when the cell is done."""
    return runs_for(cell.probes, cell.probe_names, cell.seeds, done)


def runs_for(probes, probe_names, seeds, done: set) -> list:
    by_probes = {}
    for seed in seeds:
        missing = tuple(p for p, name in zip(probes, probe_names) if (name, seed) not in done)
        if missing:
            by_probes.setdefault(missing, []).append(seed)
    return [(list(chosen), chosen_seeds) for chosen, chosen_seeds in by_probes.items()]


def leaderboard_rows(sweep: Sweep) -> list:
    path = sweep.out / LEADERBOARD_FILE
    return read_rows(path) if path.is_file() else []


def weights_ids(sweep: Sweep, remember: bool = True) -> dict:
    """{checkpoint path: the weights id a run records for it}, hashed once per file version (size, mtime) and kept
    in the sweep's folder: a 1 GB checkpoint is not read again for every `sweep status`."""
    from evalsuite.models.checkpoints import weights_files, weights_sha256

    memo_path = sweep_dir(sweep) / "weights_ids.json"
    memo = read_json(memo_path)
    memo = memo if isinstance(memo, dict) else {}  # a memo that is no object is only hashed again
    found, changed = {}, False
    for model in sweep.models:
        if not model.weights:
            continue
        files = weights_files(Path(model.weights))
        stamp = ";".join(f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
        known = memo.get(model.weights)
        if not isinstance(known, dict) or known.get("stamp") != stamp or not isinstance(known.get("id"), str):
            memo[model.weights] = {"stamp": stamp, "id": f"sha256:{weights_sha256(files)}"}
            changed = True
        found[model.weights] = memo[model.weights]["id"]
    if changed and remember:
        write_json(memo_path, memo)
    return found


def read_json(path: Path):
    """The JSON value in `path` (an object, unless the file was written by hand), or {} when it is missing or cut
    short."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_json(path: Path, payload: dict) -> None:
    from evalsuite.storage.fsio import write_atomically

    try:  # a full disk here (a cell's state, the plan, weights_ids.json) is one line, not an internal error
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(payload, indent=1, sort_keys=True).encode())
    except OSError as exc:
        raise out_error("create" if not path.parent.is_dir() else "write", path, exc) from None


def out_error(action: str, path: Path, exc: OSError):
    """`cannot ACTION PATH: why; what to do`, the fix naming the sweep file's `out:` (a sweep has no --out)."""
    from evalsuite.errors import EvalsuiteError
    from evalsuite.storage.fsio import fs_error

    message = str(fs_error(action, path, exc))
    return EvalsuiteError(message.replace("pass an --out folder", "set out: in the sweep file to a folder")
                          .replace("pass another --out", "set out: in the sweep file to another folder"))
