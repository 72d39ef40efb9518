"""The sweep file (YAML): models x tasks x seeds, the run options every cell shares, and the Slurm options.

Read and checked before anything runs: an unknown key, model, task, probe or seed list is one line naming the file
and the key. Relative paths (`out`, `data_root`, card paths, `weights`) are taken from the sweep file's folder, so
the jobs find them whatever their working folder. docs/sweeps.md is the format's reference.

A sweep runs every model in one precision (issue 49): `device` unless the file's `precision:` names another, i.e.
what the device computes natively (bf16 on a GPU or CPU that has it, fp16 on an older GPU, fp32 elsewhere) for every
model, a registry pin included. `auto` resolves per cell with the pins, so it can run one model in fp32 beside
others in bf16; it is there when asked for, and `precision_line` says what a sweep will do.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from evalsuite.config import MAX_SEED
from evalsuite.errors import EvalsuiteError
from evalsuite.models.pooling import check_token_rule
from evalsuite.models.registry import REGISTRY
from evalsuite.runtime.precision import PRECISIONS
from evalsuite.storage.names import check_identifier
from evalsuite.storage.yaml_files import parse_yaml
from evalsuite.sweeps.slurm_options import CONTROL_CHARACTERS, SlurmOptions, integer_at_least, slurm_options
from evalsuite.tasks.resources import cards_dir, find_yaml, recipes_dir

TOP_KEYS = {"name", "models", "tasks", "seeds", "probes", "precision", "out", "data_root", "slurm", "device",
            "batch_size", "num_workers", "chunk_rows", "threads", "count_check", "cache"}
MODEL_KEYS = {"name", "model", "weights", "random_init", "pooling"}
TASK_KEYS = {"task", "data_root", "probes", "shards"}
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")  # the devices `evalsuite run --device` names
# One precision for every model on one kind of node, and the fast one there: fp32 by default would make a GPU sweep
# about 15x slower (H100: 67 fp32 against 989 bf16 TFLOP/s) and is what a CPU without bf16 gets anyway.
DEFAULT_PRECISION = "device"


@dataclass(frozen=True)
class ModelEntry:
    label: str  # the leaderboard's model column
    model: str  # registry name, timm architecture or hf-hub:ORG/NAME
    weights: str | None = None
    random_init: bool = False
    pooling: str | None = None


@dataclass(frozen=True)
class TaskEntry:
    task: str  # card name, or a card path made absolute
    data_root: str | None = None
    probes: tuple = ()  # empty: the sweep's probes, else the card's defaults
    shards: int = 1  # Slurm array elements that extract this task's caches together


@dataclass
class Sweep:
    name: str
    path: Path
    models: list
    tasks: list
    seeds: list
    probes: tuple
    precision: str
    out: Path
    slurm: SlurmOptions
    run_options: dict  # RunConfig fields every cell shares (device, batch_size, ...)


def load_sweep(path) -> Sweep:
    path = Path(path)
    if path.is_dir():
        raise EvalsuiteError(f"sweep file {path} is a folder, not a file; pass the sweep's .yaml file")
    if not path.is_file():
        raise EvalsuiteError(f"sweep file not found: {path}; check the path")
    raw = parse_yaml(path.read_bytes(), path, "sweep file")
    if not isinstance(raw, dict):
        raise EvalsuiteError(f"sweep file {path}: expected a mapping with models: and tasks:, got "
                             f"{type(raw).__name__}")
    _check_keys(raw, TOP_KEYS, path, "")
    return _sweep(raw, path.resolve())


def _sweep(raw: dict, path: Path) -> Sweep:
    base = path.parent
    name = check_identifier(raw.get("name") or path.stem, f"sweep file {path}: name", "pathology-2026")  # a folder
    probes = _probes(raw.get("probes"), path, "probes")
    precision = str(raw.get("precision", DEFAULT_PRECISION))
    if precision not in PRECISIONS:
        raise EvalsuiteError(f"sweep file {path}: precision '{precision}' is not one of {', '.join(PRECISIONS)}")
    return Sweep(name=name, path=path, models=_models(raw, path, base), tasks=_tasks(raw, path, base),
                 seeds=_seeds(raw.get("seeds", [0]), path), probes=probes, precision=precision,
                 out=_out(raw, path, base), slurm=slurm_options(raw.get("slurm") or {}, path),
                 run_options=_run_options(raw, path))


def _out(raw: dict, path: Path, base: Path) -> Path:
    out = _resolved(raw.get("out", "evalsuite_out"), base)
    # It goes into a double-quoted #SBATCH --output line, taken from the sweep file's folder when relative.
    if '"' in str(out) or CONTROL_CHARACTERS.search(str(out)):
        raise EvalsuiteError(f"sweep file {path}: out must not contain a double quote or a line break, got "
                             f"{str(out)!r}; move the sweep file or name an out folder without them")
    return out


def _check_keys(raw: dict, allowed: set, path: Path, where: str) -> None:
    for key in raw:
        if key not in allowed:
            raise EvalsuiteError(f"sweep file {path}: unknown key '{where}{key}'; known: {', '.join(sorted(allowed))}")


def _resolved(value, base: Path) -> Path:
    return (base / Path(str(value)).expanduser()).resolve()


def _list(raw: dict, key: str, path: Path) -> list:
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        raise EvalsuiteError(f"sweep file {path}: '{key}' must be a non-empty list")
    return value


def _models(raw: dict, path: Path, base: Path) -> list:
    models = [_model(item, path, base) for item in _list(raw, "models", path)]
    labels = [model.label for model in models]
    for label in labels:
        if labels.count(label) > 1:
            raise EvalsuiteError(f"sweep file {path}: two models are labelled '{label}'; give each a distinct "
                                 "name: (it is the leaderboard's model column)")
    return models


def _model(item, path: Path, base: Path) -> ModelEntry:
    if isinstance(item, str):
        item = {"model": item}
    if not isinstance(item, dict) or "model" not in item:
        raise EvalsuiteError(f"sweep file {path}: each of models: is a name or a mapping with model:, got {item!r}")
    _check_keys(item, MODEL_KEYS, path, "models.")
    model, weights = str(item["model"]), item.get("weights")
    random_init = bool(item.get("random_init", False))
    if (weights or random_init) and "name" not in item:
        raise EvalsuiteError(f"sweep file {path}: model '{model}' with weights: or random_init: needs a name: to "
                             "tell it apart in the leaderboard")
    if weights and random_init:
        raise EvalsuiteError(f"sweep file {path}: model '{item['name']}' has both weights: and random_init:; "
                             "keep one")
    if item.get("pooling") is not None:
        check_token_rule(str(item["pooling"]), f"sweep file {path}: pooling of '{model}'")
    if weights and not _resolved(weights, base).exists():
        raise EvalsuiteError(f"sweep file {path}: weights of '{item['name']}' not found: {_resolved(weights, base)}")
    label = str(item.get("name") or model)
    if item.get("name"):  # the leaderboard's model column, a cell of every table and of the status grid
        check_identifier(label, f"sweep file {path}: models[].name", "uni2-h-ft", label=True)
    elif CONTROL_CHARACTERS.search(model) or " " in model:  # a plain model labels itself
        raise EvalsuiteError(f"sweep file {path}: model {model!r} is not a model name (it holds a space or a line "
                             "break); write the registry, timm or hf-hub:ORG/NAME name")
    return ModelEntry(label=label, model=model, weights=str(_resolved(weights, base)) if weights else None,
                      random_init=random_init, pooling=item.get("pooling"))


def _tasks(raw: dict, path: Path, base: Path) -> list:
    shared_root = raw.get("data_root")
    tasks = [_task(item, path, base, shared_root) for item in _list(raw, "tasks", path)]
    names = [entry.task for entry in tasks]
    for name in names:
        if names.count(name) > 1:
            raise EvalsuiteError(f"sweep file {path}: task '{name}' is listed twice")
    return tasks


def _task(item, path: Path, base: Path, shared_root) -> TaskEntry:
    if isinstance(item, str):
        item = {"task": item}
    if not isinstance(item, dict) or "task" not in item:
        raise EvalsuiteError(f"sweep file {path}: each of tasks: is a card name or a mapping with task:, got {item!r}")
    _check_keys(item, TASK_KEYS, path, "tasks.")
    task = str(item["task"])
    is_path = task.endswith((".yaml", ".yml")) or "/" in task
    if is_path:
        task = str(_resolved(task, base))
    try:
        find_yaml(task, cards_dir(), "task card", "task")
    except EvalsuiteError as exc:
        raise EvalsuiteError(f"sweep file {path}: {exc}") from None
    shards = item.get("shards", 1)
    if not isinstance(shards, int) or isinstance(shards, bool) or shards < 1:
        raise EvalsuiteError(f"sweep file {path}: shards of task '{task}' must be an integer >= 1, got {shards!r}")
    data_root = item.get("data_root")
    if data_root is None and shared_root is not None and not _ships_data(task):  # a sub-folder per task
        data_root = Path(str(shared_root)) / Path(task).stem
    return TaskEntry(task=task, data_root=str(_resolved(data_root, base)) if data_root is not None else None,
                     probes=_probes(item.get("probes"), path, f"probes of task '{task}'"), shards=shards)


def _ships_data(task: str) -> bool:
    """Whether the card's data comes with evalsuite (`package:` or `built:`), which a shared data_root leaves be."""
    from evalsuite.tasks.cards import load_card

    return str(load_card(task).data_root or "").startswith(("package:", "built:"))


