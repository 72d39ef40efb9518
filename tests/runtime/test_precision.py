"""The precision policy: what `--precision auto` picks on each kind of device (capabilities injected, so
every branch runs on a CPU-only machine), how explicit choices and registry pins win, and where the
precision used is recorded."""

import json
import warnings

import pytest
import torch
from conftest import leaderboard_rows, run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.runtime.precision import Capabilities, autocast_context, cpu_has_native_bf16, resolve_precision

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)
NO_BF16 = Capabilities(cuda_bf16=False, cpu_bf16=False)


@pytest.mark.parametrize("device, capabilities, expected", [
    (CUDA, Capabilities(cuda_bf16=True, cpu_bf16=False), "bf16"),  # A100, H100
    (CUDA, NO_BF16, "fp16"),  # V100, T4
    (CPU, Capabilities(cuda_bf16=False, cpu_bf16=True), "bf16"),  # AVX512-BF16 / AMX
    (CPU, NO_BF16, "fp32"),  # AVX2-only: bf16 would be emulated
    (torch.device("mps"), NO_BF16, "fp32"),
], ids=["cuda-bf16", "cuda-old", "cpu-native-bf16", "cpu-avx2", "other"])
def test_auto_follows_the_hardware(device, capabilities, expected):
    assert resolve_precision("auto", device, capabilities=capabilities) == expected


@pytest.mark.parametrize("device", [CPU, CUDA])
def test_a_registry_pin_wins_over_auto_but_not_over_an_explicit_choice(device):
    fast = Capabilities(cuda_bf16=True, cpu_bf16=True)
    assert resolve_precision("auto", device, pinned="fp32", capabilities=fast) == "fp32"
    assert resolve_precision("bf16", device, pinned="fp32", capabilities=NO_BF16) == "bf16"


def test_auto_reads_this_cpu_through_onednn(monkeypatch):
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False, raising=False)
    assert not cpu_has_native_bf16()
    assert resolve_precision("auto", CPU) == "fp32"
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    assert resolve_precision("auto", CPU) == "bf16"


def test_cuda_capability_is_read_without_emulation(monkeypatch):
    asked = {}
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: asked.setdefault("emu", including_emulation) or False)
    assert resolve_precision("auto", CUDA) == "fp16"
    assert asked["emu"] is False


def test_unknown_precision_is_a_clear_error():
    with pytest.raises(EvalsuiteError, match="unknown precision 'tf32'"):
        resolve_precision("tf32", CPU)


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)])
def test_autocast_computes_in_the_precision_on_cpu(precision, dtype):
    layer = torch.nn.Linear(4, 4)
    with torch.inference_mode(), autocast_context(CPU, precision):
        assert layer(torch.randn(2, 4)).dtype == dtype


def test_autocast_on_cuda_names_the_dtype():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that CUDA autocast is disabled without a GPU
        context = autocast_context(CUDA, "fp16")
    assert context.device == "cuda" and context.fast_dtype == torch.float16


def test_efficientnet_lite0_imagenet_is_pinned_to_fp32():
    from evalsuite.models.image.entries import MODELS

    assert MODELS["efficientnet_lite0_imagenet"].precision == "fp32"
    assert all(spec.precision in (None, "bf16", "fp16", "fp32") for spec in MODELS.values())


def test_no_autocast_contradicting_precision_is_one_line_error(tmp_path):
    from conftest import assert_one_line_error

    result = run_cli("run", "--task", "demo", "--out", tmp_path / "out", "--no-autocast", "--precision", "bf16",
                     timeout=120)
    assert_one_line_error(result, "--no-autocast means --precision fp32")


