"""The label store: durability across SIGKILL (directly and through HTTP), undo, conflicts, counts.

A SIGKILL leaves the page cache alone, so these pass even without fsync; test_power_cut.py is the
test that catches a missing sync.
"""

from __future__ import annotations

import http.client
import json
import signal
import threading
from pathlib import Path

import pytest

from rlhf.core.types import Answer
from rlhf.store import VIDEO_READY, LabelConflict, LabelStore, UnknownPair
from tests.support.children import kill, kill_after_acks, spawn
from tests.support.labelling import shown_pairs

ANSWERS = [Answer.LEFT, Answer.RIGHT, Answer.EQUAL, Answer.SKIP]


_ADD_LABELS = """
    import sys
    from rlhf.store import LabelStore
    from rlhf.core.types import Answer
    answers = list(Answer)
    store = LabelStore(sys.argv[1])
    for pair_id in range(1, int(sys.argv[2]) + 1):
        store.add_label(pair_id, answers[pair_id % 4], labeller="child")
        print(f"ACK {pair_id}", flush=True)
"""


def test_acknowledged_labels_survive_sigkill(tmp_path: Path, add_pairs) -> None:
    path = tmp_path / "labels.sqlite"
    store = LabelStore(path)
    total = 400
    shown_pairs(store, add_pairs, total)
    store.close()

    # SIGKILL right after the 25th acknowledgement
    child, acked = kill_after_acks(_ADD_LABELS, str(path), str(total), acks=25)
    assert child.returncode == -signal.SIGKILL
    assert len(acked) == 25

    reopened = LabelStore(path)
    stored = {lb.pair_id: lb.answer for lb in reopened.labels()}
    assert len(stored) < total  # the child really died mid-way
    for pair_id in acked:
        assert stored.get(pair_id) == ANSWERS[pair_id % 4], pair_id
    reopened.close()


_SERVE = """
    import sys, time
    from pathlib import Path
    from rlhf.config import WebConfig
    from rlhf.server import serve_in_thread
    from rlhf.store import LabelStore
    run = Path(sys.argv[1])
    handle = serve_in_thread(LabelStore(run / "labels.sqlite"), run / "videos", WebConfig())
    print(f"PORT {handle.port}", flush=True)
    while True:
        time.sleep(1)
"""


def test_labels_acknowledged_over_http_survive_sigkill(tmp_path: Path, add_pairs) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = shown_pairs(store, add_pairs, 30)
    store.close()

    child = spawn(_SERVE, str(tmp_path))
    acked: list[int] = []
    try:
        first = child.stdout.readline()  # type: ignore[union-attr]
        assert first.startswith("PORT "), first + child.stderr.read()  # type: ignore[union-attr]
        con = http.client.HTTPConnection("127.0.0.1", int(first.split()[1]), timeout=10)
        for pair_id in ids:
            body = json.dumps({"pair_id": pair_id, "answer": ANSWERS[pair_id % 4].value})
            con.request("POST", "/api/label", body, {"Content-Type": "application/json"})
            resp = con.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["saved"] is True
            acked.append(pair_id)
        child.send_signal(signal.SIGKILL)  # right after the last 200
        con.close()
    finally:
        kill(child)

    reopened = LabelStore(tmp_path / "labels.sqlite")
    stored = {lb.pair_id: lb.answer for lb in reopened.labels()}
    assert stored == {pid: ANSWERS[pid % 4] for pid in acked}
    reopened.close()


def test_add_label_is_idempotent_and_refuses_conflicts(tmp_path: Path, add_pairs) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    [pair_id] = shown_pairs(store, add_pairs, 1)
    assert store.add_label(pair_id, Answer.LEFT) is True
    assert store.add_label(pair_id, Answer.LEFT) is False
    with pytest.raises(LabelConflict):
        store.add_label(pair_id, Answer.RIGHT)
    with pytest.raises(UnknownPair):
        store.add_label(pair_id + 1, Answer.LEFT)
    assert [(lb.pair_id, lb.answer) for lb in store.labels()] == [(pair_id, Answer.LEFT)]


def test_undo_last_is_per_labeller_and_lifo(tmp_path: Path, add_pairs) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    a, b, c = shown_pairs(store, add_pairs, 3)
    store.add_label(a, Answer.LEFT, labeller="ann")
    store.add_label(b, Answer.RIGHT, labeller="bob")
    store.add_label(c, Answer.EQUAL, labeller="ann")
    store.add_label(a, Answer.LEFT, labeller="ann")  # a duplicate: not a new label

    undone = store.undo_last(labeller="ann")
    assert undone is not None and (undone.pair_id, undone.answer) == (c, Answer.EQUAL)
    assert store.undo_last(labeller="ann").pair_id == a  # type: ignore[union-attr]
    assert store.undo_last(labeller="ann") is None
    assert [lb.pair_id for lb in store.labels()] == [b]
    assert store.undo_last(source="synthetic") is None
    assert store.undo_last().pair_id == b  # type: ignore[union-attr]


def test_counts_and_next_ready(tmp_path: Path, add_pairs) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = add_pairs(store, 6)
    for pair_id in ids[:4]:
        store.mark_video(pair_id, VIDEO_READY, path=f"{pair_id}.mp4")
    store.mark_video(ids[4], "failed", error="no GL")
    assert [r.id for r in store.next_ready(limit=10)] == ids[:4]
    assert [r.id for r in store.next_ready(exclude=(ids[0], ids[2]), limit=10)] == [ids[1], ids[3]]
    store.add_label(ids[0], Answer.EQUAL)
    store.add_label(ids[1], Answer.SKIP)
    assert [r.id for r in store.next_ready()] == [ids[2]]
    counts = store.counts()
    assert (counts.pairs, counts.labelled, counts.equal, counts.skipped) == (6, 2, 1, 1)
    assert (counts.ready_unlabelled, counts.pending_video, counts.failed) == (2, 1, 1)


def test_concurrent_add_label_commits_each_pair_once(tmp_path: Path, add_pairs) -> None:
    """Racing writers (grouped into shared commits) still get exact per-label answers."""
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = shown_pairs(store, add_pairs, 20)
    outcomes: list[tuple[int, Answer, object]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(12)

    def writer(worker: int) -> None:
        barrier.wait()
        for pair_id in ids:
            answer = ANSWERS[(pair_id + worker) % 2]  # two camps disagree on every pair
            try:
                outcome: object = store.add_label(pair_id, answer, labeller=f"w{worker}")
            except LabelConflict as exc:
                outcome = exc
            with lock:
                outcomes.append((pair_id, answer, outcome))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    stored = {lb.pair_id: lb.answer for lb in store.labels()}
    assert sorted(stored) == ids
    for pair_id in ids:
        mine = [(a, o) for p, a, o in outcomes if p == pair_id]
        assert len(mine) == 12
        assert [a for a, o in mine if o is True] == [stored[pair_id]]  # exactly one winner
        for answer, outcome in mine:
            if answer == stored[pair_id]:
                assert outcome in (True, False)
            else:
                assert isinstance(outcome, LabelConflict)
    store.close()
