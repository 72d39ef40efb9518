"""What the cluster lets one submission ask for, read with `scontrol` before anything is submitted.

- `MaxArraySize` (`scontrol show config`; Slurm's default 1001): an array task id must be below it, so a sweep of
  more elements is split into several arrays. `max_array_tasks=` in `SchedulerParameters` caps the tasks of one
  array further.
- The partition's `MaxMemPerNode` (`scontrol -o show partition`, in MB): sbatch rejects a job above it (or, with
  `EnforcePartLimits=NO`, the job pends forever), so a cell planned above it is refused before submission.
- The partition's `DefaultTime` (else `MaxTime`): the time limit of a sweep without `slurm.time`, which the USR1
  warning must come before.

Without `scontrol` on PATH (a dry run on a laptop), or when it does not answer, a dry run goes on with Slurm's
defaults and says so; a real submission stops with `scontrol`'s message.
"""

import shutil
import subprocess
from dataclasses import dataclass

from evalsuite.errors import EvalsuiteError, one_line

SLURM_DEFAULT_MAX_ARRAY_SIZE = 1001  # slurm.conf(5): MaxArraySize
_UNLIMITED = ("UNLIMITED", "INFINITE", "NONE", "-1", "")


@dataclass(frozen=True)
class SlurmLimits:
    max_array_size: int  # an array task id must be below it
    tasks_per_array: int  # the most tasks one array may hold (max_array_tasks, else max_array_size)
    partition: str | None  # the partition the jobs go to (None: unknown)
    max_mem_per_node_mb: int | None  # None: unlimited, or the partition could not be read
    partition_time_s: int | None  # the partition's DefaultTime, else MaxTime; None: unlimited or unknown
    source: str  # where the figures come from, for the one line `sweep run` prints

    def describe(self) -> str:
        mem = f"{self.max_mem_per_node_mb}M" if self.max_mem_per_node_mb else "unlimited"
        return (f"slurm limits ({self.source}): MaxArraySize {self.max_array_size}, {self.tasks_per_array} tasks "
                f"an array; partition {self.partition or '(unknown)'}: MaxMemPerNode {mem}")


def read_limits(slurm, dry_run: bool, say) -> SlurmLimits:
    """The limits for the sweep's `slurm` options (their partition), from scontrol, or Slurm's defaults in a dry
    run that cannot ask."""
    config = _scontrol(["show", "config"], dry_run, say)
    if config is None:
        return SlurmLimits(SLURM_DEFAULT_MAX_ARRAY_SIZE, SLURM_DEFAULT_MAX_ARRAY_SIZE, _named_partition(slurm), None,
                           None, "Slurm's defaults: scontrol cannot be asked here")
    settings = _config_settings(config)
    max_array_size = _config_int(settings, "MaxArraySize", SLURM_DEFAULT_MAX_ARRAY_SIZE)
    if max_array_size < 1:
        raise EvalsuiteError("scontrol show config: MaxArraySize is 0, job arrays are disabled on this cluster; run "
                             "the sweep with --executor local, or ask the admins for arrays")
    name, partition = _partition(slurm, say)
    return SlurmLimits(max_array_size, min(max_array_size, _max_array_tasks(settings, max_array_size)), name,
                       _mb(partition.get("MaxMemPerNode")),
                       time_limit_s(partition.get("DefaultTime")) or time_limit_s(partition.get("MaxTime")),
                       "scontrol")


def _scontrol(args: list, dry_run: bool, say) -> str | None:
    """scontrol's output; None in a dry run where it is missing or fails (said in one line)."""
    if shutil.which("scontrol") is None:
        if dry_run:
            return None
        raise EvalsuiteError("scontrol not found on PATH: this host cannot submit to Slurm; run the sweep here with "
                             "--executor local, or from a Slurm login node")
    output, reason = _ask(args)
    if output is not None:
        return output
    if dry_run:
        say(f"note: {reason}; the dry run assumes Slurm's defaults")
        return None
    raise EvalsuiteError(f"{reason}; check that slurmctld answers (`scontrol ping`) and submit again")


