"""The terminal's view of a sweep: cells done / running / failed / waiting, elapsed time and ETA.

On a terminal one status line is redrawn in place, with a line above it per finished cell; in a
log file (no terminal) the status is written only when it changes, so the log stays short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


def duration(seconds: float) -> str:
    """42s, 3m10s, 1h02m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class ProgressView:
    """Counts of a sweep's cells, drawn on ``stream`` (stderr by default)."""

    def __init__(
        self,
        total: int,
        skipped: int = 0,
        title: str = "sweep",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.title, self.total, self.skipped = title, total, skipped
        self.done, self.failed, self.running = skipped, 0, 0
        self.ran = 0
        """Cells finished (or failed) in this session: what the ETA is measured on."""
        self.clock = clock
        self.start = clock()
        self._shown = ""

    @property
    def waiting(self) -> int:
        return self.total - self.done - self.failed - self.running

    def eta(self) -> float | None:
        """Seconds left at this session's pace so far; None before the first cell ends."""
        left = self.total - self.done - self.failed
        if self.ran == 0:
            return None if left else 0.0
        return left * (self.clock() - self.start) / self.ran

    def line(self) -> str:
        skipped = f" ({self.skipped} already)" if self.skipped else ""
        eta = self.eta()
        return (
            f"{self.title}: {self.done}/{self.total} done{skipped}, {self.running} running,"
            f" {self.failed} failed, {self.waiting} waiting | {duration(self.clock() - self.start)}"
            f" elapsed, ETA {'?' if eta is None else duration(eta)}"
        )

    def update(self, running: int) -> None:
        """Redraw with ``running`` cells in flight (a terminal shows the clock ticking)."""
        self.running = running
        self._draw(force=self.tty)

    def finished(self, text: str, ok: bool) -> None:
        """A cell ended: ``text`` goes on its own line above the status."""
        if ok:
            self.done += 1
        else:
            self.failed += 1
        self.ran += 1
        self.running = max(0, self.running - 1)
        self.message(f"{'done' if ok else 'FAILED'}: {text}")

    def message(self, text: str) -> None:
        """A line above the status line."""
        self._clear()
        print(text, file=self.stream, flush=True)
        if self.tty:  # a log gets the status at the next update instead
            self._draw(force=True)

    def close(self) -> None:
        """Leave the last status on its own line."""
        self._clear()
        print(self.line(), file=self.stream, flush=True)
        self._shown = ""

    def _draw(self, force: bool) -> None:
        line = self.line()
        # Without a terminal the clock must not make every second a new line.
        key = line if self.tty else line.partition(" | ")[0]
        if not force and key == self._shown:
            return
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
            self.stream.flush()
            self._shown = key
        elif key != self._shown:
            print(line, file=self.stream, flush=True)
            self._shown = key

    def _clear(self) -> None:
        if self.tty and self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
