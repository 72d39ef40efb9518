"""User-facing errors and every exit code: the CLI prints an error as one line and exits with its code."""

EXIT_INTERNAL = 1  # a bug: the CLI says "internal error" (rerun with --debug for the traceback)
EXIT_USER = 2  # bad input or environment: the message says what to do
EXIT_REFUSE = 3  # the RAM budget gate refused the run (`evalsuite budget`, `run`); job scripts gate on it
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it
EXIT_TERMINATED = 143  # SIGTERM outside an extraction (128 + SIGTERM): stopped where it was, the same command resumes
EXIT_BROKEN_PIPE = 141  # the reader of stdout left (`| head`): 128 + SIGPIPE, what `yes | head -1` gives `yes`
EXIT_SWEEP_INCOMPLETE = 4  # `evalsuite sweep run`: some cells failed (the summary names them); the others are done
EXIT_SWEEP_WAITING = 5  # `evalsuite sweep run` here: no cell failed, but some are queued or running elsewhere
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: stopped after an extraction chunk on a signal; the same command resumes


class EvalsuiteError(Exception):
    """A problem with the user's input or environment, with a message saying what to do."""

    exit_code = EXIT_USER


def one_line(exc: BaseException) -> str:
    """The user's message in one line, also when a DataLoader worker wrapped it in its traceback text."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and any("Original Traceback" in line for line in lines):
        return lines[-1].split(": ", 1)[-1]
    return " ".join(line.strip() for line in lines)