def _probes(value, path: Path, where: str) -> tuple:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not value:
        raise EvalsuiteError(f"sweep file {path}: {where} must be a list of probe recipe names")
    for name in value:
        try:
            find_yaml(str(name), recipes_dir(), "probe recipe", "probe")
        except EvalsuiteError as exc:
            raise EvalsuiteError(f"sweep file {path}: {exc}") from None
    return tuple(str(name) for name in value)


def _seeds(value, path: Path) -> list:
    seeds = value if isinstance(value, list) else [value]
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_SEED for s in seeds) \
            or len(set(seeds)) != len(seeds):  # the seeds `evalsuite run --seeds` takes
        raise EvalsuiteError(f"sweep file {path}: seeds must be distinct non-negative integers up to {MAX_SEED}, "
                             f"e.g. [0, 1, 2]; got {value!r}")
    return list(seeds)


def _run_options(raw: dict, path: Path) -> dict:
    options = {"device": str(raw.get("device", "auto")), "check_counts": bool(raw.get("count_check", True)),
               "cache": str(raw.get("cache", "auto"))}
    for key, least in (("batch_size", 1), ("num_workers", 0), ("chunk_rows", 1), ("threads", 0)):
        if key in raw:
            options[key] = integer_at_least(raw[key], least, path, key)
    if not DEVICE.fullmatch(options["device"]):  # else each cell would fail at its start, exit 4
        raise EvalsuiteError(f"sweep file {path}: device {options['device']!r} is not a device; use auto, cpu, cuda "
                             "or cuda:N")
    if options["cache"] not in ("auto", "ram", "memmap"):
        raise EvalsuiteError(f"sweep file {path}: cache must be auto, ram or memmap")
    return options


