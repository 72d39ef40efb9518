"""A private single-node Slurm cluster on localhost for the e2e tests (.ci/slurm_up.sh, .ci/slurm_down.sh)."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


@contextlib.contextmanager
def running_cluster(state: Path):
    """SLURM_CONF of a cluster whose daemons and files live in `state`; stopped when the block ends, pass or fail."""
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"}
    try:
        up = subprocess.run(["bash", str(REPO / ".ci/slurm_up.sh"), str(state)], env=env, capture_output=True,
                            text=True, timeout=120)
        assert up.returncode == 0, f"slurm_up.sh failed:\n{up.stdout}\n{up.stderr}"
        yield state / "slurm.conf"
    finally:
        down = subprocess.run(["bash", str(REPO / ".ci/slurm_down.sh"), str(state)], env=env, capture_output=True,
                              text=True, timeout=120)
        print(down.stdout, down.stderr, file=sys.stderr)
