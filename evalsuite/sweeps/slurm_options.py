"""A sweep file's `slurm:` mapping: the sbatch options of its job scripts, checked before anything is written.

An `#SBATCH` line is a comment to bash, and sbatch reads directives up to the first line that is not one. A line
break in a value therefore ends the directives there (the later --requeue, --open-mode and --signal lines are
ignored) and bash runs the rest of the value as a command. So a partition, account, GPU request or time may hold
only the characters Slurm's own names and formats use (no line break, no `;`, `$`, backtick or space), and an
`extra` line no control character; scripts.py writes the values double-quoted, as sbatch reads them. `setup` lines
are shell by design and `python` is shell-quoted.
"""

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.sweeps.limits import time_limit_s

SLURM_KEYS = {"partition", "account", "gpus", "cpus", "time", "array_parallelism", "extra", "setup", "python",
              "mem_margin_gb", "max_mem_gb", "warn_before_limit_s"}
DEFAULT_MEM_MARGIN_GB = 4.0  # interpreter, torch and timm libraries, DataLoader workers: what the plan leaves out
# USR1 this long before the time limit: the extraction chunk in hand must finish in it, or the element ends as
# TIMEOUT without a requeue. It covers the longest chunk measured (docs/sweeps.md, "Preemption and requeue").
DEFAULT_WARN_BEFORE_LIMIT_S = 1200
SLURM_MAX_SIGNAL_TIME_S = 65535  # sbatch(1): --signal's sig_time is at most this
_NAME = r"[A-Za-z0-9_.-]+"  # a Slurm partition, account or GPU type name
# key: (the pattern of its value, what it may hold, an example): the forms sbatch(1) documents for the option
VALUE_FORMS = {
    "partition": (rf"{_NAME}(,{_NAME})*", "names of letters, digits, '_', '.' or '-', separated by commas",
                  "gpu or gpu,gpu-long"),
    "account": (_NAME, "letters, digits, '_', '.' or '-'", "lab42"),
    "gpus": (rf"({_NAME}:)?\d+(,({_NAME}:)?\d+)*", "[type:]count, or a comma-separated list of them",
             "1 or a100:2"),
    "time": (r"[0-9:-]+|(?i:unlimited|infinite)", "digits, ':' and '-', or UNLIMITED", "02:00:00 or 1-12:00:00"),
}
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


@dataclass
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    gpus: str | None = None
    cpus: int | None = None
    time: str | None = None
    array_parallelism: int | None = None
    extra: list = field(default_factory=list)  # more `#SBATCH` option lines, e.g. "--qos=normal"
    setup: list = field(default_factory=list)  # shell lines run before evalsuite (module load, conda activate)
    python: str | None = None  # interpreter in the jobs; None: the one running `sweep run`
    mem_margin_gb: float = DEFAULT_MEM_MARGIN_GB
    max_mem_gb: float | None = None  # the largest --mem a node grants; a cell over it is planned memory-mapped
    warn_before_limit_s: int = DEFAULT_WARN_BEFORE_LIMIT_S  # --signal=B:USR1@this


def slurm_options(raw, path: Path) -> SlurmOptions:
    if not isinstance(raw, dict):
        raise EvalsuiteError(f"sweep file {path}: slurm: must be a mapping of sbatch options")
    for key in raw:
        if key not in SLURM_KEYS:
            raise EvalsuiteError(f"sweep file {path}: unknown key 'slurm.{key}'; known: "
                                 f"{', '.join(sorted(SLURM_KEYS))}")
    options = SlurmOptions(**{key: value for key, value in raw.items() if key not in ("extra", "setup")})
    options.extra = _extra_lines(raw.get("extra"), path)
    options.setup = [line for text in _lines(raw.get("setup"), path, "slurm.setup") for line in text.splitlines()
                     if line.strip()]  # a block of shell lines is what setup is for
    _check_values(options, path)
    for key in ("array_parallelism", "cpus"):
        if getattr(options, key) is not None:
            integer_at_least(getattr(options, key), 1, path, f"slurm.{key}")
    _check_warning(options, path)
    _check_gb(options.mem_margin_gb, path, "mem_margin_gb", "at least 0, such as 4 or 0.5", lambda gb: gb >= 0)
    if options.max_mem_gb is not None:  # 0 would be no limit at all, not a node of 0 GB: refused, not ignored
        _check_gb(options.max_mem_gb, path, "max_mem_gb", "above 0, such as 500 (leave it out to use the "
                  "partition's MaxMemPerNode only)", lambda gb: gb > 0)
    return options


