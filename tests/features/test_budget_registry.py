"""Issue 49 item 3: the cost of a run, and of every cell of a sweep, before running it.

`budget --task pcam --model uni2-h` stopped because the gated weights were absent, though the registry knows the
architecture; it planned host RAM only, and capped `--mem 85G` by the login node's MemAvailable. References:
PCam's official split sizes (262,144 / 32,768 / 32,768 tiles), UNI2-h's published size (681M parameters: its model
card), and the H100 rates docs/compute.md measured (ViT-H/14 1,146 img/s, ViT-g/14 756 img/s, extraction at 0.9 of
the forward or better): a backbone between them in FLOPs plans between their rates.
"""

import json
import math

import pytest

from evalsuite.features import memory_limits

GIB = 1024**3
PCAM = {"train": 262144, "val": 32768, "test": 32768}
BACH_PHOTOS = 400


@pytest.fixture
def no_weights_here(tmp_path, monkeypatch):
    """A host without the gated weights: an empty Hugging Face cache and no hub."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))


@pytest.fixture
def login_node(monkeypatch):
    """No Slurm job, no cgroup limit, 20 GiB MemAvailable."""
    for name in ("SLURM_JOB_ID", "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(memory_limits, "cgroup_limit_bytes", lambda sys_root, proc_root: None)
    monkeypatch.setattr(memory_limits, "mem_available_bytes", lambda proc_root: ("MemAvailable", 20 * GIB))


def test_uni2h_without_weights_plans_ram_gpu_memory_and_device_hours(cli_in_process, tmp_path, no_weights_here,
                                                                     login_node):
    args = ["budget", "--task", "pcam", "--model", "uni2-h", "--out", tmp_path / "out", "--mem", "85G"]
    text = cli_in_process(*args)
    assert text.returncode == 0, text.stderr
    for fragment in ("decision: ram", "GPU memory:", "device-hours:", "assumptions:", "reference GPU: NVIDIA H100",
                     "rates used:", "precision: bf16", "batch size: 64",
                     "planned from task card pcam without its data", "no weights loaded"):
        assert fragment in text.stdout, fragment
    plan = json.loads(cli_in_process(*args, "--json").stdout)
    assert {s["split"]: s["samples"] for s in plan["splits"]} == PCAM
    assert all(s["row_shape"] == [1536] and not s["cached"] for s in plan["splits"])
    assert [s["cache_bytes"] for s in plan["splits"]] == [n * 1536 * 2 for n in PCAM.values()]
    cost = plan["cost"]
    assert round(cost["params"] / 1e6) == 681 and cost["weights_bytes"] == 4 * cost["params"]  # float32 weights
    assert plan["model_bytes"] == cost["weights_bytes"]  # host RAM counts the same weights
    assert cost["gpu_memory_bytes"] == math.ceil(cost["weights_bytes"] * 1.6)  # batch 64, 224 px, bf16
    assert cost["images"] == sum(PCAM.values()) and cost["precision"] == "bf16" and cost["batch_size"] == 64
    assert 0.9 * 756 < cost["extraction_img_s"] < 0.9 * 1146
    assert cost["device_hours"] == pytest.approx(cost["images"] / cost["extraction_img_s"] / 3600, rel=1e-3)
    assert set(plan["assumptions"]) >= {"reference_gpu", "rates", "precision", "batch_size", "gpu_memory"}
    assert not (tmp_path / "out").exists()  # planning writes nothing


def test_mem_as_given_is_the_budget_where_memavailable_is_lower(cli_in_process, tmp_path, login_node):
    """Today's bug: `--mem 85G` on a login node with 20 GiB free planned against 20 GiB."""
    args = ["budget", "--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0", "--out",
            tmp_path / "out"]
    given = cli_in_process(*args, "--mem", "85G", "--json")
    assert given.returncode == 0, given.stderr
    plan = json.loads(given.stdout)
    assert plan["limit_source"] == "--mem" and plan["limit_bytes"] == 85 * GIB
    assert plan["sources"] == {"--mem": 85 * GIB}
    assert plan["set_aside"] == {"MemAvailable": 20 * GIB}
    text = cli_in_process(*args, "--mem", "85G").stdout
    assert "--mem 85G is the budget as given; not consulted: MemAvailable 20.00 GiB" in text
    free = json.loads(cli_in_process(*args, "--json").stdout)  # without --mem, what is free decides, and says so
    assert free["limit_source"] == "MemAvailable" and free["limit_bytes"] == 20 * GIB
    assert "no --mem" in free["limit_rule"]


