"""Segments cut from completed rollouts, and the bounded pool that query selection draws from.

A segment is a window of consecutive steps of *one* episode in *one* env column. With gymnasium
1.x next-step autoreset, the row after an episode's last transition is a reset step (``valid`` is
False): windows are cut only from contiguous runs of valid rows that end at the first ``done``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np

from rlhf.types import Pair, RolloutBatch, Segment


def _runs(valid: np.ndarray, done: np.ndarray) -> list[tuple[int, int]]:
    """Half-open ``[start, stop)`` runs of valid rows in one env column; a done row ends a run.

    A row starts a run when it is valid and the row before is invalid or done; a row ends one
    when it is done or the next row is invalid. Both masks are (T,) bool.
    """
    prev_open = np.zeros_like(valid)
    prev_open[1:] = valid[:-1] & ~done[:-1]
    starts = np.flatnonzero(valid & ~prev_open)
    next_valid = np.zeros_like(valid)
    next_valid[:-1] = valid[1:]
    stops = np.flatnonzero(valid & (done | ~next_valid)) + 1
    return list(zip(starts.tolist(), stops.tolist(), strict=True))


def cut_segments(batch: RolloutBatch, length: int, rng: np.random.Generator) -> list[Segment]:
    """Cut non-overlapping windows of ``length`` steps from every episode fragment in ``batch``.

    Within each contiguous run of valid rows (per env column, ended by a done row), the windows
    tile the run from a random offset in ``[0, run_length mod length]``, so over many rollouts
    every step is equally likely to be covered, and no two segments of one rollout share a step.
    Only the last row of a window may be done; runs shorter than ``length`` yield nothing.

    Arrays are copied: the caller may reuse the rollout buffers afterwards.

    Args:
        batch: a completed rollout, time-major (T, N, ...).
        length: steps per segment (>= 1).
        rng: source of the random offsets.

    Returns:
        Segments ordered by env column, then by time.
    """
    if length < 1:
        raise ValueError(f"segment length must be >= 1, got {length}")
    dones = batch.dones
    segments: list[Segment] = []
    for env in range(batch.valid.shape[1]):
        for start, stop in _runs(batch.valid[:, env], dones[:, env]):
            count, spare = divmod(stop - start, length)
            if count == 0:
                continue
            offset = start + int(rng.integers(spare + 1))
            for k in range(count):
                rows = slice(offset + k * length, offset + (k + 1) * length)
                segments.append(_window(batch, env, rows))
    return segments


def _window(batch: RolloutBatch, env: int, rows: slice) -> Segment:
    # np.array copies, so the segment owns its memory (the rollout buffers are reused).
    return Segment(
        obs=np.array(batch.obs[rows, env], dtype=np.float32),
        actions=np.array(batch.actions[rows, env], dtype=np.float32),
        true_rewards=np.array(batch.true_rewards[rows, env], dtype=np.float32),
        qpos=np.array(batch.qpos[rows, env], dtype=np.float64),
        qvel=np.array(batch.qvel[rows, env], dtype=np.float64),
        env_id=batch.env_id,
        start_step=batch.start_step,
    )


def sample_pairs(segments: list[Segment], n: int, rng: np.random.Generator) -> list[Pair]:
    """Draw ``n`` pairs uniformly (with replacement across pairs) of two *distinct* segments.

    Raises:
        ValueError: fewer than two segments to pair.
    """
    if n <= 0:
        return []
    size = len(segments)
    if size < 2:
        raise ValueError(f"need at least 2 segments to form a pair, have {size}")
    left = rng.integers(size, size=n)
    # Draw the partner from the other size-1 segments: shift indices at or above `left` up by one.
    right = rng.integers(size - 1, size=n)
    right += right >= left
    return [
        Pair(segments[i], segments[j]) for i, j in zip(left.tolist(), right.tolist(), strict=True)
    ]


class SegmentPool:
    """Bounded ring buffer of the most recent segments: the candidates for queries."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._items: deque[Segment] = deque(maxlen=capacity)

    def add(self, segments: Iterable[Segment]) -> None:
        """Append segments; the oldest fall out once the pool is full."""
        self._items.extend(segments)

    def __len__(self) -> int:
        return len(self._items)

    def segments(self) -> list[Segment]:
        """The pooled segments, oldest first (a new list; the segments themselves are shared)."""
        return list(self._items)

    def sample_pairs(self, n: int, rng: np.random.Generator) -> list[Pair]:
        """``n`` uniformly drawn pairs of distinct pooled segments (see :func:`sample_pairs`)."""
        return sample_pairs(self.segments(), n, rng)
