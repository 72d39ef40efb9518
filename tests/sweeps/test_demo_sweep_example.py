"""The shipped sweep file a newcomer can run (issue 49, item 8): examples/demo_sweep.yaml names only what runs
offline (the demo tasks, the shipped EfficientNet-Lite0 and its random-init twin), its dry run lists the four cells
and writes nothing, and docs/sweeps.md and the README point at it. The full run is the README's (its table is the
run's report): tests/e2e/test_readme_commands.py runs it."""

import shutil

from conftest import REPO

from evalsuite.sweeps.spec import load_sweep

EXAMPLE = REPO / "examples" / "demo_sweep.yaml"
CELLS = ["efficientnet_lite0_imagenet x demo: seeds 0,1 with linear, knn",
         "efficientnet_lite0_imagenet x demo_counts: seeds 0,1 with ridge",
         "efficientnet_lite0_random x demo: seeds 0,1 with linear, knn",
         "efficientnet_lite0_random x demo_counts: seeds 0,1 with ridge"]


def _copy(tmp_path):
    """The example in a folder of its own, so that its `out: ../demo_out` lands in tmp_path, not in the checkout."""
    (tmp_path / "examples").mkdir()
    return shutil.copy(EXAMPLE, tmp_path / "examples" / EXAMPLE.name)


def test_the_dry_run_lists_its_four_cells_and_writes_nothing(tmp_path, cli_in_process):
    path = _copy(tmp_path)
    result = cli_in_process("sweep", "run", path, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == CELLS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["examples"]  # no demo_out/: a dry run writes nothing


def test_it_names_only_shipped_models_and_tasks_and_writes_beside_the_checkout(tmp_path):
    sweep = load_sweep(_copy(tmp_path))
    assert [(m.label, m.model, m.random_init, m.weights) for m in sweep.models] == [
        ("efficientnet_lite0_imagenet", "efficientnet_lite0_imagenet", False, None),
        ("efficientnet_lite0_random", "efficientnet_lite0_imagenet", True, None)]
    assert [t.task for t in sweep.tasks] == ["demo", "demo_counts"] and list(sweep.seeds) == [0, 1]
    assert all(t.data_root is None for t in sweep.tasks) and sweep.out == tmp_path / "demo_out"


def test_the_docs_point_at_it():
    assert "examples/demo_sweep.yaml" in (REPO / "docs" / "sweeps.md").read_text()
    assert "evalsuite sweep run examples/demo_sweep.yaml" in (REPO / "README.md").read_text()
