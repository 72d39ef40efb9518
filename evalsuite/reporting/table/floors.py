"""Each model's own random-init floor (issue 49 item 9): the mean its pretraining must beat is that of the same
network with random weights, not whichever random-init model scored best on the task.

A random-init model is one whose runs' weights id says `random-init` (`evalsuite run --random-init`, a sweep's
`random_init: true`). A model X's floor is, on each task where both have a cell:
1. X+random-init, the label `--random-init` gives X's runs (the same with X's `+pooling=RULE` after it), where the
   report shows it;
2. else the one random-init model whose run JSON names X's architecture (`model.architecture_name`, else
   `config.model`): a sweep's `{name: vit-random, model: vit_base_patch16_224, random_init: true}` is the floor of
   its `vit_base_patch16_224` checkpoints;
3. else none. Two random-init models of X's architecture and neither named X+random-init: none, and a note says
   which to name.
A random-init model that is no shown model's floor is labelled `random-init`, never the floor of a task.
"""

from evalsuite.errors import EvalsuiteError
from evalsuite.results.run_fields import read_run_fields
from evalsuite.results.run_json import RUNS_FOLDER

RANDOM_INIT = "random-init"
SUFFIX = "+random-init"


def random_init_models(rows: list) -> set:
    """The models whose runs used random weights (their weights id says so)."""
    return {row["model"] for row in rows if str(row.get("weights_id") or "").startswith(RANDOM_INIT)}


def own_floors(models: list, random_models: set, architectures: dict) -> tuple[dict, list]:
    """({model: its random-init model}, notes) for the models that are not random-init themselves."""
    randoms = [model for model in models if model in random_models]
    owners, notes = {}, []
    for model in (m for m in models if m not in random_models):
        named = [r for r in randoms if _without_suffix(r) == model]
        architecture = architectures.get(model)
        same = [r for r in randoms if architecture and architectures.get(r) == architecture]
        if named or len(same) == 1:
            owners[model] = (named or same)[0]
        elif same:
            notes.append(f"{model} has no random-init floor: {', '.join(same)} are all random-init models of its "
                         f"architecture ({architecture}); label the one to compare with {model}{SUFFIX} (the label "
                         "`evalsuite run --random-init` gives)")
    return owners, notes


def _without_suffix(label: str) -> str:
    """'X+random-init' -> 'X'; 'X+random-init+pooling=cls' -> 'X+pooling=cls' (the pooling follows in the label)."""
    return label.replace(SUFFIX, "", 1) if SUFFIX in label else ""


def floor_cells(owners: dict, cells: dict) -> dict:
    """{(model, task): (its random-init model, that model's mean)} wherever both have a cell."""
    return {(model, task): (owners[model], cells[(owners[model], task)].mean)
            for (model, task) in cells if model in owners and (owners[model], task) in cells}


def floor_labels(owners: dict, random_models: set, models: list) -> dict:
    """{random-init model shown: [the shown models whose floor it is]} (empty: the floor of no shown model)."""
    return {r: [m for m in models if owners.get(m) == r] for r in models if r in random_models}


def architectures(out_dir, first_runs: dict) -> dict:
    """{model: the architecture its run JSON names} from {model: a run id}; a model without a readable run JSON is
    left out (the provenance section names a damaged file)."""
    found = {}
    for model, run_id in first_runs.items():
        try:
            record = read_run_fields(out_dir / RUNS_FOLDER / f"{run_id}.json")
        except EvalsuiteError:
            continue
        described = record.get("model") if isinstance(record.get("model"), dict) else {}
        name = described.get("architecture_name") or record.get("config", {}).get("model")
        if isinstance(name, str) and name:
            found[model] = name
    return found