def precision_line(sweep: Sweep) -> str:
    """What every cell computes in, said before the cells run: the sweep's precision, and the registry pins it
    overrides, or under `auto` that each cell resolves its own."""
    pins = {entry.label: _pin(entry.model) for entry in sweep.models if _pin(entry.model)}
    if sweep.precision == "auto":
        pinned = "; ".join(f"{label} pinned to {pin}" for label, pin in pins.items())
        return (f"sweep {sweep.name}: precision auto: each cell resolves its own ({pinned + '; ' if pinned else ''}"
                "else bf16 or fp16 on a GPU, bf16 or fp32 on a CPU), so its models may compute in different "
                "precisions; `leaderboard` and `report` name the columns that mix them. Set precision: fp32, bf16 or "
                "fp16 to run every model in one")
    overridden = [f"{label} ({pin})" for label, pin in pins.items() if pin != sweep.precision]
    what = ("the device's own precision, the same for every model on one kind of node (bf16 on a GPU or CPU that "
            "has it, fp16 on an older GPU, fp32 elsewhere)" if sweep.precision == "device" else sweep.precision)
    return (f"sweep {sweep.name}: every cell computes in {what} (the sweep file's precision:, "
            f"{DEFAULT_PRECISION} when it has none)"
            + (f"; registry pins overridden: {', '.join(overridden)}" if overridden else ""))


def _pin(model: str) -> str | None:
    """The precision the registry pins for `model` (what its published numbers need), if any."""
    spec = REGISTRY.get(model)
    return getattr(spec, "precision", None)


def check_models(sweep: Sweep) -> None:
    """An unknown model name is refused before any cell runs (timm is imported for a name outside the registry)."""
    for entry in sweep.models:
        if entry.model in REGISTRY or entry.model.startswith("hf-hub:"):
            continue
        import timm

        if not timm.is_model(entry.model):
            raise EvalsuiteError(f"sweep file {sweep.path}: unknown model '{entry.model}' (label '{entry.label}'): "
                                 "not in the registry (`evalsuite list --models`) nor a timm architecture")
