"""Ratings in the store: durable (an acknowledged grade survives SIGKILL), idempotent by query
id, never mixed up with pair labels, and counted with them."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest

from rlhf.core.types import Answer, Pair, Segment
from rlhf.store import VIDEO_READY, LabelConflict, LabelStore, PairNotShown, UnknownPair, WrongKind
from tests.support.children import kill_after_acks


def _segment(rng: np.random.Generator, t: int = 5) -> Segment:
    obs = rng.normal(size=(t, 3)).astype(np.float32)
    return Segment(
        obs=obs,
        actions=rng.normal(size=(t, 2)).astype(np.float32),
        true_rewards=obs[:, 0].copy(),
        qpos=np.zeros((t, 0)),
        qvel=np.zeros((t, 0)),
        env_id="Toy-v0",
    )


def _shown_clips(store: LabelStore, n: int, rng: np.random.Generator) -> list[int]:
    ids = store.add_rating_queries([_segment(rng) for _ in range(n)], iteration=3)
    for query_id in ids:
        store.mark_video(query_id, VIDEO_READY, path=f"{query_id}.mp4")
    return ids


def test_rating_is_idempotent_refuses_conflicts_and_wrong_kinds(tmp_path: Path, rng) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    clip = _shown_clips(store, 1, rng)[0]
    pair = store.add_pairs([Pair(_segment(rng), _segment(rng))])[0]
    store.mark_video(pair, VIDEO_READY, path="p.mp4")
    assert store.add_rating(clip, 4, 7, labeller="ann", response_ms=900) is True
    assert store.add_rating(clip, 4, 7, labeller="ann") is False  # a re-send: nothing changes
    with pytest.raises(LabelConflict):
        store.add_rating(clip, 2, 7)
    with pytest.raises(WrongKind):
        store.add_rating(pair, 1, 7)
    with pytest.raises(WrongKind):
        store.add_label(clip, Answer.LEFT)
    with pytest.raises(UnknownPair):
        store.add_rating(999, 1, 7)
    with pytest.raises(ValueError):
        store.add_rating(_shown_clips(store, 1, rng)[0], 7, 7)  # off the scale
    with pytest.raises(PairNotShown):
        store.add_rating(store.add_rating_queries([_segment(rng)])[0], 1, 7)
    [rec] = store.ratings()
    assert (rec.pair_id, rec.grade, rec.levels, rec.labeller, rec.response_ms) == (
        clip,
        4,
        7,
        "ann",
        900,
    )
    [rated] = store.rated()
    assert rated.grade == 4 and rated.meta is not None and rated.meta.iteration == 3
    np.testing.assert_array_equal(rated.segment.obs, store.get_segment(rec.pair_id).obs)
    store.close()


def test_ratings_count_as_answers_and_undo_takes_the_latest(tmp_path: Path, rng) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    clips = _shown_clips(store, 3, rng)
    pair = store.add_pairs([Pair(_segment(rng), _segment(rng))])[0]
    store.mark_video(pair, VIDEO_READY, path="p.mp4")
    assert {r.id for r in store.next_ready(limit=10)} == {*clips, pair}
    store.add_rating(clips[0], 2, 7, labeller="ann")
    store.add_label(pair, Answer.LEFT, labeller="ann")
    store.add_rating(clips[1], None, 7, labeller="ann")  # a skip
    counts = store.counts()
    assert (counts.labelled, counts.skipped, counts.ready_unlabelled) == (3, 1, 1)
    assert [r.id for r in store.next_ready(limit=10)] == [clips[2]]
    assert len(store.rated()) == 1  # skips never train
    undone = store.undo_last(labeller="ann")
    assert undone is not None and undone.pair_id == clips[1]
    undone = store.undo_last(labeller="ann")
    assert undone is not None and undone.pair_id == pair
    assert store.counts().labelled == 1
    store.close()


_ADD_RATINGS = """
    import sys
    from rlhf.store import LabelStore
    store = LabelStore(sys.argv[1])
    for query_id in range(1, int(sys.argv[2]) + 1):
        store.add_rating(query_id, query_id % 7, 7, labeller="child")
        print(f"ACK {query_id}", flush=True)
"""


def test_acknowledged_ratings_survive_sigkill(tmp_path: Path, rng) -> None:
    path = tmp_path / "labels.sqlite"
    store = LabelStore(path)
    total = 300
    _shown_clips(store, total, rng)
    store.close()
    child, acked = kill_after_acks(_ADD_RATINGS, str(path), str(total), acks=20)
    assert child.returncode == -signal.SIGKILL
    reopened = LabelStore(path)
    stored = {r.pair_id: r.grade for r in reopened.ratings()}
    assert len(stored) < total
    for query_id in acked:
        assert stored.get(query_id) == query_id % 7, query_id
    reopened.close()
