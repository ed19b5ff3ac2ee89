"""Segments cut from completed rollouts, and the bounded pool that query selection draws from.

A segment is a window of consecutive steps of *one* episode in *one* env column. With gymnasium
1.x next-step autoreset, the row after an episode's last transition is a reset step (``valid`` is
False): windows are cut only from contiguous runs of valid rows that end at the first ``done``.

With ``pad_terminations``, an episode that the env *terminated* (the robot fell, the pole
dropped) also gives a window that ends with the termination, padded to full length with the
absorbing state (see :class:`rlhf.core.types.Segment`). So even episodes shorter than a segment yield
queries, and a teacher can say that ending early is worse (or better) than carrying on: what the
reward model learns of the absorbing state is what PPO expects after a termination.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np

from rlhf.core.types import Pair, RolloutBatch, Segment


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


def cut_segments(
    batch: RolloutBatch, length: int, rng: np.random.Generator, pad_terminations: bool = False
) -> list[Segment]:
    """Cut non-overlapping windows of ``length`` steps from every episode fragment in ``batch``.

    Within each contiguous run of valid rows (per env column, ended by a done row), the windows
    tile the run from a random offset in ``[0, run_length mod length]``, so over many rollouts
    every step is equally likely to be covered, and no two segments of one rollout share a step.
    Only the last row of a window may be done; runs shorter than ``length`` yield nothing.

    With ``pad_terminations``, a run that ends in a termination is tiled from its end instead:
    its last window holds the last ``m`` real steps (``m`` drawn from ``[1, min(length, run)]``)
    and ``length - m`` absorbing steps; the full windows before it tile the rest backwards.

    Arrays are copied: the caller may reuse the rollout buffers afterwards.

    Args:
        batch: a completed rollout, time-major (T, N, ...).
        length: steps per segment (>= 1).
        rng: source of the random offsets.
        pad_terminations: pad the ends of terminated episodes with the absorbing state.

    Returns:
        Segments ordered by env column, then by time.
    """
    if length < 1:
        raise ValueError(f"segment length must be >= 1, got {length}")
    dones = batch.dones
    segments: list[Segment] = []
    for env in range(batch.valid.shape[1]):
        for start, stop in _runs(batch.valid[:, env], dones[:, env]):
            if pad_terminations and batch.terminated[stop - 1, env]:
                segments += _tile_to_end(batch, env, start, stop, length, rng)
                continue
            count, spare = divmod(stop - start, length)
            if count == 0:
                continue
            offset = start + int(rng.integers(spare + 1))
            for k in range(count):
                rows = slice(offset + k * length, offset + (k + 1) * length)
                segments.append(_window(batch, env, rows))
    return segments


def _tile_to_end(
    batch: RolloutBatch, env: int, start: int, stop: int, length: int, rng: np.random.Generator
) -> list[Segment]:
    """Windows of a terminated run: the last padded with the absorbing state, all ending at
    ``stop`` or at the start of the window after them."""
    real = int(rng.integers(1, min(length, stop - start) + 1))
    last = _window(batch, env, slice(stop - real, stop), pad=length - real)
    full = (stop - real - start) // length
    windows = [
        _window(batch, env, slice(stop - real - (k + 1) * length, stop - real - k * length))
        for k in reversed(range(full))
    ]
    return [*windows, last]


def _window(batch: RolloutBatch, env: int, rows: slice, pad: int = 0) -> Segment:
    # np.array copies, so the segment owns its memory (the rollout buffers are reused).
    return padded_segment(
        np.array(batch.obs[rows, env], dtype=np.float32),
        np.array(batch.actions[rows, env], dtype=np.float32),
        np.array(batch.true_rewards[rows, env], dtype=np.float32),
        np.array(batch.qpos[rows, env], dtype=np.float64),
        np.array(batch.qvel[rows, env], dtype=np.float64),
        batch.env_id,
        batch.start_step,
        pad,
    )


def padded_segment(
    obs: np.ndarray,
    actions: np.ndarray,
    rewards: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    env_id: str,
    start_step: int,
    pad: int = 0,
) -> Segment:
    """A segment of these steps followed by ``pad`` steps in the absorbing state."""
    if pad:
        # The absorbing state: nothing observed, done or earned; the picture stays as it ended.
        obs = np.concatenate([obs, np.zeros((pad, obs.shape[1]), np.float32)])
        actions = np.concatenate([actions, np.zeros((pad, actions.shape[1]), np.float32)])
        rewards = np.concatenate([rewards, np.zeros(pad, np.float32)])
        qpos = np.concatenate([qpos, np.repeat(qpos[-1:], pad, axis=0)])
        qvel = np.concatenate([qvel, np.repeat(qvel[-1:], pad, axis=0)])
    return Segment(
        obs=obs,
        actions=actions,
        true_rewards=rewards,
        qpos=qpos,
        qvel=qvel,
        env_id=env_id,
        start_step=start_step,
        absorbing=pad,
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
