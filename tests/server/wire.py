"""Raw HTTP against a live server, for the tests that go over the wire."""

from __future__ import annotations

import http.client
import json


def http_request(
    port: int, method: str, path: str, body: object = None, headers: dict | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One raw request to a live server (the path is sent exactly as given)."""
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    con.request(method, path, body=data, headers=hdrs)
    resp = con.getresponse()
    payload = resp.read()
    con.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload


TRAVERSALS = [
    "/videos/../labels.sqlite",
    "/videos/%2e%2e%2flabels.sqlite",
    "/videos/%2e%2e/labels.sqlite",
    "/videos/..%2flabels.sqlite",
    "/videos/1.mp4/../../labels.sqlite",
    "/videos/1.mp4/../../x",
    "/videos//etc/passwd",
    "/videos/%2fetc%2fpasswd",
    "/videos/-1.mp4",
    "/videos/1.mp4%00.sqlite",
    "/static/../labels.sqlite",
    "/static/%2e%2e/server.py",
    "/labels.sqlite",
]
"""Paths that must never reach a file outside the videos and static folders."""
