"""Cutting segments from rollouts (episode and autoreset boundaries) and the segment pool."""

from __future__ import annotations

import numpy as np
import pytest

from rlhf.core.types import RolloutBatch, Segment
from rlhf.queries.segments import SegmentPool, cut_segments, sample_pairs

STEPS, ENVS = 20, 3


def _batch(valid: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> RolloutBatch:
    """A rollout whose every array encodes (t, env) so a segment's provenance can be read back."""
    steps, envs = valid.shape
    t, n = np.meshgrid(np.arange(steps), np.arange(envs), indexing="ij")
    stamp = np.stack([t, n], axis=-1).astype(np.float64)  # (T, N, 2)
    return RolloutBatch(
        obs=np.concatenate([stamp, np.zeros((steps, envs, 3))], axis=-1).astype(np.float32),
        actions=stamp[..., ::-1].astype(np.float32),
        true_rewards=(100 * n + t).astype(np.float32),
        terminated=terminated,
        truncated=truncated,
        valid=valid,
        qpos=stamp + 0.5,
        qvel=stamp - 0.5,
        env_id="HalfCheetah-v5",
        start_step=4096,
    )


def _hand_made() -> RolloutBatch:
    """env 0: one 20-step episode fragment.
    env 1: terminated at 6 (reset row 7), truncated at 15 (reset row 16), then rows 17-19.
    env 2: rows 0-2 invalid, terminated at 10 with no reset row after it, then 11-19.
    """
    valid = np.ones((STEPS, ENVS), dtype=bool)
    terminated = np.zeros((STEPS, ENVS), dtype=bool)
    truncated = np.zeros((STEPS, ENVS), dtype=bool)
    terminated[6, 1], valid[7, 1] = True, False
    truncated[15, 1], valid[16, 1] = True, False
    valid[:3, 2] = False
    terminated[10, 2] = True
    return _batch(valid, terminated, truncated)


def _rows(seg: Segment) -> tuple[int, np.ndarray]:
    """(env column, time rows) a segment was cut from, read from its stamped obs."""
    envs = np.unique(seg.obs[:, 1])
    assert len(envs) == 1, "a segment mixes env columns"
    return int(envs[0]), seg.obs[:, 0].astype(int)


def _check_invariants(batch: RolloutBatch, segments: list[Segment], length: int) -> None:
    used: set[tuple[int, int]] = set()
    for seg in segments:
        env, rows = _rows(seg)
        assert len(seg) == length
        np.testing.assert_array_equal(np.diff(rows), 1)  # consecutive steps
        assert batch.valid[rows, env].all(), "a segment contains a reset / invalid row"
        assert not batch.dones[rows[:-1], env].any(), "a segment straddles an episode end"
        # Every array comes from the same rows.
        np.testing.assert_array_equal(seg.actions, batch.actions[rows, env])
        np.testing.assert_array_equal(seg.true_rewards, batch.true_rewards[rows, env])
        np.testing.assert_array_equal(seg.qpos, batch.qpos[rows, env])
        np.testing.assert_array_equal(seg.qvel, batch.qvel[rows, env])
        assert (seg.env_id, seg.start_step) == ("HalfCheetah-v5", 4096)
        cells = {(int(r), env) for r in rows}
        assert used.isdisjoint(cells), "segments of one rollout overlap"
        used |= cells


def test_hand_made_boundaries():
    batch = _hand_made()
    for seed in range(50):
        segments = cut_segments(batch, 5, np.random.default_rng(seed))
        _check_invariants(batch, segments, 5)
        starts = sorted((_rows(s)[0], int(_rows(s)[1][0])) for s in segments)
        # env 0: 20 rows -> 4 windows, no room for an offset.
        assert [r for e, r in starts if e == 0] == [0, 5, 10, 15]
        # env 1: runs 0-6 (7 rows) and 8-15 (8 rows) give one window each; 17-19 is too short.
        env1 = [r for e, r in starts if e == 1]
        assert len(env1) == 2 and 0 <= env1[0] <= 2 and 8 <= env1[1] <= 11
        # env 2: runs 3-10 (8 rows) and 11-19 (9 rows): one window each.
        env2 = [r for e, r in starts if e == 2]
        assert len(env2) == 2 and 3 <= env2[0] <= 6 and 11 <= env2[1] <= 15


def test_offsets_are_random_within_the_spare_room():
    batch = _hand_made()
    firsts = {
        int(_rows(s)[1][0])
        for seed in range(60)
        for s in cut_segments(batch, 5, np.random.default_rng(seed))
        if _rows(s)[0] == 1 and _rows(s)[1][0] < 7
    }
    assert firsts == {0, 1, 2}


def _reference_count(batch: RolloutBatch, length: int) -> int:
    """Windows a row-by-row scan of each column finds room for."""
    total = 0
    for env in range(batch.valid.shape[1]):
        run = 0
        for t in range(batch.valid.shape[0]):
            if not batch.valid[t, env]:
                total, run = total + run // length, 0
                continue
            run += 1
            if batch.dones[t, env]:
                total, run = total + run // length, 0
        total += run // length
    return total


@pytest.mark.parametrize("length", [1, 3, 7])
def test_random_rollouts_keep_the_invariants(length):
    gen = np.random.default_rng(99)
    for _ in range(30):
        shape = (40, 4)
        terminated = gen.random(shape) < 0.05
        truncated = gen.random(shape) < 0.05
        valid = gen.random(shape) > 0.05
        # Autoreset: the row after a done is a reset row, except at the end of the rollout.
        valid[1:] &= ~(terminated | truncated)[:-1]
        batch = _batch(valid, terminated, truncated)
        segments = cut_segments(batch, length, np.random.default_rng(0))
        _check_invariants(batch, segments, length)
        assert len(segments) == _reference_count(batch, length)


def test_segments_own_their_arrays():
    batch = _hand_made()
    segments = cut_segments(batch, 5, np.random.default_rng(0))
    snapshot = [(s.obs.copy(), s.qpos.copy(), s.true_rewards.copy()) for s in segments]
    for arr in (batch.obs, batch.actions, batch.true_rewards, batch.qpos, batch.qvel):
        arr[...] = -1  # the collector reuses its buffers for the next rollout
    for seg, (obs, qpos, rew) in zip(segments, snapshot, strict=True):
        np.testing.assert_array_equal(seg.obs, obs)
        np.testing.assert_array_equal(seg.qpos, qpos)
        np.testing.assert_array_equal(seg.true_rewards, rew)
    assert segments[0].obs.dtype == np.float32 and segments[0].qpos.dtype == np.float64


def test_reproducible_by_seed_and_edge_lengths():
    batch = _hand_made()

    def starts(seed: int) -> list[tuple[int, int]]:
        return [
            (_rows(s)[0], int(_rows(s)[1][0]))
            for s in cut_segments(batch, 4, np.random.default_rng(seed))
        ]

    assert starts(5) == starts(5)
    assert len({tuple(starts(s)) for s in range(20)}) > 1
    assert cut_segments(batch, STEPS + 1, np.random.default_rng(0)) == []
    assert len(cut_segments(batch, 1, np.random.default_rng(0))) == int(batch.valid.sum())
    with pytest.raises(ValueError):
        cut_segments(batch, 0, np.random.default_rng(0))


def _segments(n: int) -> list[Segment]:
    empty = np.zeros((4, 0))
    return [
        Segment(
            np.full((4, 2), i, np.float32),
            np.zeros((4, 1), np.float32),
            np.zeros(4, np.float32),
            empty,
            empty,
            "X",
        )
        for i in range(n)
    ]


def test_pool_keeps_the_most_recent_up_to_capacity():
    pool = SegmentPool(capacity=5)
    items = _segments(8)
    pool.add(items[:3])
    assert len(pool) == 3
    pool.add(items[3:])
    assert len(pool) == 5
    assert pool.segments() == items[3:]  # oldest first, the first three evicted
    with pytest.raises(ValueError):
        SegmentPool(0)


def test_pool_pairs_are_distinct_uniform_and_reproducible():
    pool = SegmentPool(capacity=10)
    pool.add(_segments(10))
    pairs = pool.sample_pairs(4000, np.random.default_rng(1))
    assert len(pairs) == 4000 and all(p.left is not p.right for p in pairs)
    ids = np.array([[p.left.obs[0, 0], p.right.obs[0, 0]] for p in pairs])
    counts = np.bincount(ids.ravel().astype(int), minlength=10)
    assert counts.min() > 0.85 * 800 and counts.max() < 1.15 * 800  # each segment ~ 2 * 4000 / 10
    again = pool.sample_pairs(4000, np.random.default_rng(1))
    assert all(a.left is b.left and a.right is b.right for a, b in zip(pairs, again, strict=True))
    assert pool.sample_pairs(0, np.random.default_rng(0)) == []
    with pytest.raises(ValueError):
        sample_pairs(_segments(1), 1, np.random.default_rng(0))


def test_terminated_episodes_end_in_padded_segments() -> None:
    """env 1's first episode ends (terminated) after 7 steps, env 2's after 8: shorter than a
    segment of 10, yet each gives one segment that ends with it, padded with absorbing steps."""
    batch = _hand_made()
    for seed in range(20):
        segments = cut_segments(batch, 10, np.random.default_rng(seed), pad_terminations=True)
        padded = [s for s in segments if s.absorbing]
        assert len(padded) == 2
        for seg, (env, end) in zip(padded, [(1, 6), (2, 10)], strict=True):
            real = seg.real_steps
            np.testing.assert_array_equal(seg.obs[:real, 1], env)  # one env column
            np.testing.assert_array_equal(seg.obs[:real, 0], np.arange(end - real + 1, end + 1))
            assert len(seg) == 10 and 1 <= real <= 10
            # The absorbing state: nothing observed, done or earned; the picture stands still.
            assert not seg.obs[real:].any() and not seg.actions[real:].any()
            assert not seg.true_rewards[real:].any()
            np.testing.assert_array_equal(
                seg.qpos[real:], np.repeat(seg.qpos[real - 1 : real], 10 - real, 0)
            )
            np.testing.assert_array_equal(seg.absorbing_mask(), np.arange(10) >= real)
        # Without padding, runs shorter than a segment give nothing.
        plain = cut_segments(batch, 10, np.random.default_rng(seed))
        assert not any(s.absorbing for s in plain)


def test_long_terminated_episodes_tile_back_from_their_end() -> None:
    """env 2 runs from row 3 to its termination at row 10 (8 steps): with segments of 3 the
    padded one holds the last m steps, and full windows tile backwards before it."""
    batch = _hand_made()
    segments = cut_segments(batch, 3, np.random.default_rng(0), pad_terminations=True)
    env2 = [s for s in segments if s.obs[0, 1] == 2 and s.obs[0, 0] <= 10]
    last = env2[-1]
    real = last.real_steps
    np.testing.assert_array_equal(last.obs[:real, 0], np.arange(11 - real, 11))
    expected_end = 11 - real
    for seg in reversed(env2[:-1]):
        assert seg.absorbing == 0
        np.testing.assert_array_equal(seg.obs[:, 0], np.arange(expected_end - 3, expected_end))
        expected_end -= 3
    assert expected_end >= 3  # never before the episode's first row
