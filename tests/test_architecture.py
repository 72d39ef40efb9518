"""The package's shape (issue 15): stages import only the stages below them, no module import cycle, small modules.

Layers, lowest first. `metrics` (functions of labels and predictions) and `models` (networks) sit below
`tasks` because a task kind names its metrics and a card names a pooling rule; otherwise the order is
the data flow: card -> reader -> backbone -> cache -> probe -> metrics -> results, with `runner`
stringing the stages together and `commands`/`cli` on top.
"""

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "evalsuite"
LAYERS = ["version", "errors", "runtime", "storage", "config", "metrics", "models", "tasks", "readers", "downloads",
          "features", "probes", "results", "run_record", "runner", "reporting", "robustness", "sweeps", "commands", "cli",
          "__main__"]
# Inside the read side (issue 50), lowest first: the models x tasks table, the column statistics on its cells, the
# views people read (text, CSV, markdown, pandas, heatmap), the report page.
READ_SIDE = ["reporting.table", "reporting.statistics", "reporting.views", "reporting.page"]
# The write side's files know nothing of the stages that made a run (issue 50).
NOT_UNDER_RESULTS = ("features", "probes", "models", "readers", "runner", "run_record", "reporting")
MAX_MODULE_LINES = 300
REGISTRY_DATA = {"models/image/entries.py"}  # a table of model entries, long by nature


def _modules() -> dict[str, Path]:
    named = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        named[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return named


def _imports(path: Path, modules: dict) -> set[str]:
    """evalsuite modules `path` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "evalsuite":
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "evalsuite")
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # None: the package root (its version only)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) for name, path in modules.items()}


def test_every_module_belongs_to_a_layer():
    assert {_layer(m) for m in _modules()} - {None} <= set(LAYERS)


def test_no_stage_imports_a_stage_above_it():
    upward = []
    for module, imported in _graph().items():
        for target in imported:
            source_layer, target_layer = _layer(module), _layer(target)
            if None in (source_layer, target_layer) or source_layer == target_layer:
                continue
            if LAYERS.index(target_layer) > LAYERS.index(source_layer):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports from a lower stage to a higher one:\n" + "\n".join(sorted(upward))


def test_no_import_cycle_between_modules():
    graph = {m: {t for t in targets if t != m and not m.startswith(t + ".")} for m, targets in _graph().items()}
    state, cycles = defaultdict(int), []  # 0 new, 1 on the path, 2 done

    def visit(module, path):
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state[target] == 1:
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif state[target] == 0:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if state[module] == 0:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    if str(path.relative_to(PACKAGE)) in REGISTRY_DATA:
        return
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines; split it by concern"


def test_a_new_task_kind_is_one_entry_in_the_kinds_table():
    """The kind-specific facts live in tasks/kinds.py only: nothing else names a kind."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = str(path.relative_to(PACKAGE))
        if rel in {"tasks/kinds.py", "models/registry.py"}:  # the registry's kinds are model kinds (issue 50)
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "kind ==" in line or "kind !=" in line or '"classification":' in line or '"segmentation":' in line:
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "task-kind branches outside tasks/kinds.py:\n" + "\n".join(offenders)


def test_every_package_ships_in_the_wheel():
    """pyproject.toml lists packages explicitly (the cards and recipes are mapped in): a new stage folder must be
    listed too, or an installed wheel lacks it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert on_disk <= listed, f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}"


def _sub_layer(module: str) -> str | None:
    parts = module.split(".")
    name = ".".join(parts[1:3])
    return name if name in READ_SIDE else None


def test_the_read_side_imports_only_downward_between_its_parts():
    upward = []
    for module, imported in _graph().items():
        source = _sub_layer(module)
        for target in imported:
            target_part = _sub_layer(target)
            if source and target_part and READ_SIDE.index(target_part) > READ_SIDE.index(source):
                upward.append(f"{module} -> {target}")
    assert not upward, "reporting imports against table < statistics < views < page:\n" + "\n".join(sorted(upward))


def test_the_results_package_imports_nothing_of_the_stages_that_make_a_run():
    offending = [f"{module} -> {target}" for module, imported in _graph().items() if _layer(module) == "results"
                 for target in imported if _layer(target) in NOT_UNDER_RESULTS]
    assert not offending, "results/ must only write and read files:\n" + "\n".join(sorted(offending))


def test_the_runner_writes_through_results_and_reads_nothing_of_reporting():
    imported = _graph()["evalsuite.runner"]
    assert any(_layer(target) == "results" for target in imported)
    assert not [target for target in imported if _layer(target) == "reporting"]