def _ask(args: list) -> tuple:
    """(stdout, None), or (None, the one-line reason scontrol failed)."""
    try:
        result = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"scontrol {' '.join(args)} failed: {one_line(exc)}"
    if result.returncode == 0:
        return result.stdout, None
    said = (result.stderr.strip() or result.stdout.strip() or "no message").splitlines()[-1]  # its last word: the cause
    return None, f"scontrol {' '.join(args)} failed (exit {result.returncode}): {one_line(Exception(said))}"


def _config_settings(text: str) -> dict:
    """`Key = value` lines of `scontrol show config`."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _config_int(settings: dict, key: str, default: int) -> int:
    try:
        return int(settings[key])
    except (KeyError, ValueError):
        return default


def _max_array_tasks(settings: dict, default: int) -> int:
    for option in settings.get("SchedulerParameters", "").split(","):
        name, _, value = option.partition("=")
        if name.strip() == "max_array_tasks" and value.strip().isdigit():
            return int(value)
    return default


def sbatch_option(slurm, name: str, short: str) -> str | None:
    """The value the jobs get for sbatch's --NAME: slurm.NAME, else a `--NAME=`/`-SHORT ` line of slurm.extra (the
    last one wins), else None."""
    value = getattr(slurm, name)
    for line in slurm.extra:
        option = line if line.startswith("-") else f"--{line}"
        for prefix in (f"--{name}=", f"-{short} "):
            if option.startswith(prefix):
                value = option[len(prefix):].strip()
    return str(value) if value else None


def _named_partition(slurm) -> str | None:
    return sbatch_option(slurm, "partition", "p")


def _partition(slurm, say) -> tuple:
    """(name, {key: value}) of the partition the jobs go to: the named one (of a list, the one allowing the most
    memory: a job goes to whichever takes it), else the cluster's default; {} when scontrol cannot tell."""
    text, reason = _ask(["-o", "show", "partition"])  # a limit we cannot read is no reason to stop
    if text is None:
        say(f"note: {reason}; MaxMemPerNode is not checked")
    table = {}
    for line in (text or "").splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("PartitionName"):
            table[fields["PartitionName"]] = fields
    named = _named_partition(slurm)
    names = named.split(",") if named else [n for n, f in table.items() if f.get("Default") == "YES"][:1]
    found = [(name, table[name]) for name in names if name in table]
    if not found:
        if text is not None:
            say(f"note: scontrol show partition does not list {named or 'a default partition'}; MaxMemPerNode is "
                "not checked")
        return named, {}
    return max(found, key=lambda item: _mb(item[1].get("MaxMemPerNode")) or float("inf"))


def _mb(value) -> int | None:
    return int(value) if str(value).isdigit() and int(value) else None  # UNLIMITED, or not shown


def time_limit_s(text) -> int | None:
    """Seconds of a Slurm time (`min`, `min:sec`, `hr:min:sec`, `days-hr[:min[:sec]]`, as sbatch --time reads it,
    rounded up to whole minutes as Slurm keeps it); None for no limit (unlimited, 0) or a text Slurm would not read
    either (sbatch then says so itself)."""
    text = str(text or "").strip()
    if text.upper() in _UNLIMITED:
        return None
    days, _, clock = text.rpartition("-") if "-" in text else ("0", "", text)
    try:
        parts = [int(part) for part in clock.split(":")] if clock else [0]
        day_count = int(days)
    except ValueError:
        return None
    if "-" in text:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = (parts + [0, 0])[:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    else:  # minutes[:seconds]
        hours, (minutes, seconds) = 0, (parts + [0])[:2]
    total_s = day_count * 86400 + hours * 3600 + minutes * 60 + seconds
    return -(-total_s // 60) * 60 or None  # --time=0: no limit
