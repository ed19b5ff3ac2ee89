"""The API for clips to rate: the next query says its kind and scale; grades are checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flask.testing import FlaskClient

from rlhf.core.types import Segment
from rlhf.store import SCALE_META, VIDEO_READY, LabelStore


def _clip(store: LabelStore, videos: Path) -> int:
    seg = Segment(
        obs=np.zeros((4, 3), np.float32),
        actions=np.zeros((4, 2), np.float32),
        true_rewards=np.zeros(4, np.float32),
        qpos=np.zeros((4, 0)),
        qvel=np.zeros((4, 0)),
        env_id="Toy-v0",
    )
    [clip] = store.add_rating_queries([seg], iteration=5)  # newest iteration: handed out first
    (videos / f"{clip}.mp4").write_bytes((videos / "1.mp4").read_bytes())
    store.mark_video(clip, VIDEO_READY, path=str(videos / f"{clip}.mp4"))
    return clip


def test_grades_are_stored_checked_and_undone(client: FlaskClient, web_run) -> None:
    store, videos = web_run
    store.set_meta(SCALE_META, {"levels": 3, "names": ["bad", "ok", "good"]})
    clip = _clip(store, videos)
    nxt = client.get("/api/next").get_json()
    assert nxt["pair_id"] == clip and nxt["kind"] == "rating"
    assert nxt["scale"] == {"levels": 3, "names": ["bad", "ok", "good"]}
    for bad in (3, -1, 1.5, True, "2", [1]):
        resp = client.post("/api/label", json={"pair_id": clip, "grade": bad})
        assert resp.status_code == 422 and resp.get_json()["error"] == "bad_grade", bad
    resp = client.post("/api/label", json={"pair_id": clip, "answer": "left"})
    assert resp.status_code == 409 and resp.get_json()["error"] == "wrong_kind"
    resp = client.post("/api/label", json={"pair_id": 1, "grade": 1})
    assert resp.status_code == 409 and resp.get_json()["error"] == "wrong_kind"
    assert client.post("/api/label", json={"pair_id": 999, "grade": 1}).status_code == 404
    ok = client.post("/api/label", json={"pair_id": clip, "grade": 2, "response_ms": 800})
    assert ok.status_code == 200 and ok.get_json()["duplicate"] is False
    again = client.post("/api/label", json={"pair_id": clip, "grade": 2})
    assert again.get_json()["duplicate"] is True
    conflict = client.post("/api/label", json={"pair_id": clip, "grade": 0})
    assert conflict.status_code == 409 and conflict.get_json()["error"] == "conflict"
    assert [(r.pair_id, r.grade, r.levels) for r in store.ratings()] == [(clip, 2, 3)]
    undone = client.post("/api/undo", json={}).get_json()
    assert undone["pair_id"] == clip and undone["grade"] == 2 and undone["kind"] == "rating"
    assert store.ratings() == []
    skip = client.post("/api/label", json={"pair_id": clip, "grade": None})
    assert skip.status_code == 200 and skip.get_json()["answer"] == "skip"
    assert store.counts().skipped == 1
