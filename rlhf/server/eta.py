"""Time left, from the pace of answers: a range, and none until the pace is known.

A run that waits for a person ends when the person has given its labels, so its time left is
the labels still to give at the pace of the answers so far. One figure from a few answers jumps
about (57 s, 8 min, 5 min on a run that took 2 min): the page shows a range, the pace's
uncertainty and the spread of the answers still to come, and nothing before
:data:`MIN_GAPS` answers have set a pace.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import deque
from collections.abc import Sequence

MIN_GAPS = 10
"""Answers after the first needed before the page shows a time left."""
WINDOW = 40
"""The pace is that of the latest this many answers (a person speeds up, or slows down)."""
BREAK_S = 120.0
"""A longer gap between two answers is a break, not the pace."""
Z = 1.96
"""The range holds about 95% of the outcomes, if the pace stays what it has been."""


def eta_range(times: Sequence[float], remaining: int) -> tuple[float, float] | None:
    """(low, high) seconds to give ``remaining`` more answers at the pace of ``times`` (when
    each answer came, in seconds), or None while fewer than :data:`MIN_GAPS` gaps set a pace.

    The sum of ``remaining`` gaps of mean m and spread s is remaining * m, give or take
    Z * s * sqrt(remaining^2 / n + remaining): the first term is how well n gaps tell the pace,
    the second how the answers still to come vary around it.
    """
    if remaining <= 0:
        return 0.0, 0.0
    ordered = sorted(times)[-(WINDOW + 1) :]
    gaps = [b - a for a, b in itertools.pairwise(ordered) if b - a <= BREAK_S]
    n = len(gaps)
    if n < MIN_GAPS:
        return None
    mean = sum(gaps) / n
    spread = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (n - 1))
    middle = remaining * mean
    margin = Z * spread * math.sqrt(remaining**2 / n + remaining)
    return max(0.0, middle - margin), middle + margin


class AnswerTimes:
    """When the latest answers arrived (``time.monotonic()``), shared by the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._times: deque[float] = deque(maxlen=WINDOW + 1)

    def note(self, when: float) -> None:
        with self._lock:
            self._times.append(when)

    def forget_last(self) -> None:
        """An answer was undone: it set no pace."""
        with self._lock:
            if self._times:
                self._times.pop()

    def snapshot(self) -> list[float]:
        with self._lock:
            return list(self._times)
