"""Access control: the token and its cookie, loopback-only Host headers, no cross-origin POSTs."""

from __future__ import annotations

import json
from pathlib import Path

from flask.testing import FlaskClient

from rlhf.config import WebConfig
from rlhf.server import TOKEN_COOKIE, create_app, serve_in_thread
from rlhf.store import LabelStore
from tests.server.wire import http_request as _http

Run = tuple[LabelStore, Path]


def _label(client: FlaskClient, pair_id: object, answer: object):
    return client.post("/api/label", json={"pair_id": pair_id, "answer": answer})


def test_token_required_then_kept_in_a_strict_httponly_cookie(web_run: Run) -> None:
    store, videos = web_run
    app = create_app(store, videos, token="s3cret-token")
    client = app.test_client()
    for path in ("/", "/api/status", "/api/next", "/videos/1.mp4", "/static/app.js"):
        resp = client.get(path)
        assert resp.status_code == 401 and resp.is_json, path
    assert client.get("/?token=wrong").status_code == 403
    assert _label(client, 1, "left").status_code == 401
    assert store.labels() == []

    page = client.get("/?token=s3cret-token")
    assert page.status_code == 200
    cookie = page.headers["Set-Cookie"]
    assert f"{TOKEN_COOKIE}=s3cret-token" in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get("/api/status").status_code == 200  # cookie from now on
    assert _label(client, 1, "left").status_code == 200
    bearer = app.test_client().get("/api/status", headers={"Authorization": "Bearer s3cret-token"})
    assert bearer.status_code == 200


def test_without_token_only_loopback_host_headers_are_answered(client: FlaskClient) -> None:
    assert client.get("/api/status", headers={"Host": "127.0.0.1:8000"}).status_code == 200
    assert client.get("/api/status", headers={"Host": "[::1]:8000"}).status_code == 200
    resp = client.get("/api/status", headers={"Host": "evil.example:8000"})
    assert resp.status_code == 403 and resp.get_json()["error"] == "forbidden_host"


def test_cross_origin_post_is_refused(client: FlaskClient, web_run: Run) -> None:
    resp = client.post(
        "/api/label",
        json={"pair_id": 1, "answer": "left"},
        headers={"Origin": "https://evil.example"},
    )
    assert resp.status_code == 403
    assert web_run[0].labels() == []
    same = client.post(
        "/api/label", json={"pair_id": 1, "answer": "left"}, headers={"Origin": "http://localhost"}
    )
    assert same.status_code == 200


def test_non_loopback_serving_requires_the_token(web_run: Run) -> None:
    store, videos = web_run
    handle = serve_in_thread(store, videos, WebConfig(host="0.0.0.0", port=0))
    try:
        assert handle.token and f"?token={handle.token}" in handle.url
        status, _, body = _http(handle.port, "GET", "/api/status")
        assert status == 401 and json.loads(body)["error"] == "token_required"
        status, _, _ = _http(handle.port, "POST", "/api/label", {"pair_id": 1, "answer": "left"})
        assert status == 401
        status, _, _ = _http(handle.port, "GET", "/videos/1.mp4")
        assert status == 401
        status, headers, body = _http(handle.port, "GET", f"/?token={handle.token}")
        assert status == 200 and b"<html" in body
        cookie = headers["set-cookie"].split(";")[0]
        status, _, _ = _http(handle.port, "GET", "/api/status", headers={"Cookie": cookie})
        assert status == 200
        status, _, _ = _http(
            handle.port, "POST", "/api/label", {"pair_id": 1, "answer": "left"}, {"Cookie": cookie}
        )
        assert status == 200
        assert [lb.pair_id for lb in store.labels()] == [1]
    finally:
        handle.stop()


def test_a_generated_token_is_kept_with_the_run(web_run: Run) -> None:
    # A tab left open after `train --resume --web.host 0.0.0.0` keeps its access.
    store, videos = web_run
    tokens = []
    for _ in range(2):
        handle = serve_in_thread(store, videos, WebConfig(host="0.0.0.0", port=0))
        tokens.append(handle.token)
        handle.stop()
    assert tokens[0] and tokens[0] == tokens[1]
    given = serve_in_thread(store, videos, WebConfig(host="0.0.0.0", port=0, token="x" * 40))
    given.stop()
    assert given.token == "x" * 40  # --web.token still wins
