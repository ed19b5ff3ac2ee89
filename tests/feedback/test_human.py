"""Left/right randomisation of the pairs queued for human labelling."""

from __future__ import annotations

import numpy as np
import pytest

from rlhf.core.types import Pair, Segment
from rlhf.feedback.human import queue_for_humans
from rlhf.store import LabelStore


def _segment(tag: float) -> Segment:
    """A tiny segment whose observations carry ``tag``, so it can be recognised after storage."""
    n = 2
    return Segment(
        obs=np.full((n, 3), tag, np.float32),
        actions=np.zeros((n, 1), np.float32),
        true_rewards=np.full(n, tag, np.float32),
        qpos=np.zeros((n, 2)),
        qvel=np.zeros((n, 2)),
        env_id="HalfCheetah-v5",
    )


def _pairs(count: int) -> list[Pair]:
    # Original left segments are tagged with even numbers, right ones with odd numbers.
    return [Pair(_segment(2.0 * i), _segment(2.0 * i + 1)) for i in range(count)]


def _queue(tmp_path, name: str, seed: int, count: int) -> tuple[LabelStore, list[int]]:
    store = LabelStore(tmp_path / f"{name}.sqlite")
    return store, queue_for_humans(store, _pairs(count), np.random.default_rng(seed), iteration=3)


def test_swap_is_recorded_and_stored_in_display_order(tmp_path) -> None:
    store, ids = _queue(tmp_path, "a", seed=0, count=40)
    assert len(ids) == 40
    flips = []
    for i, pair_id in enumerate(ids):
        record = store.get_pair_record(pair_id)
        stored = store.get_pair(pair_id)
        assert record.iteration == 3
        left_tag, right_tag = stored.left.obs[0, 0], stored.right.obs[0, 0]
        if record.swapped:
            # The human's "left" is the segment the selector had put on the right.
            assert (left_tag, right_tag) == (2 * i + 1, 2 * i)
        else:
            assert (left_tag, right_tag) == (2 * i, 2 * i + 1)
        flips.append(record.swapped)
    assert 0 < sum(flips) < 40


def test_roughly_half_flipped(tmp_path) -> None:
    store, ids = _queue(tmp_path, "many", seed=1, count=400)
    share = np.mean([store.get_pair_record(i).swapped for i in ids])
    # Binomial(400, 0.5): the standard deviation of the share is 0.025.
    assert share == pytest.approx(0.5, abs=0.1)


def test_same_seed_same_order(tmp_path) -> None:
    first, ids_a = _queue(tmp_path, "a", seed=7, count=30)
    second, ids_b = _queue(tmp_path, "b", seed=7, count=30)
    other, ids_c = _queue(tmp_path, "c", seed=8, count=30)
    flags = [
        [s.get_pair_record(i).swapped for i in ids]
        for s, ids in ((first, ids_a), (second, ids_b), (other, ids_c))
    ]
    assert flags[0] == flags[1]
    assert flags[0] != flags[2]
