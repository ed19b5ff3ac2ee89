"""A full disk under the labelling server is said as such: a 507 the page stops on (it keeps the
answer to send again), not the 503 "store busy, please retry" it would retry forever."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from rlhf.config import WebConfig
from rlhf.server import serve_in_thread
from rlhf.store import LabelStore
from tests.server.test_openapi import _conforms
from tests.server.wire import http_request

Run = tuple[LabelStore, Path]
FULL = [
    sqlite3.OperationalError("database or disk is full"),
    OSError(errno.ENOSPC, "No space left on device"),
]


def _failing(error: Exception):
    def fail(*args, **kwargs):
        raise error

    return fail


@pytest.mark.parametrize("error", FULL, ids=["sqlite", "oserror"])
def test_a_full_disk_is_a_507_that_says_so(
    client: FlaskClient, web_run: Run, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    store, _ = web_run
    monkeypatch.setattr(store, "add_label", _failing(error))
    body = {"pair_id": 1, "answer": "left"}
    assert _conforms(client, "POST", "/api/label", json=body) == 507
    reply = client.post("/api/label", json=body).get_json()
    assert reply["error"] == "disk_full"
    assert "the trainer's disk is full" in reply["message"].lower()
    monkeypatch.undo()
    assert client.post("/api/label", json=body).status_code == 200
    monkeypatch.setattr(store, "undo_last", _failing(error))
    assert _conforms(client, "POST", "/api/undo") == 507


def test_a_busy_store_is_still_a_503_and_other_os_errors_a_500(
    client: FlaskClient, web_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = web_run
    body = {"pair_id": 1, "answer": "left"}
    monkeypatch.setattr(
        store, "add_label", _failing(sqlite3.OperationalError("database is locked"))
    )
    assert client.post("/api/label", json=body).status_code == 503
    monkeypatch.setattr(store, "add_label", _failing(OSError(errno.EIO, "I/O error")))
    assert client.post("/api/label", json=body).get_json()["error"] == "internal_error"


def test_a_full_disk_on_the_wire(web_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    store, videos = web_run
    monkeypatch.setattr(store, "add_label", _failing(FULL[0]))
    with serve_in_thread(store, videos, WebConfig()) as handle:
        status, headers, payload = http_request(
            handle.port, "POST", "/api/label", {"pair_id": 1, "answer": "left"}
        )
    assert status == 507 and headers["content-type"] == "application/json"
    assert b"disk_full" in payload