@pytest.mark.slow
def test_precision_used_is_in_the_output_json_row_and_cache_key(tmp_path):
    """timm's test_vit, random-init (unpinned) on the demo: auto resolves to this CPU's precision and is recorded;
    the budget plan (same cache keys as a run) finds the cache for that precision and none for another."""
    import json

    out = tmp_path / "out"
    common = ["--task", "demo", "--model", "test_vit", "--random-init", "--out", out, "--num-workers", "0"]
    auto = resolve_precision("auto", CPU)
    run = run_cli("run", *common, "--probes", "knn", timeout=600)
    assert run.returncode == 0, run.stderr
    assert f"precision {auto}" in run.stdout
    record = json.loads(next((out / "runs").glob("*.json")).read_text())
    assert record["precision"] == auto and record["threads"] >= 1
    assert {row["precision"] for row in leaderboard_rows(out)} == {auto}
    manifests = [json.loads(p.read_text()) for p in (out / "cache").glob("*/manifest.json")]
    assert [m["fields"]["precision"] for m in manifests] == [auto] * 3

    def cached_splits(precision):
        plan = run_cli("budget", *common, "--precision", precision, "--json", timeout=600)
        assert plan.returncode == 0, plan.stderr
        return [split["cached"] for split in json.loads(plan.stdout)["splits"]]

    assert cached_splits(auto) == [True] * 3
    assert cached_splits("bf16" if auto == "fp32" else "fp32") == [False] * 3


def test_threads_default_to_this_process_share_of_its_cpus(monkeypatch):
    import os

    from evalsuite.runtime import cpus

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert cpus.usable_cpus() == 8 and cpus.intra_op_threads() == 8
    assert cpus.default_num_workers() == 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # torchrun, two ranks on this node
    assert cpus.intra_op_threads() == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert cpus.intra_op_threads() == 3
    assert cpus.intra_op_threads(requested=5) == 5


def test_negative_threads_is_one_line_error(tmp_path):
    from conftest import assert_one_line_error

    result = run_cli("run", "--task", "demo", "--out", tmp_path / "out", "--threads", "-1", timeout=120)
    assert_one_line_error(result, "--threads >= 0")


@pytest.mark.parametrize("cpus_here, ranks, device_type, workers", [
    ({0, 1}, None, "cpu", 0),  # the forward's 2 threads use both cores: the main process reads the tiles
    ({0, 1}, None, "cuda", 1),  # the forward runs on the GPU: a worker decodes beside it
    ({0, 1, 2, 3}, None, "cpu", 3),
    ({0, 1, 2, 3}, "2", "cpu", 0),  # two torchrun ranks share 4 CPUs: 2 each
    ({0, 1, 2, 3, 4, 5, 6, 7}, None, "cpu", 4),
    ({0, 1, 2, 3, 4, 5, 6, 7}, None, "cuda", 7),  # a GPU forward is fed by every core the main process spares
    (set(range(32)), None, "cuda", 12),
    (set(range(16)), "4", "cuda", 3),  # four ranks, one GPU each, share 16 CPUs
])
def test_workers_default_to_none_where_they_would_take_the_forwards_cores(monkeypatch, cpus_here, ranks, device_type,
                                                                         workers):
    import os

    from evalsuite.config import RunConfig
    from evalsuite.runtime import cpus

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: cpus_here)
    if ranks:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", ranks)
    else:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert cpus.default_num_workers(device_type) == workers
    assert RunConfig(task="demo").for_device(device_type).num_workers == workers
    assert RunConfig(task="demo", num_workers=2).for_device(device_type).num_workers == 2  # asked for: kept


@pytest.mark.parametrize("device_type, batch_size", [("cpu", 16), ("cuda", 64)])
def test_extraction_batch_defaults_to_16_on_the_cpu_and_64_on_a_gpu(device_type, batch_size):
    from evalsuite.config import RunConfig

    assert RunConfig(task="demo").for_device(device_type).batch_size == batch_size
    assert RunConfig(task="demo", batch_size=128).for_device(device_type).batch_size == 128  # asked for: kept


def test_a_cpu_run_records_the_batch_size_it_extracted_with(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--probes", "knn",
                     "--num-workers", "0", "--device", "cpu", "--out", out, timeout=300)
    assert result.returncode == 0, result.stderr
    run = json.loads(next((out / "runs").glob("*.json")).read_text())
    assert run["config"]["batch_size"] == 16
    result = run_cli("run", "--task", "demo", "--batch-size", "0", "--out", tmp_path / "bad", timeout=120)
    assert result.returncode != 0 and "--batch-size and --chunk-rows must be >= 1" in result.stderr
