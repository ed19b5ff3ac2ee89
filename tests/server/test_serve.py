"""Serving with waitress: on the wire, the port released on stop, concurrent labellers, limits."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest
import waitress.trigger

from rlhf.config import WebConfig
from rlhf.core.types import Answer
from rlhf.server import serve_in_thread
from rlhf.store import LabelStore
from tests.server.wire import TRAVERSALS
from tests.server.wire import http_request as _http
from tests.support.labelling import shown_pairs

Run = tuple[LabelStore, Path]


def test_path_traversal_is_404_on_the_wire(web_run: Run) -> None:
    store, videos = web_run
    handle = serve_in_thread(store, videos, WebConfig())
    try:
        for path in [*TRAVERSALS, "/videos/../../../../etc/passwd"]:
            status, headers, body = _http(handle.port, "GET", path)
            assert status in (400, 404), path
            assert b"SQLite format" not in body and b"root:" not in body, path
            assert str(videos.parent).encode() not in body, path
            assert headers["content-type"].startswith("application/json"), path
    finally:
        handle.stop()


def _waitress_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(("waitress-", "rlhf-web"))]


def test_stop_releases_the_port_and_ends_every_thread(web_run: Run) -> None:
    store, videos = web_run
    before = _waitress_threads()
    handle = serve_in_thread(store, videos, WebConfig())
    assert handle.url == f"http://127.0.0.1:{handle.port}/"
    assert _http(handle.port, "GET", "/api/status")[0] == 200
    # An idle keep-alive connection must not hold the server open.
    idle = http.client.HTTPConnection("127.0.0.1", handle.port, timeout=10)
    idle.request("GET", "/api/status")
    assert idle.getresponse().read()
    assert len(_waitress_threads()) > len(before)
    handle.stop()
    assert _waitress_threads() == before
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", handle.port))  # raises if the port were still held
    with pytest.raises(OSError):
        _http(handle.port, "GET", "/api/status")
    with pytest.raises((OSError, http.client.HTTPException)):
        idle.request("GET", "/api/status")
        idle.getresponse()
    handle.stop()  # a second stop does nothing


def test_port_zero_picks_a_free_port_and_a_taken_port_raises(web_run: Run) -> None:
    store, videos = web_run
    with (
        serve_in_thread(store, videos, WebConfig(host="localhost")) as one,
        serve_in_thread(store, videos, WebConfig()) as two,
    ):
        assert one.port != two.port and 0 not in (one.port, two.port)
        assert _http(one.port, "GET", "/api/status")[0] == 200
        with pytest.raises(OSError):
            serve_in_thread(store, videos, WebConfig(port=two.port))


def test_request_size_limits_on_the_wire(web_run: Run) -> None:
    store, videos = web_run
    with serve_in_thread(store, videos, WebConfig()) as handle:
        padded = {"pair_id": 1, "answer": "left", "padding": "x" * 20_000}
        status, _, body = _http(handle.port, "POST", "/api/label", padded)
        assert status == 413 and json.loads(body)["error"] == "request_entity_too_large"
        huge = {"pair_id": 1, "answer": "left", "padding": "x" * 200_000}
        assert _http(handle.port, "POST", "/api/label", huge)[0] == 413  # cut off by waitress
        status, _, _ = _http(handle.port, "GET", "/api/status", headers={"X-Big": "y" * 40_000})
        assert status == 431
        assert _http(handle.port, "GET", "/api/status")[0] == 200  # still serving
    assert store.labels() == []


def test_serving_prints_nothing(web_run: Run, capfd: pytest.CaptureFixture[str]) -> None:
    store, videos = web_run
    with serve_in_thread(store, videos, WebConfig()) as handle:
        for path in ("/", "/api/status", "/api/next", "/videos/1.mp4", "/nope"):
            _http(handle.port, "GET", path)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


# -- concurrency ------------------------------------------------------------------------------------
def test_concurrent_submits_lose_and_duplicate_nothing(tmp_path: Path, add_pairs) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = shown_pairs(store, add_pairs, 48)
    answers = [a.value for a in Answer]
    handle = serve_in_thread(store, tmp_path / "videos", WebConfig())
    results: list[tuple[int, int, bool]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(16)

    def labeller(worker: int) -> None:
        con = http.client.HTTPConnection("127.0.0.1", handle.port, timeout=30)
        order = ids[worker % 3 :] + ids[: worker % 3]  # overlapping, in different orders
        barrier.wait()
        for pair_id in order[worker % 2 :: 2] if worker >= 8 else order:
            body = json.dumps({"pair_id": pair_id, "answer": answers[pair_id % 4]})
            con.request("POST", "/api/label", body, {"Content-Type": "application/json"})
            resp = con.getresponse()
            reply = json.loads(resp.read())
            with lock:
                results.append((pair_id, resp.status, reply.get("duplicate")))
        con.close()

    threads = [threading.Thread(target=labeller, args=(w,)) for w in range(16)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        handle.stop()
    assert len(results) == 8 * 48 + 8 * 24
    assert {status for _, status, _ in results} == {200}
    firsts = sorted(pid for pid, _, dup in results if dup is False)
    assert firsts == ids  # each pair saved exactly once, every other submit a duplicate
    con = sqlite3.connect(tmp_path / "labels.sqlite")
    rows = con.execute("SELECT pair_id, answer FROM labels ORDER BY pair_id").fetchall()
    con.close()
    assert rows == [(pid, answers[pid % 4]) for pid in ids]


def test_video_ranges_on_the_wire(web_run: Run) -> None:
    store, videos = web_run
    data = (videos / "2.mp4").read_bytes()
    with serve_in_thread(store, videos, WebConfig()) as handle:
        status, headers, body = _http(handle.port, "GET", "/videos/2.mp4")
        assert status == 200 and body == data and headers["content-type"] == "video/mp4"
        status, headers, body = _http(
            handle.port, "GET", "/videos/2.mp4", headers={"Range": "bytes=10-109"}
        )
        assert status == 206 and body == data[10:110]
        assert headers["content-range"] == f"bytes 10-109/{len(data)}"


def test_stop_under_load_never_writes_to_a_closed_pipe(
    web_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waitress wakes its loop by writing to a pipe. Once closed, its descriptor number may belong
    to another file (a socket, the label store): nobody may write to it after stop closed it."""
    late: list[str] = []
    original = waitress.trigger.trigger._physical_pull

    def watched(self) -> None:
        if self._closed:
            late.append(threading.current_thread().name)
        original(self)

    monkeypatch.setattr(waitress.trigger.trigger, "_physical_pull", watched)
    store, videos = web_run
    label = {"pair_id": 1, "answer": "left"}
    for _ in range(25):
        handle = serve_in_thread(store, videos, WebConfig())
        done = threading.Event()

        def hammer(port: int = handle.port, done: threading.Event = done) -> None:
            while not done.is_set():
                with contextlib.suppress(OSError, http.client.HTTPException):
                    _http(port, "POST", "/api/label", label)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.02)
        handle.stop()
        done.set()
        for t in threads:
            t.join(10)
    assert late == []
