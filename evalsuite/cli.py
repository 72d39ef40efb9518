"""Command line: `evalsuite COMMAND` (also `python -m evalsuite COMMAND`).

Each command lives in evalsuite/commands/. User errors are one line on stderr and exit
code 2; unexpected errors are one line and exit code 1; `--debug` shows the traceback.
"""

import argparse
import gc
import os
import select
import shlex
import signal
import sys
import threading

from evalsuite.commands import COMMAND_MODULES
from evalsuite.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EvalsuiteError,
    one_line,
)

# Longest name a run puts under --out: runs/.<run id>.<probe>.seed<N>.reliability.png.<pid>.tmp, cache/<key>/...
OUT_ROOM_BYTES = 256


def _parser() -> argparse.ArgumentParser:
    help_text = "show tracebacks instead of one-line errors"
    # The commands' --debug has no default (SUPPRESS): theirs would overwrite `evalsuite --debug COMMAND`.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=help_text)
    parser = argparse.ArgumentParser(prog="evalsuite",
                                     description="Frozen-backbone probe evaluation for pathology foundation models.")
    parser.add_argument("--debug", action="store_true", help=help_text)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(commands, common)
    return parser


def _check_paths(args) -> None:
    from evalsuite.storage.fsio import check_path_length

    # Every command's output paths: an ENAMETOOLONG from a stat() deep inside would be an internal error.
    for flag, room_bytes in (("out", OUT_ROOM_BYTES), ("plot", 0)):
        if getattr(args, flag, None):
            check_path_length(getattr(args, flag), f"--{flag}", room_bytes)


def _quiet_after_broken_pipe() -> int:
    """The reader of stdout left early, as `| head -3` does: stop quietly, as Unix tools killed by SIGPIPE do.

    stdout now points at /dev/null, so the interpreter's final flush of what is still buffered cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


class Terminated(KeyboardInterrupt):
    """SIGTERM outside an extraction (which stops after its chunk instead: features/extract.py), as Ctrl-C: the
    command stops where it is, says how to resume, and exits 143 (128 + SIGTERM)."""


def _terminated(_signum, _frame):
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    resumable = _resumed_work(args) is not None and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if resumable else None
    try:
        _check_paths(args)
        args.handler(args)
        sys.stdout.flush()  # here, not at exit: a reader gone by then (`| head`) would print an ignored exception
    except BrokenPipeError as exc:
        if _stdout_reader_gone():
            return _quiet_after_broken_pipe()
        return _internal_error(args, exc)  # another pipe or socket broke: not the user's `| head`
    except EvalsuiteError as exc:
        if args.debug:
            raise
        print(f"evalsuite: error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print(_interrupted_line(args, argv, isinstance(exc, Terminated)), file=sys.stderr)
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - one line for users; --debug shows the traceback
        return _internal_error(args, exc)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def entry_point() -> None:
    """`evalsuite` and `python -m evalsuite`: main(), then the exit. Objects are frozen first (gc.freeze) because
    the interpreter's last garbage collections walk every object that torch, torchvision and timm made at import,
    which took 0.6-0.9 s of each command's wall time on 2 cores (a cached BACH run: 3.7 s, 2.9 s frozen). Nothing of
    ours waits for a collection: files are flushed and closed by their `with` blocks, stdout here in main()."""
    code = main()
    gc.freeze()
    raise SystemExit(code)


# Commands whose work survives an interrupt, and what of it: the same command line goes on from there.
_RESUMABLE = {"run": "finished chunks of the feature caches are kept", "robustness": "finished cache chunks are kept",
              "sweep run": "finished cells are kept", "download": "partial and finished downloads are kept"}


def _resumed_work(args) -> str | None:
    """What of the command's work an interrupt keeps, or None for a command that has nothing to resume."""
    name = getattr(args.handler, "__module__", "").rsplit(".", 1)[-1]
    return _RESUMABLE.get(f"{name} {getattr(args, 'action', '')}" if name == "sweep" else name)


def _interrupted_line(args, argv, terminated: bool = False) -> str:
    stopped = "terminated (SIGTERM)" if terminated else "interrupted"
    kept = _resumed_work(args)
    if kept is None:
        return f"evalsuite: {stopped}"
    command = shlex.join(["evalsuite", *(sys.argv[1:] if argv is None else argv)])
    return f"evalsuite: {stopped}; {kept}: `{command}` resumes"


def _internal_error(args, exc: Exception) -> int:
    if args.debug:
        raise exc
    print(f"evalsuite: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
          file=sys.stderr)
    return EXIT_INTERNAL


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader left (poll reports an error on its write end); True when it cannot be
    told (no poll on this platform), the old behaviour."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return True
