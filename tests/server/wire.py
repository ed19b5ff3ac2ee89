"""Raw HTTP against a live server, for the tests that go over the wire."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket


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


def raw_exchange(
    port: int, data: bytes, timeout: float = 10.0
) -> tuple[int, dict[str, str], bytes]:
    """Send ``data`` as it is on a new connection; the response's status, headers and body.

    For requests http.client would refuse to write (a space in the path, broken header lines).
    The server may close the connection while the request is still being sent (a request too
    large to read); what it answered first is still read.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            sock.sendall(data)
        received = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                received += chunk
                if _complete(received):
                    break
    return parse_response(received)


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def parse_response(data: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, lower-cased headers, body) of one raw HTTP response."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError(f"no complete HTTP response: {data[:200]!r}")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return status, headers, body
