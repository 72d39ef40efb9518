"""Slurm's per-node count variables, read in the compressed form Slurm writes them.

SLURM_CPUS_ON_NODE, SLURM_JOB_CPUS_PER_NODE and SLURM_TASKS_PER_NODE may hold one count (`8`), a count repeated
over nodes (`2(x3)`: 2 on each of 3 nodes) or a list of such (`72(x2),36`). `int()` of `2(x2)` raised an internal
error where the memory budget reads SLURM_CPUS_ON_NODE. A node takes its own entry (SLURM_NODEID), the first
when Slurm does not say which node this is.
"""

import re

from evalsuite.errors import EvalsuiteError

_ENTRY = re.compile(r"(\d+)(?:\(x(\d+)\))?")


def count_runs(text: str) -> list[tuple[int, int]] | None:
    """[(count, nodes)] of a Slurm count list: `72(x2),36` -> [(72, 2), (36, 1)]; None when it is not one. Runs
    are not expanded: a hostile `1(x99999999999)` costs nothing."""
    runs = []
    for entry in str(text).strip().split(","):
        match = _ENTRY.fullmatch(entry.strip())
        if not match or match.group(2) == "0":
            return None
        runs.append((int(match.group(1)), int(match.group(2) or 1)))
    return runs


def count_on_this_node(name: str, env: dict) -> int | None:
    """This node's count from the Slurm variable `name` in `env`; None when it is unset or empty."""
    text = env.get(name)
    if not text:
        return None
    runs = count_runs(text)
    if runs is None:
        raise EvalsuiteError(f"{name}={text!r} is not a Slurm count such as 8, 2(x3) or 72(x2),36; unset it or run "
                             "inside the Slurm job that set it")
    node = env.get("SLURM_NODEID", "")
    nodes_before = int(node) if node.isdigit() else 0
    for count, nodes in runs:
        if nodes_before < nodes:
            return count
        nodes_before -= nodes
    return runs[0][0]  # SLURM_NODEID beyond the list: not this job's numbering; the first node's count
