"""Progress of long loops (probe epochs, grids) on stderr, readable on a terminal and in a Slurm log.

On a terminal: a tqdm bar redrawn in place. Anywhere else (a Slurm log, a pipe, a file): plain
`progress:` lines without carriage returns, one when the loop passes each further tenth of its
steps and one whenever a minute has gone by without a line, so a log gets at most ten lines a loop
plus one a minute. A loop that ends within `EVALSUITE_PROGRESS_AFTER_S` seconds (default 5) prints
nothing: a sub-second probe fit repeated over seeds would bury the tables in lines. The runner names
what runs (`labelled`); the loop says its unit, count and status (a probe's current val metric).
"""

import contextlib
import contextvars
import os
import sys
import time

from tqdm import tqdm

AFTER_ENV = "EVALSUITE_PROGRESS_AFTER_S"
DEFAULT_AFTER_S = 5.0
HEARTBEAT_S = 60.0  # a line at least this often when tenths come slowly (epochs of minutes)
PREFIX = "progress: "

_LABEL = contextvars.ContextVar("evalsuite_progress_label", default=None)


@contextlib.contextmanager
def labelled(label: str):
    """Loops inside the block are named `label` (e.g. "linear seed 0, fit 1/2") instead of their own default."""
    token = _LABEL.set(label)
    try:
        yield
    finally:
        _LABEL.reset(token)


def _after_s() -> float:
    try:
        return max(0.0, float(os.environ.get(AFTER_ENV, DEFAULT_AFTER_S)))
    except ValueError:
        return DEFAULT_AFTER_S


class Progress:
    """`update(done, status)` after each step of a loop of `total`; `status` is text, or a callable called only when a
    line or the bar's postfix is due (it may cost a val pass). `close(summary)` ends the loop."""

    def __init__(self, default_label: str, total: int, unit: str = "epoch", stream=None, initial: int = 0,
                 enabled: bool = True):
        """`initial`: steps done before (a resumed extraction); `enabled=False`: silent (torchrun's other ranks)."""
        self.label = _LABEL.get() or default_label
        self.total, self.unit, self.enabled = max(int(total), 1), unit, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.after_s = _after_s()
        self.started_s = time.monotonic()
        self.done = int(initial)
        self.last_line_s, self.last_tenth, self.lines = self.started_s, self.done * 10 // self.total, 0
        is_tty = getattr(self.stream, "isatty", lambda: False)()
        self.bar = tqdm(total=self.total, initial=self.done, desc=self.label, unit=unit, leave=False,
                        file=self.stream, delay=self.after_s, mininterval=0.5) if is_tty and enabled else None

    def update(self, done: int, status=None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        step, self.done = done - self.done, done
        if self.bar is not None:
            self.bar.update(step)
        tenth = done * 10 // self.total
        due = tenth > self.last_tenth or now - self.last_line_s >= HEARTBEAT_S
        if not due or now - self.started_s < self.after_s:
            return
        self.last_tenth, self.last_line_s = tenth, now
        text = (status() if callable(status) else status) or ""
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
        else:
            self._line(f"{self.unit} {done}/{self.total}" + (f", {text}" if text else "")
                       + f", {now - self.started_s:.1f} s")

    def close(self, summary: str = "") -> None:
        if not self.enabled:
            return
        elapsed_s = time.monotonic() - self.started_s
        if self.bar is not None:
            self.bar.close()
        if elapsed_s >= self.after_s or self.lines:
            ending = f", {summary}" if summary else ""
            self._line(f"done, {self.unit} {self.done}/{self.total} in {elapsed_s:.1f} s{ending}")

    def __enter__(self):
        return self

    def __exit__(self, error_type, *_) -> None:
        """The closing line on success; after an error only the bar goes (a "done" line would mislead)."""
        if error_type is None:
            self.close()
        elif self.bar is not None:
            self.bar.close()

    def _line(self, text: str) -> None:
        self.lines += 1
        line = f"{PREFIX}{self.label}: {text}"
        if self.bar is not None:
            tqdm.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)
