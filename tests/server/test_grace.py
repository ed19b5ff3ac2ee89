"""The end of a run: during the grace period no new pairs go out, answers on their way are kept."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from rlhf.config import WebConfig
from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
from rlhf.core.types import Answer
from rlhf.server import serve_in_thread
from rlhf.server.pages import PAGE_HEADER, Pages
from rlhf.store import LabelStore
from tests.server.wire import http_request as _http

Run = tuple[LabelStore, Path]
PAGE = {PAGE_HEADER: "page-0123456789"}


def _stop_in_background(handle, grace: float) -> tuple[threading.Thread, list[float]]:
    took: list[float] = []

    def stop() -> None:
        start = time.monotonic()
        handle.stop(grace=grace)
        took.append(time.monotonic() - start)

    thread = threading.Thread(target=stop)
    thread.start()
    deadline = time.monotonic() + 5
    while not handle.state.closing:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return thread, took


def test_grace_period_gives_no_pair_but_stores_answers(web_run: Run) -> None:
    store, videos = web_run
    finished = TrainerStatus(
        Phase.FINISHED, latest_true_return=812.5, labels_used=3, resume_command=None
    )
    handle = serve_in_thread(store, videos, WebConfig())
    port = handle.port
    # A page that holds one unsent answer when the run ends.
    assert _http(port, "GET", "/api/status?outbox=1", headers=PAGE)[0] == 200
    store.set_meta(STATUS_KEY, finished.to_json())
    thread, took = _stop_in_background(handle, grace=30.0)
    try:
        status, _, body = _http(port, "GET", "/api/next", headers=PAGE)
        nxt = json.loads(body)
        assert status == 200 and nxt["pair"] is None and nxt["state"] == "finished"
        assert "finished" in nxt["reason"] and nxt["status"]["ready"] == 3  # pairs left, none given
        status, _, body = _http(port, "GET", "/api/status", headers=PAGE)
        payload = json.loads(body)
        assert payload["closing"] is True and payload["phase"] == "finished"
        assert payload["latest_true_return"] == 812.5 and payload["labels_used"] == 3
        status, headers, _ = _http(
            port, "POST", "/api/label", {"pair_id": 1, "answer": "left"}, PAGE
        )
        assert status == 200
        page = {**PAGE, "Cookie": headers["set-cookie"].split(";")[0]}  # the labeller cookie
        assert _http(port, "POST", "/api/label", {"pair_id": 2, "answer": "right"}, page)[0] == 200
        status, _, body = _http(port, "POST", "/api/undo", {}, page)
        assert status == 200 and json.loads(body)["pair_id"] == 2
        assert _http(port, "POST", "/api/label", {"pair_id": 2, "answer": "equal"}, page)[0] == 200
        time.sleep(0.3)
        assert thread.is_alive(), "the page has not said it is done: keep waiting"
        # The page has seen the end and sent everything: the grace period ends early.
        assert _http(port, "GET", "/api/status?outbox=0&ended=1", headers=PAGE)[0] == 200
        thread.join(10)
        assert not thread.is_alive() and took[0] < 10
    finally:
        handle.stop()
        thread.join(30)
    assert {lb.pair_id: lb.answer for lb in store.labels()} == {1: Answer.LEFT, 2: Answer.EQUAL}
    with pytest.raises(OSError):
        _http(port, "GET", "/api/status")


def test_grace_ends_at_once_when_no_page_is_open(web_run: Run) -> None:
    store, videos = web_run
    handle = serve_in_thread(store, videos, WebConfig())
    start = time.monotonic()
    handle.stop(grace=30.0)
    assert time.monotonic() - start < 2


def test_grace_runs_out_when_a_page_never_reports(web_run: Run) -> None:
    store, videos = web_run
    handle = serve_in_thread(store, videos, WebConfig())
    assert _http(handle.port, "GET", "/api/status?outbox=2", headers=PAGE)[0] == 200
    start = time.monotonic()
    handle.stop(grace=0.5)
    assert 0.5 <= time.monotonic() - start < 5
    with pytest.raises(OSError):
        _http(handle.port, "GET", "/api/status")


# -- which pages may still send something ---------------------------------------------------------
def test_a_page_is_done_once_it_saw_the_end_with_an_empty_outbox() -> None:
    pages = Pages(active_s=20.0)
    assert pages.all_delivered(0.0)
    pages.seen("page-aaaaaaaa", 1.0)
    assert not pages.all_delivered(2.0), "open and not known to be done"
    pages.seen("page-aaaaaaaa", 3.0, outbox=0, ended=False)
    assert not pages.all_delivered(4.0), "an idle page may be answered any moment"
    pages.seen("page-aaaaaaaa", 5.0, outbox=2, ended=True)
    assert not pages.all_delivered(6.0)
    pages.seen("page-aaaaaaaa", 7.0, outbox=0, ended=True)
    assert pages.all_delivered(8.0)
    pages.seen("page-aaaaaaaa", 9.0, answering=True)  # a late answer: not done after all
    assert not pages.all_delivered(10.0)


def test_silent_pages_count_only_while_they_hold_answers() -> None:
    pages = Pages(active_s=20.0)
    pages.seen("page-quiet-empty", 0.0, outbox=0)
    pages.seen("page-quiet-full", 0.0, outbox=3)
    assert not pages.all_delivered(100.0)
    pages.seen("page-quiet-full", 100.0, outbox=0, ended=True)
    assert pages.all_delivered(101.0)


def test_anonymous_requests_keep_the_full_grace_while_recent() -> None:
    pages = Pages(active_s=20.0)
    pages.seen(None, 0.0)
    assert not pages.all_delivered(19.0)
    assert pages.all_delivered(21.0)


def test_only_the_most_recent_pages_are_remembered() -> None:
    pages = Pages(active_s=20.0, max_pages=2)
    for i, page in enumerate(("page-one-xxxx", "page-two-xxxx", "page-three-xx")):
        pages.seen(page, float(i), outbox=1)
    pages.seen("page-two-xxxx", 5.0, outbox=0, ended=True)
    pages.seen("page-three-xx", 5.0, outbox=0, ended=True)
    assert pages.all_delivered(6.0)  # page one was forgotten
