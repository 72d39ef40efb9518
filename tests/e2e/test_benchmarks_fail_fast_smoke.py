"""benchmarks/fail_fast.py (the seconds that tests no longer assert, issue 25 item 13): its help and a bad option."""

from conftest import run_benchmark


def test_fail_fast_help_names_both_cases(tmp_path):
    result = run_benchmark("fail_fast.py", "--help", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout and "--rounds" in result.stdout


def test_fail_fast_rejects_zero_rounds(tmp_path):
    result = run_benchmark("fail_fast.py", "--rounds", "0", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 2 and "--rounds must be >= 1" in result.stderr
