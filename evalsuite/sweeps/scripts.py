"""The two job scripts of a Slurm sweep, written readable into `<out>/sweeps/<name>/`.

`array-STAMP.sbatch` runs one element of its `plan-STAMP.json` per array task: every array of the submission uses it,
with the index of its first element as the script's argument (`sbatch ... array-STAMP.sbatch FIRST`), and a task runs
`evalsuite sweep element PLAN $((FIRST + SLURM_ARRAY_TASK_ID))`. Everything an element needs is in the plan file, so
no argument travels through `--export` (which splits at commas) and paths with spaces stay whole (every path is
shell-quoted). A stop signal (USR1, which the script asks Slurm to send it `slurm.warn_before_limit_s` before the time
limit, or from `scancel --batch --signal=USR1`; TERM from a preemption) is passed to evalsuite, which stops after its
extraction chunk with exit 75. After USR1 the script requeues its own array task, which resumes from the chunks on
disk; a USR1 that comes while no extraction runs (the model loading, the probes training) ends evalsuite at once and
the task is requeued all the same, redoing only what is not on disk. After TERM (scancel, a preemption, the time
limit itself) Slurm decides: it requeues preempted jobs itself, a cancelled one or one out of time ends.
`leaderboard-STAMP.sbatch` rebuilds the wide leaderboard once every element has ended.
"""

import shlex
import sys
import time

from evalsuite.errors import EXIT_PREEMPTED
from evalsuite.sweeps.slurm_options import CONTROL_CHARACTERS

MAX_REQUEUES = 5


def _option_lines(slurm, job_name: str, log_pattern: str, with_gpus: bool) -> list:
    # sbatch reads a directive's value up to white space unless it is in double quotes (a path with spaces). The
    # values hold no double quote or line break (sweeps/slurm_options.py and spec.py refuse them).
    lines = [f"--job-name={job_name}", f'--output="{log_pattern}"']
    for flag, value in (("partition", slurm.partition), ("account", slurm.account), ("time", slurm.time)):
        if value:
            lines.append(f'--{flag}="{value}"')
    if with_gpus and slurm.gpus:
        lines.append(f'--gpus="{slurm.gpus}"')
    if with_gpus and slurm.cpus:
        lines.append(f"--cpus-per-task={slurm.cpus}")
    extra = [line if line.startswith("-") else f"--{line}" for line in slurm.extra]
    # The leaderboard job needs no GPU: it keeps the cluster's other required lines (--qos, --constraint, ...).
    lines += extra if with_gpus else [line for line in extra if not line.startswith(("--gres", "--gpu"))]
    return [f"#SBATCH {line}" for line in lines]


def _header(sweep, purpose: str) -> list:
    # A line break in the sweep file's path would end this comment and start a command.
    path = CONTROL_CHARACTERS.sub("?", str(sweep.path))
    return ["#!/bin/bash", f"# evalsuite sweep '{sweep.name}' ({path}): {purpose}",
            f"# Written by `evalsuite sweep run --executor slurm` on {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; "
            "docs/sweeps.md explains it."]


def _python(slurm) -> str:
    return shlex.quote(slurm.python) if slurm.python else shlex.quote(sys.executable)


def array_script(sweep, folder, plan_path) -> str:
    """The array script: element FIRST + $SLURM_ARRAY_TASK_ID of the plan, requeued on a stop signal."""
    slurm = sweep.slurm
    lines = _header(sweep, "one array task per element of its plan file (a cell, or one extraction shard of a cell)")
    lines += _option_lines(slurm, f"evalsuite-{sweep.name}", str(folder / "logs" / "%A_%a.out"), with_gpus=True)
    # --open-mode=append: a requeued task adds to its log instead of replacing the first attempt's lines.
    # The warning must leave time to finish the extraction chunk in hand and requeue (docs/sweeps.md).
    lines += ["#SBATCH --requeue", "#SBATCH --open-mode=append",
              f"#SBATCH --signal=B:USR1@{slurm.warn_before_limit_s}", "", "set -uo pipefail",
              "# sbatch's argument: this array's first element in the plan (every array's task ids start at 0); read "
              "before the setup lines, which may source scripts that see it",
              'ELEMENT=$(( ${1:?the first element of this array} + SLURM_ARRAY_TASK_ID ))', *slurm.setup,
              f"PYTHON={_python(slurm)}", f"PLAN={shlex.quote(str(plan_path))}", f"MAX_REQUEUES={MAX_REQUEUES}",
              'TASK="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"  # this task; $SLURM_JOB_ID of task 0 is the '
              'whole array\'s id',
              'echo "[evalsuite-sweep] element $ELEMENT of $PLAN, job $TASK on $(hostname), restart '
              '${SLURM_RESTART_COUNT:-0}"',
              "", "# A stop signal is passed on: evalsuite finishes its extraction chunk and exits "
              f"{EXIT_PREEMPTED}. After TERM (scancel, a preemption) Slurm decides what follows; after USR1 the "
              "task requeues itself.", 'CHILD="" SIGNALLED=""',
              "forward() { SIGNALLED=$1; [ -n \"$CHILD\" ] && kill -s \"$1\" \"$CHILD\" 2>/dev/null; }",
              "trap 'forward USR1' USR1", "trap 'forward TERM' TERM",
              '"$PYTHON" -m evalsuite sweep element "$PLAN" "$ELEMENT" &', "CHILD=$!",
              'wait "$CHILD"; RC=$?',
              'while kill -0 "$CHILD" 2>/dev/null; do wait "$CHILD"; RC=$?; done  # a trap cut the wait short',
              'if [ "$SIGNALLED" = USR1 ] && [ "$RC" != 0 ] && [ "${SLURM_RESTART_COUNT:-0}" -lt "$MAX_REQUEUES" ]; '
              'then',
              '    echo "[evalsuite-sweep] stopped by a signal (exit $RC): requeueing $TASK; it resumes from the '
              'cache"',
              '    scontrol requeue "$TASK" && sleep 60  # the requeue ends this script',
              "fi", 'echo "[evalsuite-sweep] element $ELEMENT ended with exit $RC"', 'exit "$RC"', ""]
    return "\n".join(lines)


def leaderboard_script(sweep, folder) -> str:
    """The final job: the wide leaderboard from every row the elements appended, then the sweep's status."""
    slurm = sweep.slurm
    lines = _header(sweep, "after every element has ended: rebuild the wide leaderboard, print the sweep's status")
    lines += _option_lines(slurm, f"evalsuite-{sweep.name}-leaderboard", str(folder / "logs" / "leaderboard-%j.out"),
                           with_gpus=False)
    lines += ["#SBATCH --mem=4G", "", "set -uo pipefail", *slurm.setup, f"PYTHON={_python(slurm)}",
              f'"$PYTHON" -m evalsuite leaderboard --out {shlex.quote(str(sweep.out))}',
              f'"$PYTHON" -m evalsuite sweep status {shlex.quote(str(sweep.path))}', ""]
    return "\n".join(lines)
