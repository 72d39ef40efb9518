"""How much host memory this process may use: --mem, the Slurm allocation, cgroups, MemAvailable.

Without --mem the limit is the smallest of the Slurm allocation, the cgroup limit and MemAvailable. A --mem is the
budget as given: MemAvailable (what is free on this host now, which other processes move) is not consulted, so a
login node with 20 GiB free plans an 85G job as 85G. Only limits enforced on this process still cap it: the Slurm
allocation and the cgroup limit; and `budget`, which plans a job to run elsewhere, leaves out a cgroup limit outside
a Slurm job too (a login session's, not the job's). `set_aside` names what was not consulted, for the output.

Every source is read from a root folder so tests can point it at fake /proc and /sys trees.
A source that does not apply (no Slurm, no cgroup limit) is simply absent.
"""

import os
import re
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.runtime.slurm_counts import count_on_this_node

_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
# cgroup v1 reports "no limit" as a page-rounded 2**63 - 1; anything this large means unlimited.
_CGROUP_UNLIMITED_BYTES = 1 << 60


def parse_size_bytes(text: str, default_unit: str = "") -> int:
    """'85G', '1024M', '512K', '2048' (bytes unless default_unit says otherwise)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGTB]?)(?:i?B)?\s*", str(text), flags=re.IGNORECASE)
    if not match:
        raise EvalsuiteError(f"cannot read memory size '{text}'; use a number with K, M, G or T (e.g. 85G)")
    unit = (match.group(2) or default_unit).upper()
    return int(float(match.group(1)) * _UNITS[unit])


def slurm_limit_bytes(env: dict) -> tuple[str, int] | None:
    """Slurm exports memory in megabytes: per node, or per CPU times the CPUs on this node.

    0 is `--mem=0`, "all the node's memory": Slurm sets no figure then, so the source is absent and
    the cgroup limit and MemAvailable decide."""
    if env.get("SLURM_MEM_PER_NODE"):
        per_node_bytes = parse_size_bytes(env["SLURM_MEM_PER_NODE"], "M")
        return ("SLURM_MEM_PER_NODE", per_node_bytes) if per_node_bytes else None
    if env.get("SLURM_MEM_PER_CPU"):
        # Slurm writes counts compressed (`2(x2)`: 2 on each of 2 nodes): this node's entry (runtime/slurm_counts.py).
        cpus = (count_on_this_node("SLURM_CPUS_ON_NODE", env) or count_on_this_node("SLURM_CPUS_PER_TASK", env)
                or 1)
        per_cpu_bytes = parse_size_bytes(env["SLURM_MEM_PER_CPU"], "M")
        return ("SLURM_MEM_PER_CPU", per_cpu_bytes * cpus) if per_cpu_bytes else None
    return None


def _own_cgroup_paths(proc_root: Path) -> dict:
    """{'v2': '/path'} and/or {'v1': '/path'} from /proc/self/cgroup."""
    paths = {}
    try:
        lines = (proc_root / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            paths["v2"] = path
        elif "memory" in controllers.split(","):
            paths["v1"] = path
    return paths


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text in ("", "max") or int(text) >= _CGROUP_UNLIMITED_BYTES:
        return None
    return int(text)


def cgroup_limit_bytes(sys_root: Path, proc_root: Path) -> tuple[str, int] | None:
    paths = _own_cgroup_paths(proc_root)
    candidates = []
    if "v2" in paths:
        candidates.append(("cgroup v2 memory.max", sys_root / "fs/cgroup" / paths["v2"].lstrip("/") / "memory.max"))
    if "v1" in paths:
        candidates.append(("cgroup v1 memory.limit_in_bytes",
                           sys_root / "fs/cgroup/memory" / paths["v1"].lstrip("/") / "memory.limit_in_bytes"))
    limits = [(name, limit) for name, path in candidates if (limit := _read_limit(path)) is not None]
    return min(limits, key=lambda item: item[1]) if limits else None


def mem_available_bytes(proc_root: Path) -> tuple[str, int] | None:
    try:
        for line in (proc_root / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return "MemAvailable", int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_sources(mem: str | None = None, env: dict | None = None, sys_root: Path = Path("/sys"),
                   proc_root: Path = Path("/proc"), elsewhere: bool = False) -> dict:
    """{source name: bytes} for every limit that applies (module docstring: which, with and without --mem)."""
    return limit_sources(mem, env, sys_root, proc_root, elsewhere)[0]


def limit_sources(mem: str | None = None, env: dict | None = None, sys_root: Path = Path("/sys"),
                  proc_root: Path = Path("/proc"), elsewhere: bool = False) -> tuple[dict, dict]:
    """({source: bytes} consulted, {source: bytes} found on this host but set aside because --mem was given)."""
    env = os.environ if env is None else env
    slurm = slurm_limit_bytes(env)
    cgroup = cgroup_limit_bytes(Path(sys_root), Path(proc_root))
    available = mem_available_bytes(Path(proc_root))
    if not mem:
        return dict(source for source in (slurm, cgroup, available) if source is not None), {}
    in_job = slurm is not None or bool(env.get("SLURM_JOB_ID"))
    keep_cgroup = in_job or not elsewhere
    used = [("--mem", parse_size_bytes(mem)), slurm, cgroup if keep_cgroup else None]
    aside = [available, None if keep_cgroup else cgroup]
    return dict(s for s in used if s is not None), dict(s for s in aside if s is not None)

