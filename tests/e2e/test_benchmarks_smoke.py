"""Smoke tests for the scripts in benchmarks/: each runs once at a tiny setting and prints its table.

Only the exit code and the table header are checked; the numbers (memory, metrics) are the
benchmarks' output to read, not something a test asserts.
"""

import pytest
from conftest import run_benchmark


@pytest.mark.parametrize("name", ["cache_memory.py", "precision_neutrality.py", "probe_batches.py",
                                  "extract_overhead.py", "demo_wall_time.py"])
def test_help(name, tmp_path):
    result = run_benchmark(name, "--help", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


@pytest.mark.slow
def test_cache_memory_tiny(tmp_path):
    result = run_benchmark("cache_memory.py", "--sizes", "0.02", "--lr", "1e-3", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    header = result.stdout.splitlines()[0].split()
    assert header[:4] == ["size", "GiB", "mode", "rows"] and "peak/size" in header, result.stdout
    assert " ram " in result.stdout and " memmap " in result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("evalsuite-cache-memory-")]  # work folder removed


@pytest.mark.slow
def test_precision_neutrality_tiny(tmp_path):
    # A tiny random-init ViT on 8 samples per split, fp32 vs bf16 autocast (CPU bf16 runs everywhere, emulated or not).
    result = run_benchmark("precision_neutrality.py", "--model", "test_vit", "--random-init", "--max-samples", 8,
                           "--precisions", "bf16", "--batch-size", 4, "--num-workers", 0, "--no-rerun",
                           "--device", "cpu", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "torch " in lines[0], result.stdout
    features_header = lines.index(next(line for line in lines if line.startswith("precision ")))
    assert lines[features_header].split()[:4] == ["precision", "forward", "med", "p95"], result.stdout
    assert [line.split()[0] for line in lines[features_header + 2:features_header + 4]] == ["fp32", "bf16"]
    metrics_header = next(line for line in lines if line.startswith("probe "))
    assert metrics_header.split() == ["probe", "metric", "fp32", "float32", "fp32", "cast", "d", "bf16", "d"]
    assert any(line.split()[:2] == ["linear", "balanced_accuracy"] for line in lines), result.stdout
    assert any(line.split()[:2] == ["knn", "balanced_accuracy"] for line in lines), result.stdout
    assert "max |d|: cast " in result.stdout and "float16 cast of the fp32 output" in result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("precision_neutrality.")]  # caches removed


def test_precision_neutrality_rejects_unknown_precision(tmp_path):
    result = run_benchmark("precision_neutrality.py", "--precisions", "int8", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 2 and "invalid choice: 'int8'" in result.stderr, result.stderr


@pytest.mark.parametrize("args, message", [(["--variants", "default"], "--variants must include fp32"),
                                           (["--rounds", "0"], "--rounds must be >= 1")])
def test_demo_wall_time_rejects_bad_options(args, message, tmp_path):
    result = run_benchmark("demo_wall_time.py", *args, tmp_path=tmp_path, timeout=120)
    assert result.returncode == 2 and message in result.stderr, result.stderr
