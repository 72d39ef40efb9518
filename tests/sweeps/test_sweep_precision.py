"""Issue 49 item 4: a sweep runs every model in one precision unless its file says otherwise.

`--precision auto` ran EfficientNet-Lite0 in fp32 (its registry pin) beside ResNet-18 and CLIP in bf16, and one
leaderboard compared them. A sweep's precision now defaults to `device`: what the node computes natively, for every
model, registry pins included (bf16 on a GPU); `precision:` sets another for every cell (a row of another precision
is then not the cell's), `auto` brings back the pins. `sweep run` and its dry run say which, on stderr (stdout keeps
one line per cell)."""

import pytest
import yaml

from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows
from evalsuite.sweeps.cells import cells_of, done_pairs
from evalsuite.sweeps.spec import load_sweep

T1 = "2026-01-02T00:00:00+00:00"


def _sweep(folder, **changes):
    raw = {"models": [{"model": "test_vit", "random_init": True, "name": "vit"}, "efficientnet_lite0_imagenet"],
           "tasks": ["demo"], "seeds": [0], "probes": ["linear"], "device": "cpu", "out": "out", **changes}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _bf16_rows(out, model="vit"):
    """A cell's test row from an earlier `auto` run that resolved to bf16 (a GPU)."""
    append_rows(out / LEADERBOARD_FILE, [
        {"run_id": f"{model}-bf16", "timestamp_utc": T1, "task": "demo", "model": model,
         "weights_id": "random-init:seed0", "probe": "linear", "selected_params": "{}", "split": "test",
         "metric": "balanced_accuracy", "value": "0.5", "seed": 0, "n_samples": 10,
         "headline_metric": "balanced_accuracy", "precision": "bf16"}])


def test_a_sweep_runs_every_cell_in_one_precision(tmp_path):
    sweep = load_sweep(_sweep(tmp_path))
    assert sweep.precision == "device"
    assert {cell.config(sweep).precision for cell in cells_of(sweep)} == {"device"}
    fp32 = load_sweep(_sweep(tmp_path, precision="fp32"))
    assert {cell.config(fp32).precision for cell in cells_of(fp32)} == {"fp32"}
    _bf16_rows(fp32.out)
    vit = cells_of(fp32)[0]
    assert done_pairs(fp32, _rows(fp32.out), vit, {}) == set()  # a bf16 row is not its fp32 cell
    auto = load_sweep(_sweep(tmp_path, precision="auto"))
    assert auto.precision == "auto" and done_pairs(auto, _rows(auto.out), cells_of(auto)[0], {}) == {("linear", 0)}


def test_device_is_the_devices_own_precision_whatever_a_registry_pin_says():
    import torch

    from evalsuite.runtime.precision import Capabilities, resolve_precision

    gpu, old_gpu = Capabilities(cuda_bf16=True, cpu_bf16=False), Capabilities(cuda_bf16=False, cpu_bf16=False)
    cuda = torch.device("cuda")
    assert resolve_precision("device", cuda, "fp32", gpu) == "bf16" and resolve_precision("auto", cuda, "fp32", gpu) == \
        "fp32"
    assert resolve_precision("device", cuda, "fp32", old_gpu) == "fp16"
    assert resolve_precision("device", torch.device("cpu"), "fp32", old_gpu) == "fp32"


def _rows(out):
    from evalsuite.results.leaderboard import read_rows

    return read_rows(out / LEADERBOARD_FILE)


@pytest.mark.parametrize("changes, says", [
    ({}, "every cell computes in the device's own precision, the same for every model on one kind of node (bf16 on "
         "a GPU or CPU that has it, fp16 on an older GPU, fp32 elsewhere) (the sweep file's precision:, device when it "
         "has none); registry pins overridden: efficientnet_lite0_imagenet (fp32)"),
    ({"precision": "bf16"}, "every cell computes in bf16 (the sweep file's precision:, device when it has none); "
                            "registry pins overridden: efficientnet_lite0_imagenet (fp32)"),
    ({"precision": "auto"}, "precision auto: each cell resolves its own (efficientnet_lite0_imagenet pinned to "
                            "fp32; else bf16 or fp16 on a GPU, bf16 or fp32 on a CPU), so its models may compute in "
                            "different precisions"),
], ids=["default", "bf16", "auto"])
def test_the_dry_run_says_the_precision_of_every_cell(tmp_path, cli_in_process, changes, says):
    result = cli_in_process("sweep", "run", _sweep(tmp_path, **changes), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["vit x demo: seeds 0 with linear",
                                          "efficientnet_lite0_imagenet x demo: seeds 0 with linear"]
    (line,) = [line for line in result.stderr.splitlines() if "precision" in line or "computes in" in line]
    assert line.startswith(f"note: sweep sweep: {says}"), line  # the sweep's name: its file's
    assert not (tmp_path / "out").exists()
