"""The app factory: the page, the API blueprint, access control, and JSON for every error."""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import sqlite3
from pathlib import Path
from typing import Any

from flask import Flask, Response, jsonify, request, send_file
from werkzeug.exceptions import HTTPException

from rlhf.server import access
from rlhf.server.api import bp
from rlhf.server.leases import LEASE_SECONDS, Leases
from rlhf.server.pages import Pages
from rlhf.server.state import ApiError, ServerState
from rlhf.store import (
    LabelConflict,
    PairNotShown,
    QueryError,
    UnknownPair,
    WrongKind,
)
from rlhf.store.errors import io_error_line, is_disk_full
from rlhf.store.protocols import ServerStore

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024
PAGE_FILES = (
    "index.html",
    "app.js",
    "agent.js",
    "dom.js",
    "keys.js",
    "outbox.js",
    "player.js",
    "ratings.js",
    "status.js",
    "style.css",
)
STORE_ERRORS: dict[type[QueryError], tuple[int, str, str, str]] = {
    UnknownPair: (404, "unknown_pair", "There is no pair {id}.", "There is no clip {id}."),
    WrongKind: (
        409,
        "wrong_kind",
        "Query {id} asks for a grade.",
        "Query {id} is a pair: send an answer.",
    ),
    PairNotShown: (
        409,
        "not_shown",
        "Pair {id} has not been shown: its video was never ready.",
        "Clip {id} has not been shown.",
    ),
    LabelConflict: (
        409,
        "conflict",
        "Pair {id} already has an answer, so this one was not stored.",
        "Clip {id} already has a grade, so this one was not stored.",
    ),
}
"""Each store error -> (status, error code, the message about a pair, about a clip to grade): the
one place a store refusal becomes an API error, for every route."""


def web_dir() -> Path:
    """The folder holding the page (``index.html``, ``app.js``, ``style.css``).

    A wheel carries the checkout's top-level ``web/`` folder as the resource package ``rlhf.web``
    (see ``pyproject.toml``), found through ``importlib.resources``. An editable install cannot
    import that package (setuptools' editable finder maps only folders with an ``__init__.py``),
    so in a checkout the folder is found next to the ``rlhf`` package instead.
    """
    with contextlib.suppress(ModuleNotFoundError):
        index = importlib.resources.files("rlhf.web").joinpath("index.html")
        if index.is_file():
            return Path(str(index)).parent
    checkout = Path(__file__).resolve().parents[2] / "web"
    if (checkout / "index.html").is_file():
        return checkout
    raise FileNotFoundError(f"the labelling page is missing: no rlhf.web package and no {checkout}")


def create_app(
    store: ServerStore,
    videos_dir: Path,
    token: str | None = None,
    total_labels_hint: int | None = None,
    lease_s: float = LEASE_SECONDS,
    watch_command: str | None = None,
    labellers: dict[str, str] | None = None,
    overlap: float = 0.0,
) -> Flask:
    """Build the labelling app.

    Args:
        store: the run's label store (thread-safe; each request thread opens its own connection).
        videos_dir: the only directory videos are served from (``<pair_id>.mp4``).
        token: when set, every request must carry it (query, cookie or Bearer header). When None,
            only requests with a loopback ``Host`` header are answered.
        total_labels_hint: labels requested over the run, shown until the trainer reports its own.
        lease_s: how long a pair handed to one labeller is kept from the others.
        watch_command: how to watch the run's learning curves, shown when the run has ended.
        labellers: named labellers as ``{token: name}``; each request must carry one's token.
        overlap: with named labellers, the share of pairs shown to a second labeller.
    """
    folder = web_dir()
    app = Flask(__name__, static_folder=str(folder), static_url_path="/static")
    app.config.update(
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
        SEND_FILE_MAX_AGE_DEFAULT=None,
        PROPAGATE_EXCEPTIONS=False,
        TRAP_HTTP_EXCEPTIONS=False,
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["rlhf"] = ServerState(
        store=store,
        videos_dir=Path(videos_dir),
        token=token,
        total_labels_hint=total_labels_hint,
        watch_command=watch_command,
        leases=Leases(lease_s),
        pages=Pages(),
        labellers=labellers,
        overlap=overlap,
    )
    access.install(app)

    @app.get("/")
    def index() -> Response:
        resp = send_file(folder / "index.html", mimetype="text/html", max_age=0)
        resp.headers["Cache-Control"] = "no-cache"
        return resp

    app.register_blueprint(bp)
    app.register_error_handler(ApiError, _api_error)
    for store_error in STORE_ERRORS:
        app.register_error_handler(store_error, _store_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(sqlite3.OperationalError, _db_busy)
    app.register_error_handler(OSError, _os_error)
    app.register_error_handler(Exception, _unexpected_error)
    return app


def _error_response(status: int, code: str, message: str, **extra: Any) -> Response:
    resp = jsonify({"error": code, "message": message, **extra})
    resp.status_code = status
    return resp


def _api_error(err: ApiError) -> Response:
    return _error_response(err.status, err.code, err.message, **err.extra)


def _store_error(err: QueryError) -> Response:
    status, code, about_pair, about_clip = STORE_ERRORS[type(err)]
    message = about_clip if err.rating else about_pair
    return _error_response(status, code, message.format(id=err.query_id))


def _http_error(err: HTTPException) -> Response:
    code = (err.name or "error").lower().replace(" ", "_")
    resp = _error_response(err.code or 500, code, err.description or err.name)
    if err.code == 405 and err.valid_methods:  # type: ignore[attr-defined]
        resp.headers["Allow"] = ", ".join(err.valid_methods)  # type: ignore[attr-defined]
    return resp


def _db_busy(err: sqlite3.OperationalError) -> Response:
    if is_disk_full(err):
        return _disk_full(err)
    # "database is locked" after the 30 s busy timeout: the page retries, so say "try again".
    log.warning("label store busy: %s", err)
    return _error_response(503, "store_busy", "The label store is busy; please retry.")


def _os_error(err: OSError) -> Response:
    return _disk_full(err) if is_disk_full(err) else _unexpected_error(err)


def _disk_full(err: OSError | sqlite3.Error) -> Response:
    # Not a 503: retrying cannot help until someone frees space, so the page stops and says so
    # (it keeps the answer to send again), and the console says which file.
    log.error("%s", io_error_line(err))
    return _error_response(
        507,
        "disk_full",
        "The trainer's disk is full: the answer was not saved. Free some space on the"
        " trainer's machine, then send it again.",
    )


def _unexpected_error(err: Exception) -> Response:
    log.exception("unexpected error in %s %s", request.method, request.path)
    return _error_response(500, "internal_error", "Unexpected server error (see the server log).")
