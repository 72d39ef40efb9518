"""Smoke tests for benchmarks/slide_encoders.py at a tiny setting, and for gpu_check.py's slide-encoder part.

Only the exit code, the machine and host lines, the table's rows and the verdict lines are checked; seconds and
memory figures are the benchmark's output to read, never something a test asserts.
"""

import importlib.util
import sys

import pytest
import torch
from conftest import REPO, run_benchmark


@pytest.mark.slow
def test_slide_encoders_tiny(tmp_path):
    # the cheapest encoder at two counts (given out of order: the rows come sorted), one forward a point; each point
    # is a fresh process importing torch and timm, which is most of the time
    result = run_benchmark("slide_encoders.py", "--models", "chief", "--tiles", 100, 50, "--repeat-seconds", 0,
                           "--no-run", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "torch " in lines[0], result.stdout
    assert lines[1].startswith("host: ") and "native bf16 " in lines[1], result.stdout
    header = next(i for i, line in enumerate(lines) if line.startswith("model "))
    assert "peak / estimate" in lines[header] and "estimate MiB" in lines[header], result.stdout
    rows = [line.split() for line in lines[header + 2:header + 4]]
    assert [row[:3] for row in rows] == [["chief", "cpu", "50"], ["chief", "cpu", "100"]], result.stdout
    assert all(float(row[3]) > 0 and float(row[-3]) > 0 and float(row[-1]) >= 0 for row in rows), result.stdout
    assert any(line.startswith("chief on cpu at 100 tiles: peak / forward_bytes ") and "scaling 100 / 50" in line
               for line in lines), result.stdout
    assert "run: " not in result.stdout  # --no-run: no demo run


@pytest.mark.slow
def test_slide_encoders_time_cap_skips_the_point_and_larger_ones(tmp_path):
    # the first point's process cannot even import torch in 0.5 s: killed, and the larger point not started
    result = run_benchmark("slide_encoders.py", "--models", "madeleine", "--tiles", 50, 100, "--max-seconds", 0.5,
                           "--no-run", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[:4] for line in lines if line.startswith("madeleine ")] == \
        [["madeleine", "cpu", "50", "skipped"], ["madeleine", "cpu", "100", "skipped"]], result.stdout
    assert "(1) madeleine on cpu at 50 tiles: killed at --max-seconds 0.5" in lines, result.stdout
    assert "(2) madeleine on cpu at 100 tiles: the 50-tile point was skipped" in lines, result.stdout
    assert result.stderr.count("madeleine 100 tiles") == 0, result.stderr


def _gpu_check():
    folder = REPO / "benchmarks"
    sys.path.insert(0, str(folder))  # its `_shared` and `slide_encoders`
    spec = importlib.util.spec_from_file_location("gpu_check_benchmark", folder / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_slide_encoder_part_on_the_cpu():
    # gpu_check's part in this process at 20 tiles: the rows, their table and the markdown section; no GPU peak here.
    gpu_check = _gpu_check()
    rows = gpu_check.measure_slide_encoders(["chief", "feather-uni2"], (20,), torch.device("cpu"))
    assert [(row["model"], row["tiles"]) for row in rows] == [("chief", 20), ("feather-uni2", 20)]
    assert all(row["seconds"] > 0 and row["estimate_bytes"] > 0 and row["peak_bytes"] is None for row in rows)
    assert "skipped: no CUDA device" in gpu_check.slide_encoder_table(rows)
    args = gpu_check.parse_args(["--smoke"])
    assert gpu_check.slide_encoder_names(args) == []  # CI's smoke run keeps its parts
    assert gpu_check.slide_encoder_names(gpu_check.parse_args(["--slide-encoders", "chief"])) == ["chief"]
    report = {"machine": "m", "host": "h", "device": "cpu", "smoke": True, "precision": "fp32", "batch_size": 16,
              "num_workers": 0, "total_s": 1.0, "parts": {}, "models": [], "slide_encoders": rows}
    section = gpu_check.markdown(report).split("## Slide encoders (float32, random weights)")[1]
    assert "| chief | 20 |" in section.split("## bf16")[0]


def test_gpu_check_rejects_an_unknown_slide_encoder():
    with pytest.raises(SystemExit):
        _gpu_check().parse_args(["--slide-encoders", "no-such-encoder"])

