"""How much host memory this process may use: --mem, the Slurm allocation, cgroups, MemAvailable.

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
                   proc_root: Path = Path("/proc")) -> dict:
    """{source name: bytes} for every limit that applies to this process."""
    env = os.environ if env is None else env
    found = [("--mem", parse_size_bytes(mem))] if mem else []
    for source in (slurm_limit_bytes(env), cgroup_limit_bytes(Path(sys_root), Path(proc_root)),
                   mem_available_bytes(Path(proc_root))):
        if source is not None:
            found.append(source)
    return dict(found)
