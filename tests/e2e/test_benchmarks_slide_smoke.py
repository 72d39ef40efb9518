"""Smoke tests for the slide benchmarks (slide_extract.py, slide_probe_memory.py) at a tiny setting.

Only the exit code, the machine line, the table header and the ratio lines are checked; timings and memory
figures are the benchmarks' output to read, never something a test asserts.
"""

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_slide_extract_tiny(tmp_path):
    # Two demo slides (about 25 tiles), a tiny random-init ViT, one DataLoader worker, one round.
    result = run_benchmark("slide_extract.py", "--model", "test_vit", "--random-init", "--slides", 2,
                           "--batch-size", 8, "--num-workers", 1, "--threads", 1, "--rounds", 1, "--full-batches",
                           tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "torch " in lines[0], result.stdout
    assert lines[1].split()[:3] == ["measurement", "median", "s"], result.stdout
    for row in ("pure forward (pre-decoded", "pure forward, full batches of 8", "full pipeline (extract_to_cache",
                "  pipeline: chunk writes (", "separately: tiling 2 slides"):
        assert any(line.startswith(row) for line in lines), (row, result.stdout)
    assert "pipeline / pure forward: " in result.stdout and "issue #16 target <= 1.15" in result.stdout
    assert "peak RSS of the pipeline run: " in result.stdout and "MiB (VmHWM" in result.stdout
    assert "on 2 of " in result.stderr and "demo slides" in result.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("evalsuite-slide-extract-")]  # caches removed


@pytest.mark.slow
def test_slide_probe_memory_tiny(tmp_path):
    result = run_benchmark("slide_probe_memory.py", "--slides", 4, 8, "--tiles", 20, "--dim", 16, "--epochs", 1,
                           tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: "), result.stdout
    assert lines[1].split()[:4] == ["slides", "tiles", "cache", "MiB"] and "rise" in lines[1], result.stdout
    assert [line.split()[0] + " " + line.split()[3] for line in lines[3:7]] == \
        ["4 abmil", "4 meanpool", "8 abmil", "8 meanpool"], result.stdout
    assert "RSS rise 8 / 4 slides: abmil " in result.stdout and "cache size ratio " in result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("evalsuite-slide-probe-memory-")]  # removed


@pytest.mark.parametrize("name", ["slide_extract.py", "slide_probe_memory.py"])
def test_help(name, tmp_path):
    result = run_benchmark(name, "--help", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:")


@pytest.mark.parametrize("name, args, message", [
    ("slide_extract.py", ["--slides", "0"], "slide_extract.py: error: --slides must be >= 1"),
    ("slide_probe_memory.py", ["--slides", "1", "8"],
     "slide_probe_memory.py: error: --slides must be >= 2 (the probes need both classes)"),
])
def test_rejects_a_bad_option(name, args, message, tmp_path):
    result = run_benchmark(name, *args, tmp_path=tmp_path, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == message, result.stderr
