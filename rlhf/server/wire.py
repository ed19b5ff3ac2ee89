"""JSON for the errors waitress answers by itself, before a request reaches the app.

Malformed HTTP never gets to Flask: a request line with a space in the path, headers beyond the
size limit, a body beyond waitress' own limit, an unsupported transfer coding. Waitress answers
those with plain text; this thin subclass of its channel answers the same status codes with the
app's JSON error shape (``{"error": code, "message": text}``), so a client can parse every 4xx.
"""

from __future__ import annotations

import json
from typing import Any

from waitress.channel import HTTPChannel
from waitress.task import ErrorTask

_HEADERS = [
    ("Content-Type", "application/json"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
]


def error_body(code: int, reason: str, detail: str) -> tuple[int, str, bytes]:
    """(status, reason, JSON body) for one of waitress' errors.

    An unsupported ``Transfer-Encoding`` is waitress' 501; here it is the client's 400, because
    no client's request may produce a 5xx (a 5xx means the server is broken).
    """
    if code == 501:
        code, reason = 400, "Bad Request"
    name = reason.lower().replace(" ", "_")
    message = f"{reason}: {detail}" if detail else reason
    return code, reason, json.dumps({"error": name, "message": message}).encode()


class JsonErrorTask(ErrorTask):
    """Waitress' error response, as JSON."""

    def execute(self) -> None:
        err = self.request.error
        code, reason, body = error_body(err.code, err.reason, str(err.body).strip())
        self.status = f"{code} {reason}"
        self.response_headers.extend(_HEADERS)
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class JsonErrorChannel(HTTPChannel):
    """Waitress' connection handler, answering its own errors with :class:`JsonErrorTask`."""

    error_task_class = JsonErrorTask


def use_json_errors(server: Any) -> None:
    """Make a server from ``waitress.create_server`` (one listening socket) answer in JSON."""
    if not hasattr(server, "channel_class"):
        raise TypeError(f"expected one waitress server, got {type(server).__name__}")
    server.channel_class = JsonErrorChannel
