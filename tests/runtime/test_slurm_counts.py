"""Slurm's compressed per-node counts (issue 40): `2(x2)` was an internal error where the budget reads
SLURM_CPUS_ON_NODE."""

import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.runtime.slurm_counts import count_on_this_node


@pytest.mark.parametrize("text, node, count", [
    ("8", None, 8), ("2(x2)", None, 2), ("72(x2),36", "1", 72), ("72(x2),36", "2", 36), (" 4 ", None, 4),
    ("72(x2),36", "9", 72), ("1(x99999999999999)", "5", 1),
], ids=["plain", "repeated", "run-node-1", "list-node-2", "spaces", "node-beyond", "huge-run"])
def test_counts_are_read_as_slurm_writes_them(text, node, count):
    env = {"SLURM_CPUS_ON_NODE": text, **({"SLURM_NODEID": node} if node else {})}
    assert count_on_this_node("SLURM_CPUS_ON_NODE", env) == count


def test_unset_is_none():
    assert count_on_this_node("SLURM_CPUS_ON_NODE", {"SLURM_CPUS_ON_NODE": ""}) is None
    assert count_on_this_node("SLURM_CPUS_ON_NODE", {}) is None


@pytest.mark.parametrize("text", ["two", "2(x0)", "2(x)", "-1", "2,,3", "2\n3"])
def test_a_value_slurm_would_not_write_is_one_line_naming_the_variable(text):
    with pytest.raises(EvalsuiteError) as caught:
        count_on_this_node("SLURM_CPUS_ON_NODE", {"SLURM_CPUS_ON_NODE": text})
    assert str(caught.value).startswith(f"SLURM_CPUS_ON_NODE={text!r} is not a Slurm count")
    assert "\n" not in str(caught.value)