def _check_gb(value, path: Path, key: str, allowed: str, fits) -> None:
    """A number of GB: not a bool, finite (`.inf` would overflow --mem), and `fits`."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or not fits(value):
        raise EvalsuiteError(f"sweep file {path}: slurm.{key} must be a number of GB {allowed}; got {value!r}")


def _check_values(options: SlurmOptions, path: Path) -> None:
    """Each value written into an #SBATCH line has the form sbatch documents for it (module docstring: why)."""
    for key, (pattern, holds, example) in VALUE_FORMS.items():
        value = getattr(options, key)
        if value is None or value == "":  # nothing is written for it
            setattr(options, key, None)
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)) or not re.fullmatch(pattern, str(value)):
            raise EvalsuiteError(f"sweep file {path}: slurm.{key} {value!r} is not a value for sbatch --{key}: write "
                                 f"{holds}, e.g. {example} (a line break or shell character would reach the job "
                                 "script)")
        setattr(options, key, str(value))
    for line in options.extra:
        if CONTROL_CHARACTERS.search(line):
            raise EvalsuiteError(f"sweep file {path}: slurm.extra {line!r} holds a control character; write each "
                                 "sbatch option as plain text on its own line, e.g. --qos=normal")


def _check_warning(options: SlurmOptions, path: Path) -> None:
    """The USR1 warning must fit sbatch's range and come before the time limit: a warning longer than the limit
    stops every element at its first chunk."""
    warn_s = integer_at_least(options.warn_before_limit_s, 1, path, "slurm.warn_before_limit_s")
    if warn_s > SLURM_MAX_SIGNAL_TIME_S:
        raise EvalsuiteError(f"sweep file {path}: slurm.warn_before_limit_s is at most {SLURM_MAX_SIGNAL_TIME_S} "
                             f"(sbatch --signal's limit), got {warn_s}")
    limit_s = time_limit_s(options.time) if options.time else None
    if limit_s and warn_s >= limit_s:
        raise EvalsuiteError(f"sweep file {path}: slurm.warn_before_limit_s ({warn_s} s) is not shorter than "
                             f"slurm.time ({options.time}, {limit_s} s); raise slurm.time or lower the warning")


def _lines(value, path: Path, where: str) -> list:
    if value is None:
        return []
    lines = [value] if isinstance(value, str) else value
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise EvalsuiteError(f"sweep file {path}: {where} must be a line or a list of lines")
    return lines


def _extra_lines(value, path: Path) -> list:
    """Each entry is one #SBATCH line. An entry with a line break was split into two directives, the second one
    nobody wrote as an entry: refused, naming the entry (a YAML block's closing line break is dropped)."""
    lines = [text.strip() for text in _lines(value, path, "slurm.extra")]
    for line in lines:
        if len(line.splitlines()) > 1:
            raise EvalsuiteError(f"sweep file {path}: slurm.extra {line!r} holds a line break, which would make it "
                                 "two #SBATCH lines; write each sbatch option as its own list entry, e.g. extra: "
                                 "[--qos=normal, --constraint=a100]")
    return [line for line in lines if line]


def integer_at_least(value, least: int, path: Path, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise EvalsuiteError(f"sweep file {path}: {where} must be an integer >= {least}, got {value!r}")
    return value
