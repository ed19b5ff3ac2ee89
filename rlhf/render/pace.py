"""How many pairs the render pool keeps ready: in proportion to the labeller's pace and the time
one render takes now.

A fixed number ahead is either too few or wasteful: a labeller who answers every second on a
machine whose cores are shared with training drains six pairs faster than two render processes
refill them, while a slow labeller on an idle machine needs only a couple. Over the time one pair
takes to render, the labeller answers ``answers_per_s * render_s`` pairs; those must already be
ready, besides the ones being rendered. Load shows up by itself, as a longer render time; and
since a trainer's update can slow every render for a few seconds before any finished render
shows it, a fast labeller always has a few seconds of answers ready.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SAFETY = 2.0
"""Margin over the pairs the labeller answers while one renders: answer times and render times
both vary (a short pair, the trainer's update hogging the cores)."""

HORIZON_S = 3.0
"""Seconds of the labeller's answers kept ready however fast renders are now: about one PPO
update, the spike of load a render time measured before it cannot foresee."""

ANSWERS_SEEN = 10
"""The labeller's pace is read from this many latest answers."""

SMOOTHING = 0.3
"""Weight of the newest render time in the running estimate (an exponential moving average)."""


def answer_rate(times: Sequence[float], now: float) -> float:
    """Answers per second over the span from the oldest of ``times`` (answer times, Unix
    seconds) to ``now``; 0.0 with fewer than two answers. Measured up to ``now``, not to the
    last answer, so the rate decays by itself while no one answers."""
    if len(times) < 2:
        return 0.0
    span = now - min(times)
    return len(times) / span if span > 0 else 0.0


def ready_target(
    floor: int, ceiling: int, answers_per_s: float, render_s: float | None, processes: int
) -> int:
    """Pairs to keep ready or rendering: the labeller's answers during one render, times
    :data:`SAFETY` (or during :data:`HORIZON_S`, if longer), plus one per render process (a
    pair being rendered is not ready yet); at least ``floor`` (also when nothing is measured
    yet) and at most ``max(floor, ceiling)``."""
    if render_s is None or answers_per_s <= 0:
        return floor
    wanted = math.ceil(answers_per_s * max(render_s * SAFETY, HORIZON_S)) + processes
    return max(floor, min(max(floor, ceiling), wanted))


@dataclass
class RenderPace:
    """One render process's view of the pace: its own running render time (each process
    renders the same kind of pairs on the same machine, so each one's estimate will do).

    Example:
        pace = RenderPace(floor=6, ceiling=24, processes=2)
        pace.observe(1.4)  # seconds one pair took
        keep = pace.target(store.answer_times(ANSWERS_SEEN), time.time())
    """

    floor: int
    ceiling: int
    processes: int
    render_s: float | None = None

    def observe(self, seconds: float) -> None:
        """Fold in the wall time one pair took to render (load lengthens it)."""
        if self.render_s is None:
            self.render_s = seconds
        else:
            self.render_s += SMOOTHING * (seconds - self.render_s)

    def target(self, answer_times: Sequence[float], now: float) -> int:
        """Pairs to keep ready or rendering, given the latest answers' times."""
        rate = answer_rate(answer_times, now)
        return ready_target(self.floor, self.ceiling, rate, self.render_s, self.processes)
