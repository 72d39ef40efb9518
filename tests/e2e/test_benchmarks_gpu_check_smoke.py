"""Smoke tests for benchmarks/gpu_check.py (issue 39): its --smoke run on the CPU, and its refusal without a GPU.

Only the exit code, the files it writes, their sections and keys, and the one-line refusal are checked; the img/s,
seconds, memory and error figures are the check's output to read, never something a test asserts.
"""

import json
import math

import pytest
import torch
from conftest import run_benchmark

SECTIONS = ("# gpu_check", "## Parts", "## Throughput: extraction vs forward", "## GPU memory",
            "## bf16 vs fp32 pooled features", "## CUDA tests", "## torchrun")


@pytest.mark.slow
def test_gpu_check_smoke_writes_its_json_and_markdown(tmp_path):
    out = tmp_path / "out"
    result = run_benchmark("gpu_check.py", "--smoke", "--out", out, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "torch " in lines[0], result.stdout
    assert lines[1].startswith("host: "), result.stdout
    assert f"json: {out / 'gpu_check.json'}" in lines and f"markdown: {out / 'gpu_check.md'}" in lines
    assert lines[-1].startswith("gpu_check: ") and lines[-1].endswith("every part ran"), result.stdout

    report = json.loads((out / "gpu_check.json").read_text())
    assert {"machine", "host", "device", "smoke", "precision", "batch_size", "num_workers", "parts", "models", "data",
            "cuda_tests", "torchrun", "total_s"} <= set(report)
    assert report["smoke"] is True
    cuda = torch.cuda.is_available()
    expected_parts = {"data", "model timm test ViT", "cuda tests", "torchrun"} | (set() if cuda else {"gpu memory"})
    assert set(report["parts"]) == expected_parts
    assert all(part["status"] in ("ok", "skipped") and part["seconds"] >= 0 for part in report["parts"].values())
    [model] = report["models"]
    assert model["timm_name"] == "test_vit"
    assert {"forward", "pcam", "slides", "bf16_vs_fp32", "steps_s", "weights_gib", "host"} <= set(model)
    for data in ("forward", "pcam", "slides"):
        assert model[data]["tiles"] > 0 and model[data]["img_per_s"] > 0, data
    assert model["pcam"]["tiles"] == report["data"]["pcam_tiles"]["train"]
    assert model["slides"]["tiles"] <= report["data"]["slide_tiles"]
    errors = model["bf16_vs_fp32"]
    assert all(math.isfinite(errors[key]) for key in ("max_rel_error", "median_rel_error", "min_cosine"))
    assert 0 <= errors["median_rel_error"] <= errors["max_rel_error"]
    assert report["torchrun"]["exit_code"] == 0 and report["torchrun"]["world_size"] == 1, report["torchrun"]
    assert report["cuda_tests"]["counts"].get("collected" if not cuda else "passed", 0) > 0, report["cuda_tests"]

    summary = (out / "gpu_check.md").read_text()
    positions = [summary.find(section) for section in SECTIONS]
    assert -1 not in positions and positions == sorted(positions), summary
    if not cuda:
        memory = summary[summary.index("## GPU memory"):summary.index("## bf16 vs fp32")]
        tests = summary[summary.index("## CUDA tests"):summary.index("## torchrun")]
        assert "skipped: no CUDA device" in memory and "skipped: no CUDA device" in tests, summary
        assert "GPU memory: skipped: no CUDA device" in result.stdout
    assert not [path for path in tmp_path.iterdir() if path.name.startswith("evalsuite-gpu-check-")]  # data removed


def test_gpu_check_without_a_gpu_stops_in_one_line(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the full check would run")
    result = run_benchmark("gpu_check.py", "--out", tmp_path / "out", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gpu_check: needs a CUDA GPU; pass --smoke for the CPU check"), lines[0]
    assert not (tmp_path / "out").exists()