def test_mem_rule_keeps_the_limits_enforced_on_the_process(tmp_path):
    proc, sys_root = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text("0::/job\n")
    (proc / "meminfo").write_text(f"MemAvailable: {20 * 1024 * 1024} kB\n")
    (sys_root / "fs/cgroup/job").mkdir(parents=True)
    (sys_root / "fs/cgroup/job/memory.max").write_text(f"{16 * GIB}\n")
    roots = {"sys_root": sys_root, "proc_root": proc}
    # run: a cgroup limit caps --mem wherever it is (the kernel enforces it); MemAvailable does not
    assert memory_limits.memory_sources("85G", env={}, **roots) == {"--mem": 85 * GIB, "cgroup v2 memory.max": 16 * GIB}
    # budget outside a job plans the job, not the login session: only --mem
    used, aside = memory_limits.limit_sources("85G", env={}, elsewhere=True, **roots)
    assert used == {"--mem": 85 * GIB} and aside == {"MemAvailable": 20 * GIB, "cgroup v2 memory.max": 16 * GIB}
    # inside a Slurm job the allocation and its cgroup still cap it
    used, _ = memory_limits.limit_sources("85G", env={"SLURM_MEM_PER_NODE": "65536"}, elsewhere=True, **roots)
    assert used == {"--mem": 85 * GIB, "SLURM_MEM_PER_NODE": 64 * GIB, "cgroup v2 memory.max": 16 * GIB}


def test_a_plan_without_weights_equals_the_plan_with_them(cli_in_process, tmp_path):
    """The meta build must price what a loaded backbone prices: same rows, same model bytes, same cost."""
    args = ["budget", "--task", "pannuke", "--model", "kaiko-vits16", "--random-init", "--mem", "8G", "--json",
            "--out", tmp_path / "out"]
    loaded = json.loads(cli_in_process(*args).stdout)
    meta = json.loads(cli_in_process(*args, "--no-weights").stdout)
    for key in ("splits", "model_bytes", "ram_needed_bytes", "memmap_needed_bytes", "cost", "decision"):
        assert meta[key] == loaded[key], key
    assert meta["splits"][0]["row_shape"] == [14, 14, 384]  # 224 px / 16 px patches, ViT-S width
    assert any("--no-weights" in note for note in meta["notes"])


def _sweep(tmp_path, tasks="[pcam, bach, crc]") -> str:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: plan\nout: out\nmodels: [uni2-h, kaiko-vits16]\ntasks: {tasks}\n")
    return str(path)


def test_budget_of_a_sweep_prints_each_cell_and_the_total(cli_in_process, tmp_path, monkeypatch):
    from evalsuite.models import backbones

    monkeypatch.setattr(backbones, "download_weights", lambda *a, **k: pytest.fail("a sweep's plan loads no weights"))
    path = _sweep(tmp_path)
    text = cli_in_process("budget", "--sweep", path)
    assert text.returncode == 0, text.stderr
    rows = [line.split() for line in text.stdout.splitlines() if line.startswith(("uni2-h ", "kaiko-vits16 "))]
    assert sorted((r[0], r[1]) for r in rows) == [("kaiko-vits16", "bach"), ("kaiko-vits16", "pcam"),
                                                 ("uni2-h", "bach"), ("uni2-h", "pcam")]
    assert "total: 4 of 6 cells planned" in text.stdout and "device-hours on the reference GPU" in text.stdout
    assert "not planned (2 cells: uni2-h x crc, kaiko-vits16 x crc): task 'crc' needs its data" in text.stdout
    assert "assumptions:" in text.stdout and "reference GPU: NVIDIA H100" in text.stdout
    result = json.loads(cli_in_process("budget", "--sweep", path, "--json").stdout)
    cells = {(c["model"], c["task"]): c for c in result["cells"]}
    assert cells["uni2-h", "pcam"]["cost"]["images"] == sum(PCAM.values())
    assert cells["kaiko-vits16", "bach"]["cost"]["images"] == BACH_PHOTOS
    assert [s["row_shape"] for s in cells["uni2-h", "bach"]["plan"]["splits"]] == [[1536]] * 3
    total = result["total"]
    assert total["images"] == 2 * (sum(PCAM.values()) + BACH_PHOTOS)
    assert total["device_hours"] == pytest.approx(sum(c["cost"]["device_hours"] for c in result["cells"]), abs=1e-3)
    assert total["largest_gpu_memory_bytes"] == cells["uni2-h", "pcam"]["cost"]["gpu_memory_bytes"]
    assert [c["task"] for c in result["not_planned"]] == ["crc", "crc"]


def test_a_sweep_under_mem_decides_each_cell_and_refuses_with_exit_3(cli_in_process, tmp_path, login_node):
    path = _sweep(tmp_path, "[pcam, pannuke]")
    result = cli_in_process("budget", "--sweep", path, "--mem", "6G", "--json")
    assert result.returncode == 0, result.stderr
    decisions = {(c["model"], c["task"]): c["decision"] for c in json.loads(result.stdout)["cells"]}
    assert decisions["uni2-h", "pcam"] == "ram" and decisions["uni2-h", "pannuke"] == "memmap"
    refused = cli_in_process("budget", "--sweep", path, "--mem", "2G")
    assert refused.returncode == 3 and "cells refused under --mem 2G" in refused.stderr


def test_a_sweep_refuses_the_flags_of_one_run(cli_in_process, tmp_path):
    result = cli_in_process("budget", "--sweep", _sweep(tmp_path), "--task", "pcam", "--batch-size", "32")
    assert result.returncode == 2 and "drop --task, --batch-size" in result.stderr
    assert "needs --task TASK" in cli_in_process("budget").stderr
