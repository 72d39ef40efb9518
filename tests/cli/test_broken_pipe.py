"""Output piped into a reader that leaves early (`| head -3`) ends quietly, as Unix tools do (issue 25 item 7)."""

import os
import subprocess
import sys

from evalsuite.errors import EXIT_BROKEN_PIPE

# Reference: what bash reports for `yes | head -1`'s `yes`, killed by SIGPIPE: 128 + 13.
SIGPIPE_EXIT = 141


def test_exit_code_is_the_one_shells_report_for_sigpipe():
    assert EXIT_BROKEN_PIPE == SIGPIPE_EXIT


def test_reader_gone_before_the_first_write_is_quiet():
    """The pipe's read end is closed before evalsuite writes: its first write fails with EPIPE every time."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "evalsuite", "list", "models"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.stderr == ""  # it was "evalsuite: internal error: BrokenPipeError ..." with exit code 1
    assert done.returncode == SIGPIPE_EXIT


def test_list_models_piped_to_head_as_a_user_types_it():
    # Repeated: one listing (3.4 KB) fits the pipe buffer and never breaks it, but the listings written after head
    # left do, the case that printed the internal error.
    script = (f'for i in $(seq 10); do "{sys.executable}" -m evalsuite list models; done | head -3 >/dev/null; '
              'echo "${PIPESTATUS[0]}" >&2')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600)
    assert "internal error" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] in ("0", str(SIGPIPE_EXIT)), done.stderr  # the last listing's exit
