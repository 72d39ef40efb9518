"""The one YAML loader (issue 40): a key written twice in a mapping is refused with the file, the key and both
lines; every YAML read in evalsuite/ goes through it. The CLI cases are in tests/cli/test_bad_input_corpus.py."""

import re
from pathlib import Path

import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.yaml_files import parse_yaml

PACKAGE = Path(__file__).resolve().parents[2] / "evalsuite"
LOADER = PACKAGE / "storage" / "yaml_files.py"


@pytest.mark.parametrize("text, key, lines", [
    ("a: 1\nb: 2\na: 3\n", "a", (1, 3)),
    ("top:\n  x: 1\n  y: 2\n  x: 1\n", "x", (2, 4)),
    ("- {k: 1, k: 2}\n", "k", (1, 1)),
    ("1: one\n1: uno\n", "1", (1, 2)),
], ids=["top", "nested", "flow", "integer"])
def test_a_key_written_twice_names_the_file_the_key_and_both_lines(text, key, lines):
    with pytest.raises(EvalsuiteError) as caught:
        parse_yaml(text, Path("/x/f.yaml"), "sweep file")
    assert str(caught.value) == (f"sweep file /x/f.yaml: key '{key}' is written twice (lines {lines[0]} and "
                                 f"{lines[1]}); keep one (YAML would silently keep only the last)")


def test_a_merged_key_may_be_overridden():
    """`<<: *defaults` then `batch_size: 8`: overriding a merged key is what merges are for."""
    text = "defaults: &d {batch_size: 4, seeds: [0]}\nrun:\n  <<: *d\n  batch_size: 8\n"
    assert parse_yaml(text, Path("f.yaml"), "sweep file")["run"] == {"batch_size": 8, "seeds": [0]}


def test_invalid_yaml_is_one_line():
    with pytest.raises(EvalsuiteError, match=r"^task card f.yaml: not valid YAML \(.*\)$"):
        parse_yaml("a: [1\nb: 2\n", Path("f.yaml"), "task card")


def test_every_yaml_load_in_evalsuite_goes_through_the_loader():
    """A plain yaml.safe_load drops the first of two equal keys without a word."""
    direct = re.compile(r"\byaml\.(safe_|full_|unsafe_)?load(_all)?\b|from yaml import .*load")
    found = [f"{path.relative_to(PACKAGE)}:{number}" for path in sorted(PACKAGE.rglob("*.py")) if path != LOADER
             for number, line in enumerate(path.read_text().splitlines(), 1) if direct.search(line)]
    assert not found, "YAML read without evalsuite.storage.yaml_files: " + ", ".join(found)


def test_no_base_60_numbers():
    """YAML 1.1 read `time: 12:00:00` as 43200 (a Slurm time of 43200 minutes); YAML 1.2, and this loader, as text."""
    assert parse_yaml("time: 12:00:00\nrate: 1:30.5\nn: 12\nx: 0.5\n", Path("f.yaml"), "sweep file") == \
        {"time": "12:00:00", "rate": "1:30.5", "n": 12, "x": 0.5}


@pytest.mark.parametrize("text", ["seeds: [" + "1" * 5000 + "]\n", "date: 2001-13-45\n"], ids=["digits", "date"])
def test_a_value_python_cannot_hold_is_one_line(text):
    """Before: ValueError from int() (over 4300 digits) or datetime (month 13), an internal error."""
    with pytest.raises(EvalsuiteError, match=r"^sweep file f.yaml: a value cannot be read \(.*\); quote it"):
        parse_yaml(text, Path("f.yaml"), "sweep file")
