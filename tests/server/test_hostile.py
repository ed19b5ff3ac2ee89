"""Issue 14's findings, one test each: hostile input gets a JSON 4xx and never hurts another client.

Each test reproduces what an attacker (or bad luck) did to the server and pins the fix; the fuzz
suite (test_fuzz.py) searches for more of the same kind.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from rlhf.config import WebConfig
from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
from rlhf.core.types import Answer, Pair
from rlhf.server import create_app, serve_in_thread
from rlhf.server.serve import THREADS
from rlhf.store import LabelStore, PairNotShown, UnknownPair
from rlhf.store.labels import _PendingLabel
from tests.server.wire import http_request, raw_exchange
from tests.support.labelling import shown_pairs

Run = tuple[LabelStore, Path]
HUGE = 99999999999999999999
JSON = {"Content-Type": "application/json"}


def _label(client: FlaskClient, pair_id: object, answer: object = "left", **headers: str):
    return client.post("/api/label", json={"pair_id": pair_id, "answer": answer}, headers=headers)


def _assert_json_4xx(resp, status: int) -> dict:
    assert resp.status_code == status, resp.get_data(as_text=True)
    body = resp.get_json()
    assert body["error"] and body["message"]
    return body


# -- 1. integers beyond 64 bits -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "status"),
    [
        (f"/videos/{HUGE}.mp4", 404),
        (f"/videos/{2**63}.mp4", 404),
        (f"/api/next?exclude={HUGE}", 400),
        (f"/api/next?exclude=-{HUGE}", 400),
        ("/api/next?exclude=-1", 400),
        ("/api/next?exclude=0", 400),
        (f"/api/next?exclude=1,{2**63}", 400),
        ("/api/status?outbox=²", 400),  # isdigit() is true, int() fails
        ("/api/status?outbox=1&ended=yes", 400),
    ],
)
def test_huge_and_odd_integers_in_urls_are_json_4xx(
    client: FlaskClient, path: str, status: int
) -> None:
    _assert_json_4xx(client.get(path), status)


@pytest.mark.parametrize("pair_id", [2**63, HUGE, -(2**63) - 1, -1, 0])
def test_pair_ids_no_row_can_have_are_404(client: FlaskClient, web_run: Run, pair_id: int) -> None:
    assert _assert_json_4xx(_label(client, pair_id), 404)["error"] == "unknown_pair"
    store = web_run[0]
    assert store.labels() == []
    with pytest.raises(UnknownPair):
        store.add_label(pair_id, Answer.LEFT)
    with pytest.raises(UnknownPair):
        store.get_pair_record(pair_id)
    assert [r.id for r in store.next_ready(exclude=[pair_id, 1], limit=5)] == [2, 3]


# -- 2. one bad exclude must not break /api/next for everyone ---------------------------------------
def test_a_bad_exclude_leaves_other_labellers_served(app, web_run: Run) -> None:
    alice, bob = app.test_client(), app.test_client()
    assert alice.get(f"/api/next?exclude={HUGE}").status_code == 400
    # In range but no such pair: accepted, and never remembered as held.
    assert alice.get(f"/api/next?exclude={2**63 - 1},123456").status_code == 200
    resp = bob.get("/api/next")
    assert resp.status_code == 200 and resp.get_json()["pair_id"] in (1, 2, 3)
    assert len(app.extensions["rlhf"].leases) == 2  # the two pairs handed out, nothing else


# -- 3. one bad label must not fail other people's labels --------------------------------------------
def test_a_failing_label_is_undone_alone_in_its_group_commit(tmp_path: Path, add_pairs) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    a, b = shown_pairs(store, add_pairs, 2)
    batch = [
        _PendingLabel((a, Answer.LEFT, "human", "ann", None)),
        _PendingLabel((2**63, Answer.LEFT, "human", "eve", None)),  # SQLite cannot bind it
        _PendingLabel((a + 1000, Answer.LEFT, "human", "eve", None)),
        _PendingLabel((b, Answer.RIGHT, "human", "bob", None)),
    ]
    store._commit_labels(batch)  # one transaction, as concurrent add_label calls share it
    assert batch[0].result is True and batch[0].error is None
    assert isinstance(batch[1].error, OverflowError)
    assert isinstance(batch[2].error, UnknownPair)
    assert batch[3].result is True and batch[3].error is None
    assert {lb.pair_id: lb.answer for lb in store.labels()} == {a: Answer.LEFT, b: Answer.RIGHT}
    store.close()


def test_a_hostile_labeller_never_fails_honest_labels(tmp_path: Path, add_pairs) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = shown_pairs(store, add_pairs, 48)
    handle = serve_in_thread(store, tmp_path / "videos", WebConfig())
    stop, honest, hostile = threading.Event(), [], []

    def attack() -> None:
        bad = [{"pair_id": 2**63, "answer": "left"}, {"pair_id": -1, "answer": "left"}]
        while not stop.is_set():
            hostile.append(http_request(handle.port, "POST", "/api/label", bad[len(hostile) % 2]))

    def label(mine: list[int]) -> None:
        for pair_id in mine:
            body = {"pair_id": pair_id, "answer": "right"}
            honest.append(http_request(handle.port, "POST", "/api/label", body)[0])

    attackers = [threading.Thread(target=attack) for _ in range(3)]
    labellers = [threading.Thread(target=label, args=(ids[k::6],)) for k in range(6)]
    try:
        for t in attackers + labellers:
            t.start()
        for t in labellers:
            t.join(60)
    finally:
        stop.set()
        for t in attackers:
            t.join(60)
        handle.stop()
    assert honest == [200] * len(ids)
    assert hostile and {status for status, _, _ in hostile} == {404}
    assert sorted(lb.pair_id for lb in store.labels()) == ids
    store.close()


# -- 4. the lease table cannot be filled ----------------------------------------------------------------
def test_made_up_excludes_cannot_fill_the_lease_table(app, web_run: Run) -> None:
    eve, bob = app.test_client(), app.test_client()
    for k in range(30):
        made_up = ",".join(str(10_000 + 100 * k + i) for i in range(100))
        assert eve.get(f"/api/next?exclude={made_up}").status_code == 200
    assert len(app.extensions["rlhf"].leases) <= 3  # at most the ready pairs
    resp = bob.get("/api/next")
    assert resp.status_code == 200 and resp.get_json()["pair"] is not None


def test_next_ready_takes_any_number_of_excluded_ids(tmp_path: Path, add_pairs) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = shown_pairs(store, add_pairs, 3)
    # More ids than SQLite takes bound variables (250,000 here; 999 in older builds).
    excluded = [*range(ids[-1] + 1, ids[-1] + 300_001), ids[0]]
    assert [r.id for r in store.next_ready(exclude=excluded, limit=5)] == ids[1:]
    assert store.ready_among(excluded) == {ids[0]}
    store.close()


# -- 5. a malformed Origin ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "origin",
    ["http://[", "http://[::1", "http://localhost:99999", "http://localhost:x", "null", "http://"],
)
def test_malformed_origin_is_refused_as_cross_origin(
    client: FlaskClient, web_run: Run, origin: str
) -> None:
    body = _assert_json_4xx(_label(client, 1, Origin=origin), 403)
    assert body["error"] == "cross_origin"
    assert web_run[0].labels() == []


# -- 6. deeply nested JSON -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body", [b"[" * 8000 + b"]" * 8000, b'{"a":' * 2500 + b"1" + b"}" * 2500, b"[" * 16000]
)
def test_deeply_nested_json_is_400(client: FlaskClient, body: bytes) -> None:
    resp = client.post("/api/label", data=body, content_type="application/json")
    assert _assert_json_4xx(resp, 400)["error"] == "bad_json"


# -- 7. the HTTP layer's own errors are JSON too ------------------------------------------------------
WIRE_ERRORS = [
    (b"GET /" + b"a" * 40_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 431),
    (
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + b"".join(b"X-H%d: y\r\n" % i for i in range(5000))
        + b"\r\n",
        431,
    ),
    (b"GET /a b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n", 400),
    (b"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    (b"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 200000\r\n\r\n{}", 413),
    (b"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n", 400),
]


def test_http_layer_errors_are_json_on_the_wire(web_run: Run) -> None:
    store, videos = web_run
    with serve_in_thread(store, videos, WebConfig()) as handle:
        for request, expected in WIRE_ERRORS:
            status, headers, body = raw_exchange(handle.port, request)
            assert status == expected, (request[:60], status, body)
            assert headers["content-type"] == "application/json", request[:60]
            reply = json.loads(body)
            assert reply["error"] and reply["message"], reply
            assert headers["x-content-type-options"] == "nosniff"
        assert http_request(handle.port, "GET", "/api/status")[0] == 200  # still serving


# -- 8. labels only for pairs that were shown ------------------------------------------------------------
def test_a_pair_whose_video_was_never_ready_cannot_be_labelled(
    client: FlaskClient, web_run: Run, add_pairs, rng
) -> None:
    store, _ = web_run
    assert _assert_json_4xx(_label(client, 4, "left"), 409)["error"] == "not_shown"
    store.mark_video(4, "failed", error="no GL")
    assert _assert_json_4xx(_label(client, 4, "left"), 409)["error"] == "not_shown"
    # A synthetic teacher stores pairs and labels together: that still works, and the web
    # cannot answer those pairs (nobody saw them).
    pair = store.get_pair(1)
    [synthetic] = store.add_pairs_with_labels(
        [Pair(pair.left, pair.right)], [Answer.EQUAL], "oracle"
    )
    assert _assert_json_4xx(_label(client, synthetic, "left"), 409)["error"] == "not_shown"
    with pytest.raises(PairNotShown):
        store.add_label(4, Answer.LEFT)
    assert [(lb.pair_id, lb.source) for lb in store.labels()] == [(synthetic, "oracle")]
    assert _label(client, 1, "left").status_code == 200  # a shown pair, as before


# -- 9. Origin scheme, Sec-Fetch-Site, a bounded thread pool, status figures -----------------------------
def test_origin_must_match_scheme_host_and_port_on_the_wire(web_run: Run) -> None:
    store, videos = web_run
    with serve_in_thread(store, videos, WebConfig()) as handle:
        port, label = handle.port, {"pair_id": 1, "answer": "left"}
        for origin in (
            f"https://127.0.0.1:{port}",
            f"http://127.0.0.1:{port + 1}",
            "http://127.0.0.1",
        ):
            status, _, body = http_request(port, "POST", "/api/label", label, {"Origin": origin})
            assert status == 403 and json.loads(body)["error"] == "cross_origin", origin
        assert store.labels() == []
        ok = http_request(port, "POST", "/api/label", label, {"Origin": f"http://127.0.0.1:{port}"})
        assert ok[0] == 200


@pytest.mark.parametrize(
    ("site", "status"),
    [("cross-site", 403), ("same-site", 403), ("same-origin", 200), ("none", 200)],
)
def test_sec_fetch_site_from_elsewhere_is_refused(
    client: FlaskClient, web_run: Run, site: str, status: int
) -> None:
    resp = _label(client, 1, **{"Sec-Fetch-Site": site})
    assert resp.status_code == status and resp.is_json
    assert len(web_run[0].labels()) == (status == 200)


def test_half_open_connections_take_no_threads_and_lock_nobody_out(web_run: Run) -> None:
    store, videos = web_run
    with serve_in_thread(store, videos, WebConfig()) as handle:
        assert http_request(handle.port, "GET", "/api/status")[0] == 200  # the pool has started
        before = threading.active_count()
        sockets = []
        try:
            for _ in range(300):
                sock = socket.create_connection(("127.0.0.1", handle.port), timeout=10)
                sock.sendall(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends
                sockets.append(sock)
            time.sleep(0.5)
            assert threading.active_count() <= before + THREADS
            start = time.monotonic()
            assert http_request(handle.port, "GET", "/api/status")[0] == 200
            assert time.monotonic() - start < 5
        finally:
            for sock in sockets:
                sock.close()


def test_labels_done_never_exceeds_labels_requested(client: FlaskClient, web_run: Run) -> None:
    store, _ = web_run
    # The trainer's last status is older than the pairs it queued since.
    store.set_meta(STATUS_KEY, TrainerStatus(Phase.TRAINING, labels_requested=1).to_json())
    for pair_id in (1, 2, 3):
        assert _label(client, pair_id).status_code == 200
    status = client.get("/api/status").get_json()
    assert status["labels_done"] == 3
    assert status["labels_requested"] == 4  # every stored pair was requested
    unknown = create_app(store, web_run[1]).test_client()  # no hint, no trainer figure
    store.set_meta(STATUS_KEY, None)
    assert unknown.get("/api/status").get_json()["labels_requested"] == 4
