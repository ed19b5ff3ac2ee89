"""The labelling API through Flask's test client: every endpoint, every bad input, every error."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from flask.testing import FlaskClient

from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
from rlhf.core.types import Answer
from rlhf.server import LABELLER_COOKIE
from rlhf.store import VIDEO_READY, LabelStore
from rlhf.store.meta import TARGET_META
from tests.server.wire import TRAVERSALS

Run = tuple[LabelStore, Path]


def _label(client: FlaskClient, pair_id: object, answer: object, **extra: object):
    return client.post("/api/label", json={"pair_id": pair_id, "answer": answer, **extra})


# -- page and static files ---------------------------------------------------------------------
def test_page_and_static_files_are_served_with_security_headers(client: FlaskClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert "Which one looks more like the behaviour you want?" in html
    assert "http://" not in html and "https://" not in html  # nothing from a CDN
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    for path, mimetype in (
        ("/static/app.js", "text/javascript"),
        ("/static/style.css", "text/css"),
    ):
        resp = client.get(path)
        assert resp.status_code == 200, path
        assert resp.mimetype == mimetype
    # No CORS, whatever the Origin says.
    resp = client.get("/api/status", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in resp.headers


# -- /api/next -------------------------------------------------------------------------------------
def test_next_hands_out_ready_pairs_oldest_first_and_honours_exclude(client: FlaskClient) -> None:
    first = client.get("/api/next").get_json()
    assert first["pair"] == {
        "pair_id": 1,
        "video_url": "/videos/1.mp4",
        "iteration": 0,
        "kind": "pair",
    }
    assert first["pair_id"] == 1 and first["video_url"] == "/videos/1.mp4"
    assert client.get("/api/next?exclude=1").get_json()["pair_id"] == 2
    assert client.get("/api/next?exclude=1,2").get_json()["pair_id"] == 3
    # Pair 4 has no video yet: it is never handed out.
    none = client.get("/api/next?exclude=1,2,3").get_json()
    assert none["pair"] is None
    assert none["state"] == "rendering"
    assert none["status"]["pending"] == 1 and none["status"]["ready"] == 3
    assert client.get_cookie(LABELLER_COOKIE) is not None  # issued on first use


def test_next_skips_labelled_pairs_and_explains_waiting(client: FlaskClient, web_run: Run) -> None:
    store, _ = web_run
    assert _label(client, 1, "left").status_code == 200
    assert client.get("/api/next").get_json()["pair_id"] == 2
    for pair_id in (2, 3):
        _label(client, pair_id, "right")
    store.mark_video(4, "failed", error="boom")
    waiting = client.get("/api/next").get_json()
    assert waiting["pair"] is None and waiting["state"] == "waiting"
    assert waiting["reason"].startswith("Every pair asked so far is answered")
    store.set_meta(STATUS_KEY, TrainerStatus(Phase.FINISHED).to_json())
    done = client.get("/api/next").get_json()
    assert done["state"] == "finished" and "nothing left" in done["reason"]


def test_while_pebble_explores_the_waiting_reason_says_so_and_until_when(
    client: FlaskClient, web_run: Run
) -> None:
    store, _ = web_run
    for pair_id in (1, 2, 3):
        _label(client, pair_id, "left")
    store.mark_video(4, "failed", error="boom")
    said = "The agent explores on its own before it asks anything: the first pairs come at 14,000."
    store.set_meta(STATUS_KEY, TrainerStatus(Phase.EXPLORING, message=said).to_json())
    waiting = client.get("/api/next").get_json()
    assert waiting["pair"] is None and waiting["state"] == "waiting"
    assert waiting["reason"] == said
    assert waiting["status"]["phase"] == "exploring"


def test_concurrent_labellers_are_handed_different_pairs(app, web_run: Run) -> None:
    store, _ = web_run
    alice, bob = app.test_client(), app.test_client()
    a = alice.get("/api/next").get_json()["pair_id"]
    b = bob.get("/api/next").get_json()["pair_id"]
    assert a != b
    c = bob.get(f"/api/next?exclude={b}").get_json()["pair_id"]
    assert c not in (a, b)
    # Only alice's pair is left: it is not handed to bob too (one of the two answers would be
    # refused); bob waits, and is told why.
    assert bob.get(f"/api/next?exclude={b},{c}").get_json()["pair"] is None
    store.mark_video(4, "failed", error="no more on the way")
    busy = bob.get(f"/api/next?exclude={b},{c}").get_json()
    assert busy["pair"] is None and busy["state"] == "busy"
    assert "another labeller" in busy["reason"]


@pytest.mark.parametrize("polls", [True, False])
def test_a_pair_watched_longer_than_its_lease_stays_with_its_page_while_the_page_polls(
    app, web_run: Run, monkeypatch: pytest.MonkeyPatch, polls: bool
) -> None:
    # The page asks for no new pair while it has one queued, so only its status polls say that
    # alice is still watching; without them her pair goes to bob after the lease (control arm).
    clock = [1000.0]
    monkeypatch.setattr("rlhf.server.api.time", SimpleNamespace(monotonic=lambda: clock[0]))
    alice, bob = app.test_client(), app.test_client()
    shown = alice.get("/api/next").get_json()["pair_id"]
    queued = alice.get(f"/api/next?exclude={shown}").get_json()["pair_id"]
    lease = app.extensions["rlhf"].leases.ttl_s
    for _ in range(3):  # a quarter-hour on one pair, polling every lease/2
        clock[0] += lease / 2
        query = f"?held={shown},{queued}" if polls else ""
        assert alice.get(f"/api/status{query}").status_code == 200
    first = bob.get("/api/next").get_json()["pair_id"]  # the one pair nobody holds
    second = bob.get(f"/api/next?exclude={first}").get_json()["pair"]
    assert (second is not None and second["pair_id"] in (shown, queued)) is not polls


@pytest.mark.parametrize("held", ["a", "1,x", "-1", ",".join(["1"] * 101)])
def test_status_rejects_bad_held_ids(client: FlaskClient, held: str) -> None:
    resp = client.get(f"/api/status?held={held}")
    assert resp.status_code == 400 and resp.get_json()["error"] == "bad_held"


@pytest.mark.parametrize("exclude", ["a", "1,x", "1.5", ",".join(["1"] * 101)])
def test_next_rejects_bad_exclude(client: FlaskClient, exclude: str) -> None:
    resp = client.get(f"/api/next?exclude={exclude}")
    assert resp.status_code == 400
    assert resp.get_json()["error"] == "bad_exclude"


# -- /api/label ------------------------------------------------------------------------------------
def test_label_is_stored_with_labeller_and_response_time(client: FlaskClient, web_run: Run) -> None:
    store, _ = web_run
    resp = _label(client, 2, "equal", response_ms=1234)
    assert resp.status_code == 200
    assert resp.get_json() == {
        "saved": True,
        "duplicate": False,
        "pair_id": 2,
        "answer": "equal",
        "labels_done": 1,
    }
    [label] = store.labels()
    assert (label.pair_id, label.answer, label.source) == (2, Answer.EQUAL, "human")
    assert label.response_ms == 1234
    assert label.labeller == client.get_cookie(LABELLER_COOKIE).value


def test_label_resubmit_is_idempotent_and_conflict_is_409(
    client: FlaskClient, web_run: Run
) -> None:
    store, _ = web_run
    assert _label(client, 1, "left").get_json()["duplicate"] is False
    again = _label(client, 1, "left")
    assert again.status_code == 200 and again.get_json()["duplicate"] is True
    conflict = _label(client, 1, "right")
    assert conflict.status_code == 409
    assert conflict.get_json()["error"] == "conflict"
    assert [(lb.pair_id, lb.answer) for lb in store.labels()] == [(1, Answer.LEFT)]


def test_label_unknown_pair_is_404(client: FlaskClient, web_run: Run) -> None:
    resp = _label(client, 999, "left")
    assert resp.status_code == 404
    assert resp.get_json()["error"] == "unknown_pair"
    assert web_run[0].labels() == []


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b"{not json", "application/json", 400),
        (b"", "application/json", 400),
        (b'[1, "left"]', "application/json", 400),
        (b'"left"', "application/json", 400),
        (b'{"answer": "left"}', "application/json", 422),
        (b'{"pair_id": 1}', "application/json", 422),
        (b'{"pair_id": "1", "answer": "left"}', "application/json", 422),
        (b'{"pair_id": 1.0, "answer": "left"}', "application/json", 422),
        (b'{"pair_id": true, "answer": "left"}', "application/json", 422),
        (b'{"pair_id": null, "answer": "left"}', "application/json", 422),
        (b'{"pair_id": 1, "answer": "up"}', "application/json", 422),
        (b'{"pair_id": 1, "answer": "LEFT"}', "application/json", 422),
        (b'{"pair_id": 1, "answer": 1}', "application/json", 422),
        (b'{"pair_id": 1, "answer": "left", "response_ms": -5}', "application/json", 422),
        (b'{"pair_id": 1, "answer": "left", "response_ms": "fast"}', "application/json", 422),
        (b'{"pair_id": 1, "answer": "left"}', "text/plain", 415),
        (b"pair_id=1&answer=left", "application/x-www-form-urlencoded", 415),
    ],
)
def test_label_rejects_bad_input_with_json_4xx(
    client: FlaskClient, web_run: Run, body: bytes, content_type: str, status: int
) -> None:
    resp = client.post("/api/label", data=body, content_type=content_type)
    assert resp.status_code == status
    assert resp.is_json and resp.get_json()["message"]
    assert web_run[0].labels() == []


def test_too_large_body_is_413_json(client: FlaskClient, web_run: Run) -> None:
    body = {"pair_id": 1, "answer": "left", "padding": "x" * 20_000}
    resp = client.post("/api/label", json=body)
    assert resp.status_code == 413
    assert resp.is_json and resp.get_json()["error"] == "request_entity_too_large"
    assert web_run[0].labels() == []


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/label", 405),
        ("PUT", "/api/label", 405),
        ("GET", "/api/undo", 405),
        ("POST", "/api/status", 405),
        ("DELETE", "/api/next", 405),
        ("POST", "/videos/1.mp4", 405),
        ("GET", "/api/nope", 404),
        ("GET", "/static/nope.js", 404),
    ],
)
def test_wrong_method_and_unknown_route_are_json(
    client: FlaskClient, method: str, path: str, status: int
) -> None:
    resp = client.open(path, method=method)
    assert resp.status_code == status
    assert resp.is_json and "error" in resp.get_json()
    if status == 405:
        assert resp.headers["Allow"]


# -- /api/undo -------------------------------------------------------------------------------------
def test_undo_removes_this_labellers_last_label_only(app, web_run: Run) -> None:
    store, _ = web_run
    alice, bob = app.test_client(), app.test_client()
    assert _label(alice, 1, "left").status_code == 200
    assert _label(bob, 2, "right").status_code == 200
    assert _label(alice, 3, "skip").status_code == 200

    resp = alice.post("/api/undo")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["pair"] == {
        "pair_id": 3,
        "video_url": "/videos/3.mp4",
        "iteration": 0,
        "kind": "pair",
    }
    assert body["answer"] == "skip" and body["labels_done"] == 2
    assert alice.post("/api/undo").get_json()["pair"]["pair_id"] == 1
    nothing = alice.post("/api/undo")
    assert nothing.status_code == 409 and nothing.get_json()["error"] == "nothing_to_undo"
    assert [(lb.pair_id, lb.answer) for lb in store.labels()] == [(2, Answer.RIGHT)]
    # The undone pair is labellable again, with another answer.
    assert _label(alice, 3, "left").get_json()["duplicate"] is False


def test_undo_without_labeller_cookie_is_409(client: FlaskClient) -> None:
    resp = client.post("/api/undo")
    assert resp.status_code == 409
    assert resp.is_json


# -- /api/status ------------------------------------------------------------------------------------
def test_status_reports_store_and_trainer_figures(client: FlaskClient, web_run: Run) -> None:
    store, _ = web_run
    empty = client.get("/api/status").get_json()
    assert empty["labels_done"] == 0 and empty["labels_requested"] == 10
    assert empty["phase"] is None and empty["iteration"] is None and empty["closing"] is False

    store.set_meta("run_name", "cheetah-1")
    store.set_meta("env_id", "HalfCheetah-v5")
    store.set_meta(
        STATUS_KEY,
        {  # as a trainer writes it, with a NaN return (read through TrainerStatus.from_json)
            "phase": "training",
            "message": "Collecting rollouts.",
            "iteration": 7,
            "env_steps": 14336,
            "total_timesteps": 1_000_000,
            "latest_true_return": float("nan"),
            "labels_requested": 25,
            "labels_used": 2,
        },
    )
    for pair_id, answer in ((1, "equal"), (2, "skip"), (3, "left")):
        assert _label(client, pair_id, answer).status_code == 200
    resp = client.get("/api/status")
    assert resp.headers["Cache-Control"] == "no-store"
    assert resp.get_json() == {
        "labels_done": 3,
        "labels_imported": 0,
        "labels_requested": 25,
        "total_labels": 10,
        "pending": 1,
        "ready": 0,
        "equal": 1,
        "skipped": 1,
        "failed": 0,
        "pairs": 4,
        "iteration": 7,
        "env_steps": 14336,
        "total_timesteps": 1_000_000,
        "latest_true_return": None,  # NaN would break the page's JSON.parse
        "latest_success_rate": None,  # HalfCheetah reports no success
        "labels_used": 2,
        "labels_needed": None,
        "labels_target": None,
        "labels_retired": 0,
        "eta_seconds": None,
        "eta": None,  # 3 answers set no pace yet
        "feedback_kind": "pairs",
        "reward_accuracy": None,
        "final": False,
        "phase": "training",
        "message": "Collecting rollouts.",
        "resume_command": None,
        "closing": False,
        "watch_command": None,
        "run_name": "cheetah-1",
        "env_id": "HalfCheetah-v5",
        "task": None,
        "target": None,
        "labeller": None,
        "labellers": None,
    }
    # The trainer's own total wins over the hint.
    status = TrainerStatus(Phase.WAITING, labels_requested=25, labels_total=700)
    store.set_meta(STATUS_KEY, status.to_json())
    assert client.get("/api/status").get_json()["total_labels"] == 700


def test_status_names_the_target_whose_return_it_reports(client: FlaskClient, web_run: Run) -> None:
    store, _ = web_run
    assert client.get("/api/status").get_json()["target"] is None
    store.set_meta(TARGET_META, "")  # a run without a target writes ""
    assert client.get("/api/status").get_json()["target"] is None
    store.set_meta(TARGET_META, "backward")
    assert client.get("/api/status").get_json()["target"] == "backward"


def test_status_counts_this_runs_labels_not_those_copied_by_labels_from(
    client: FlaskClient, web_run: Run
) -> None:
    store, _ = web_run
    # As --labels-from leaves a store: copied pairs labelled with source "import", and the meta.
    store.set_meta("labels_from", {"source": "old-run", "pairs": 2})
    for pair_id in (1, 2):
        store.add_label(pair_id, Answer.LEFT, source="import")
    assert _label(client, 3, "right").status_code == 200
    status = client.get("/api/status").get_json()
    assert (status["labels_done"], status["labels_imported"], status["pairs"]) == (1, 2, 2)


@pytest.mark.parametrize("value", [{"phase": "training reward"}, {"iteration": 3}, "x", [1], 7])
def test_status_ignores_a_trainer_status_it_cannot_read(
    client: FlaskClient, web_run: Run, value: object
) -> None:
    web_run[0].set_meta(STATUS_KEY, value)
    body = client.get("/api/status").get_json()
    assert body["phase"] is None and body["iteration"] is None
    assert body["labels_requested"] == 10  # the hint


@pytest.mark.parametrize("query", ["outbox=-1", "outbox=x", "outbox=1.5", "outbox=99999999"])
def test_status_rejects_a_bad_outbox_report(client: FlaskClient, query: str) -> None:
    resp = client.get(f"/api/status?{query}")
    assert resp.status_code == 400 and resp.get_json()["error"] == "bad_outbox"


# -- videos ---------------------------------------------------------------------------------------
def test_video_is_served_by_id_with_ranges(client: FlaskClient, web_run: Run) -> None:
    _, videos = web_run
    data = (videos / "2.mp4").read_bytes()
    full = client.get("/videos/2.mp4")
    assert full.status_code == 200 and full.mimetype == "video/mp4"
    assert full.data == data
    assert full.headers["Accept-Ranges"] == "bytes"
    part = client.get("/videos/2.mp4", headers={"Range": "bytes=10-109"})
    assert part.status_code == 206
    assert part.data == data[10:110]
    assert part.headers["Content-Range"] == f"bytes 10-109/{len(data)}"


def test_video_of_pending_unknown_or_missing_pair_is_404(client: FlaskClient, web_run: Run) -> None:
    _, videos = web_run
    (videos / "4.mp4").write_bytes(b"not ready yet")
    for path in ("/videos/4.mp4", "/videos/999.mp4", "/videos/0.mp4"):
        resp = client.get(path)
        assert resp.status_code == 404 and resp.is_json, path
    (videos / "3.mp4").unlink()
    resp = client.get("/videos/3.mp4")
    assert resp.status_code == 404 and resp.get_json()["error"] == "video_missing"


@pytest.mark.parametrize(
    "stored", ["../secret.mp4", "{run}/secret.mp4", "{run}/labels.sqlite", "/etc/passwd", "link"]
)
def test_video_path_in_store_outside_videos_dir_is_never_served(
    client: FlaskClient, web_run: Run, stored: str
) -> None:
    store, videos = web_run
    (videos.parent / "secret.mp4").write_bytes(b"SECRET outside the videos directory")
    (videos / "1.mp4").unlink()
    if stored == "link":  # a symlink inside videos/ that points outside
        (videos / "1.mp4").symlink_to(videos.parent / "secret.mp4")
        stored = str(videos / "1.mp4")
    store.mark_video(1, VIDEO_READY, path=stored.format(run=videos.parent))
    resp = client.get("/videos/1.mp4")
    assert resp.status_code == 404
    assert b"SECRET" not in resp.data and b"SQLite" not in resp.data and b"root:" not in resp.data


@pytest.mark.parametrize("path", TRAVERSALS)
def test_path_traversal_is_404_via_test_client(
    client: FlaskClient, web_run: Run, path: str
) -> None:
    resp = client.get(path)
    assert resp.status_code == 404
    assert resp.is_json
    assert b"SQLite format" not in resp.data
    assert str(web_run[1].parent).encode() not in resp.data


# -- errors ----------------------------------------------------------------------------------------
def test_unexpected_error_is_json_500_and_busy_store_503(
    client: FlaskClient, web_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = web_run

    def broken() -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(store, "counts", broken)
    resp = client.get("/api/status")
    assert resp.status_code == 500 and resp.get_json()["error"] == "internal_error"
    assert "bug" not in resp.get_data(as_text=True)  # no internals leak

    def locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(store, "counts", locked)
    resp = client.get("/api/status")
    assert resp.status_code == 503 and resp.is_json
