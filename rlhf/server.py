"""The labelling web server: a small JSON API over the label store, plus the page in ``rlhf/web``.

The server shares nothing with the trainer but the store (``labels.sqlite``): it hands out pairs
whose videos the render worker has marked ready, and writes each answer durably before it replies,
so a label the page saw acknowledged survives any crash. Answers are idempotent by pair id, which
lets the page re-send a label whenever it is unsure whether it arrived.

Security defaults: bind 127.0.0.1; on any other interface a random token is required (accepted as
``?token=`` on the page URL, then kept in an HttpOnly SameSite=Strict cookie). Without a token only
loopback ``Host`` headers are answered (DNS rebinding), cross-origin POSTs are refused (CSRF), there
is no CORS and no debugger, videos are served by pair id only, and every error is a JSON 4xx.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import math
import re
import secrets
import signal
import socket
import sqlite3
import threading
import time
import webbrowser
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request, send_file
from werkzeug.exceptions import HTTPException
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from rlhf.config import VideoConfig, WebConfig
from rlhf.store import VIDEO_READY, LabelConflict, LabelStore, PairRecord, UnknownPair
from rlhf.types import Answer

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).with_name("web")
TOKEN_COOKIE = "rlhf_token"
LABELLER_COOKIE = "rlhf_labeller"
MAX_BODY_BYTES = 16 * 1024
MAX_EXCLUDE = 100
LEASE_SECONDS = 300.0
_LABELLER_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


class ApiError(Exception):
    """An expected failure answered as JSON ``{"error": code, "message": message}``."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


class _Leases:
    """Which labeller was last handed which pair, so concurrent labellers see different pairs.

    Leases only spread work: when every ready pair is leased to someone else, the pair is handed
    out anyway (a second answer is harmless: same answer -> duplicate, different -> 409).
    """

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self.lock = threading.Lock()
        self._held: dict[int, tuple[str, float]] = {}

    def held_by_others(self, labeller: str, now: float) -> set[int]:
        self._held = {p: v for p, v in self._held.items() if v[1] > now}
        return {p for p, (who, _) in self._held.items() if who != labeller}

    def take(self, pair_ids: list[int], labeller: str, now: float) -> None:
        for pair_id in pair_ids:
            self._held[pair_id] = (labeller, now + self.ttl_s)

    def release(self, pair_id: int) -> None:
        with self.lock:
            self._held.pop(pair_id, None)


@dataclass
class _Context:
    """Everything the views need, kept in ``app.extensions["rlhf"]``."""

    store: LabelStore
    videos_dir: Path
    token: str | None
    total_labels_hint: int | None
    leases: _Leases
    stopped: bool = False


bp = Blueprint("rlhf", __name__)


def create_app(
    store: LabelStore,
    videos_dir: Path,
    token: str | None = None,
    total_labels_hint: int | None = None,
    lease_s: float = LEASE_SECONDS,
) -> Flask:
    """Build the labelling app.

    Args:
        store: the run's label store (thread-safe; each request thread opens its own connection).
        videos_dir: the only directory videos are served from (``<pair_id>.mp4``).
        token: when set, every request must carry it (query, cookie or Bearer header). When None,
            only requests with a loopback ``Host`` header are answered.
        total_labels_hint: labels requested over the run, shown until the trainer reports its own.
        lease_s: how long a pair handed to one labeller is kept from the others.
    """
    app = Flask(__name__, static_folder=str(WEB_DIR), static_url_path="/static")
    app.config.update(
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
        SEND_FILE_MAX_AGE_DEFAULT=None,
        PROPAGATE_EXCEPTIONS=False,
        TRAP_HTTP_EXCEPTIONS=False,
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["rlhf"] = _Context(
        store=store,
        videos_dir=Path(videos_dir),
        token=token,
        total_labels_hint=total_labels_hint,
        leases=_Leases(lease_s),
    )
    app.register_blueprint(bp)
    app.register_error_handler(ApiError, _api_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(sqlite3.OperationalError, _db_busy)
    app.register_error_handler(Exception, _unexpected_error)
    return app


def _ctx() -> _Context:
    return current_app.extensions["rlhf"]


# -- errors -----------------------------------------------------------------------------------
def _error_response(status: int, code: str, message: str, **extra: Any) -> Response:
    resp = jsonify({"error": code, "message": message, **extra})
    resp.status_code = status
    return resp


def _api_error(err: ApiError) -> Response:
    return _error_response(err.status, err.code, err.message, **err.extra)


def _http_error(err: HTTPException) -> Response:
    code = (err.name or "error").lower().replace(" ", "_")
    resp = _error_response(err.code or 500, code, err.description or err.name)
    if err.code == 405 and err.valid_methods:  # type: ignore[attr-defined]
        resp.headers["Allow"] = ", ".join(err.valid_methods)  # type: ignore[attr-defined]
    return resp


def _db_busy(err: sqlite3.OperationalError) -> Response:
    # "database is locked" after the 30 s busy timeout: the page retries, so say "try again".
    log.warning("label store busy: %s", err)
    return _error_response(503, "store_busy", "The label store is busy; please retry.")


def _unexpected_error(err: Exception) -> Response:
    log.exception("unexpected error in %s %s", request.method, request.path)
    return _error_response(500, "internal_error", "Unexpected server error (see the server log).")


# -- access control -----------------------------------------------------------------------------
def _hostname(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:port
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(host: str) -> bool:
    """True for names and addresses that only this machine can reach."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _supplied_token() -> tuple[str | None, bool]:
    """The token this request carries, and whether it came in the query string."""
    if "token" in request.args:
        return request.args.get("token", ""), True
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    return request.cookies.get(TOKEN_COOKIE), False


@bp.before_app_request
def _check_access() -> None:
    ctx = _ctx()
    if ctx.stopped:
        raise ApiError(503, "stopped", "The labelling server is shutting down.")
    if ctx.token is None:
        # No token means loopback only: refuse foreign Host headers (DNS rebinding).
        if not is_loopback(_hostname(request.host)):
            raise ApiError(403, "forbidden_host", "This server only answers on localhost.")
    else:
        supplied, from_query = _supplied_token()
        if not supplied:
            raise ApiError(
                401, "token_required", "Open the URL printed in the terminal (with ?token=)."
            )
        if not secrets.compare_digest(supplied.encode(), ctx.token.encode()):
            raise ApiError(403, "bad_token", "Wrong access token.")
        g.set_token_cookie = from_query
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        origin = request.headers.get("Origin")
        if origin and urlsplit(origin).netloc.lower() != request.host.lower():
            raise ApiError(403, "cross_origin", "Cross-origin requests are not allowed.")


@bp.after_app_request
def _finish(resp: Response) -> Response:
    ctx = _ctx()
    if g.get("set_token_cookie") and ctx.token:
        resp.set_cookie(TOKEN_COOKIE, ctx.token, httponly=True, samesite="Strict", path="/")
    if g.get("new_labeller"):
        resp.set_cookie(
            LABELLER_COOKIE, g.labeller, httponly=True, samesite="Strict", path="/",
            max_age=365 * 24 * 3600,
        )  # fmt: skip
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "no-referrer")
    resp.headers.setdefault("X-Frame-Options", "DENY")
    resp.headers.setdefault("Content-Security-Policy", _CSP)
    if request.path.startswith("/api/"):
        resp.headers["Cache-Control"] = "no-store"
    return resp


def _labeller(create: bool = True) -> str | None:
    """This browser's labeller id (cookie); a new one is issued on first use."""
    if "labeller" in g:
        return g.labeller
    value = request.cookies.get(LABELLER_COOKIE, "")
    if _LABELLER_RE.match(value):
        g.labeller = value
    elif create:
        g.labeller = secrets.token_urlsafe(12)
        g.new_labeller = True
    else:
        return None
    return g.labeller


# -- payloads -----------------------------------------------------------------------------------
def _number(value: Any) -> int | float | None:
    """A JSON-safe number (NaN and inf would make the page's JSON.parse fail)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _pair_payload(rec: PairRecord) -> dict[str, Any]:
    return {"pair_id": rec.id, "video_url": f"/videos/{rec.id}.mp4", "iteration": rec.iteration}


def status_payload(store: LabelStore, total_labels_hint: int | None = None) -> dict[str, Any]:
    """Progress and trainer figures for the page (also the body of ``GET /api/status``)."""
    counts = store.counts()
    trainer = store.get_meta("trainer_status") or {}
    if not isinstance(trainer, dict):
        trainer = {}
    requested = _number(trainer.get("labels_requested"))
    if requested is None:
        requested = total_labels_hint
    total = _number(trainer.get("labels_total"))
    phase = trainer.get("phase")
    return {
        "labels_done": counts.labelled,
        "labels_requested": requested,
        "total_labels": total if total is not None else total_labels_hint,
        "pending": counts.pending_video,
        "ready": counts.ready_unlabelled,
        "equal": counts.equal,
        "skipped": counts.skipped,
        "failed": counts.failed,
        "pairs": counts.pairs,
        "iteration": _number(trainer.get("iteration")),
        "env_steps": _number(trainer.get("env_steps")),
        "total_timesteps": _number(trainer.get("total_timesteps")),
        "latest_true_return": _number(trainer.get("latest_true_return")),
        "phase": phase if isinstance(phase, str) else None,
        "run_name": _str_meta(store, "run_name"),
        "env_id": _str_meta(store, "env_id"),
    }


def _str_meta(store: LabelStore, key: str) -> str | None:
    value = store.get_meta(key)
    return value if isinstance(value, str) else None


def _waiting(status: dict[str, Any], held_elsewhere: bool) -> tuple[str, str]:
    """(state, reason) shown when there is no pair to label."""
    if status["pending"] > 0:
        return "rendering", "Rendering the next videos..."
    if status["ready"] > 0 and held_elsewhere:
        return "busy", "Every ready pair is already on this page; waiting for new ones..."
    if status["phase"] == "finished":
        return "finished", "Training has finished: there is nothing left to label. Thank you!"
    return "waiting", "Waiting for the trainer to send pairs..."


# -- API ----------------------------------------------------------------------------------------
@bp.get("/")
def index() -> Response:
    resp = send_file(WEB_DIR / "index.html", mimetype="text/html", max_age=0)
    resp.headers["Cache-Control"] = "no-cache"
    return resp


@bp.get("/api/status")
def api_status() -> Response:
    ctx = _ctx()
    return jsonify(status_payload(ctx.store, ctx.total_labels_hint))


def _parse_exclude(raw: str) -> list[int]:
    parts = [p for p in raw.split(",") if p.strip()]
    if len(parts) > MAX_EXCLUDE:
        raise ApiError(400, "bad_exclude", f"exclude takes at most {MAX_EXCLUDE} ids.")
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise ApiError(400, "bad_exclude", "exclude must be comma-separated pair ids.") from None


@bp.get("/api/next")
def api_next() -> Response:
    ctx = _ctx()
    exclude = _parse_exclude(request.args.get("exclude", ""))
    labeller = _labeller()
    assert labeller is not None
    with ctx.leases.lock:
        now = time.monotonic()
        # The pairs the page already holds stay its own while it keeps asking.
        ctx.leases.take([p for p in exclude if p > 0], labeller, now)
        others = ctx.leases.held_by_others(labeller, now)
        recs = ctx.store.next_ready(tuple(sorted(set(exclude) | others)), limit=1)
        if not recs and others:
            recs = ctx.store.next_ready(tuple(exclude), limit=1)
        if recs:
            ctx.leases.take([recs[0].id], labeller, now)
    if recs:
        pair = _pair_payload(recs[0])
        return jsonify({"pair": pair, **pair, "state": "ready", "reason": None})
    status = status_payload(ctx.store, ctx.total_labels_hint)
    state, reason = _waiting(status, held_elsewhere=bool(exclude))
    return jsonify({"pair": None, "state": state, "reason": reason, "status": status})


def _json_object() -> dict[str, Any]:
    if not request.is_json:
        raise ApiError(415, "unsupported_media_type", "Send the body as application/json.")
    try:
        body = json.loads(request.get_data(cache=False))
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "bad_json", "The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", "The body must be a JSON object.")
    return body


def _parse_label(body: dict[str, Any]) -> tuple[int, Answer, int | None]:
    pair_id = body.get("pair_id")
    if isinstance(pair_id, bool) or not isinstance(pair_id, int):
        raise ApiError(422, "bad_pair_id", "pair_id must be an integer.")
    answer = body.get("answer")
    if not isinstance(answer, str) or answer not in {a.value for a in Answer}:
        choices = ", ".join(a.value for a in Answer)
        raise ApiError(422, "bad_answer", f"answer must be one of: {choices}.")
    response_ms = body.get("response_ms")
    if response_ms is not None and (
        isinstance(response_ms, bool)
        or not isinstance(response_ms, int)
        or not 0 <= response_ms <= 86_400_000
    ):
        raise ApiError(422, "bad_response_ms", "response_ms must be an integer of milliseconds.")
    return pair_id, Answer(answer), response_ms


@bp.post("/api/label")
def api_label() -> Response:
    ctx = _ctx()
    pair_id, answer, response_ms = _parse_label(_json_object())
    try:
        new = ctx.store.add_label(
            pair_id, answer, source="human", labeller=_labeller(), response_ms=response_ms
        )
    except UnknownPair:
        raise ApiError(404, "unknown_pair", f"There is no pair {pair_id}.") from None
    except LabelConflict:
        raise ApiError(
            409, "conflict", f"Pair {pair_id} already has a different answer; it was kept."
        ) from None
    ctx.leases.release(pair_id)
    counts = ctx.store.counts()
    return jsonify(
        {
            "saved": True,
            "duplicate": not new,
            "pair_id": pair_id,
            "answer": answer.value,
            "labels_done": counts.labelled,
        }
    )


@bp.post("/api/undo")
def api_undo() -> Response:
    ctx = _ctx()
    labeller = _labeller(create=False)
    rec = ctx.store.undo_last(source="human", labeller=labeller) if labeller else None
    if rec is None:
        raise ApiError(409, "nothing_to_undo", "There is no label of yours to undo.")
    with ctx.leases.lock:
        ctx.leases.take([rec.pair_id], labeller, time.monotonic())  # type: ignore[arg-type]
    pair = _pair_payload(ctx.store.get_pair_record(rec.pair_id))
    return jsonify(
        {
            "undone": True,
            "answer": rec.answer.value,
            "pair": pair,
            **pair,
            "labels_done": ctx.store.counts().labelled,
        }
    )


def _video_file(ctx: _Context, pair_id: int) -> Path:
    """The pair's video, found through the store and only ever inside ``videos_dir``."""
    try:
        rec = ctx.store.get_pair_record(pair_id)
    except UnknownPair:
        raise ApiError(404, "unknown_pair", f"There is no pair {pair_id}.") from None
    if rec.video_status != VIDEO_READY:
        raise ApiError(404, "video_not_ready", f"The video of pair {pair_id} is not ready.")
    root = ctx.videos_dir.resolve()
    candidates = [root / f"{pair_id}.mp4"]
    if rec.video_path:
        stored = Path(rec.video_path)
        candidates.insert(0, stored if stored.is_absolute() else root / stored)
    for candidate in candidates:
        path = candidate.resolve()
        if path.is_relative_to(root) and path.suffix == ".mp4" and path.is_file():
            return path
    raise ApiError(404, "video_missing", f"The video of pair {pair_id} is missing.")


@bp.get("/videos/<int:pair_id>.mp4")
def video(pair_id: int) -> Response:
    path = _video_file(_ctx(), pair_id)
    return send_file(path, mimetype="video/mp4", conditional=True, max_age=0)


# -- serving ------------------------------------------------------------------------------------
class _QuietHandler(WSGIRequestHandler):
    """Werkzeug's handler without a log line per request (the trainer owns the console)."""

    timeout = 60  # idle keep-alive connections end instead of pinning a thread forever

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


@dataclass(frozen=True)
class ServerHandle:
    """A running server: open ``url`` in a browser; ``stop()`` releases the port."""

    url: str
    host: str
    port: int
    token: str | None
    app: Flask = field(repr=False)
    _server: BaseWSGIServer = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    @property
    def local_url(self) -> str:
        """Base URL reachable from this machine (no token), for scripts and tests."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = "[::1]" if host == "::" else host
        return f"http://{_bracket(host)}:{self.port}"

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, refuse requests on open keep-alive connections, close the socket."""
        self.app.extensions["rlhf"].stopped = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _public_address() -> str:
    """This machine's name, for the printed URL when bound to every interface."""
    return socket.gethostname()


def serve_in_thread(
    store: LabelStore,
    videos_dir: Path,
    cfg: WebConfig,
    total_labels_hint: int | None = None,
) -> ServerHandle:
    """Serve the labelling app from a daemon thread (threaded werkzeug server, one thread a connection).

    A token is generated when ``cfg.host`` is not loopback and ``cfg.token`` is None; it is part
    of ``handle.url``. Port 0 picks a free port (``handle.port``).
    """
    token = cfg.token
    if token is None and not is_loopback(cfg.host):
        token = secrets.token_urlsafe(24)
    app = create_app(store, Path(videos_dir), token=token, total_labels_hint=total_labels_hint)
    server = make_server(cfg.host, cfg.port, app, threaded=True, request_handler=_QuietHandler)
    port = int(server.server_address[1])
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="rlhf-web", daemon=True
    )
    thread.start()
    shown = _public_address() if cfg.host in ("0.0.0.0", "::", "") else cfg.host
    url = f"http://{_bracket(shown)}:{port}/" + (f"?token={token}" if token else "")
    return ServerHandle(url, cfg.host, port, token, app, server, thread)


def _start_render_worker(store_path: Path, videos_dir: Path, video_cfg: VideoConfig) -> Any:
    from rlhf.render_worker import RenderWorker

    worker = RenderWorker(store_path, videos_dir, video_cfg)
    worker.start()
    return worker


def _labels_hint(run_dir: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        config = json.loads((run_dir / "config.json").read_text())
        total = config.get("query", {}).get("total_labels")
        return int(total) if total is not None else None
    return None


def serve_run(
    run_dir: Path,
    cfg: WebConfig,
    video_cfg: VideoConfig | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve an existing run's pending pairs without training, until Ctrl-C (or ``stop`` is set).

    Starts the render worker when ``rlhf.render_worker`` is available, so pairs still waiting for
    a video become labellable.
    """
    run_dir = Path(run_dir)
    store_path = run_dir / "labels.sqlite"
    if not store_path.is_file():
        raise FileNotFoundError(f"{store_path} does not exist: is {run_dir} a run directory?")
    stop = stop or threading.Event()
    store = LabelStore(store_path)
    videos_dir = run_dir / "videos"
    videos_dir.mkdir(exist_ok=True)
    status = store.get_meta("trainer_status") or {}
    if isinstance(status, dict) and status.get("phase") != "finished":
        # The trainer that wrote this status is gone (or this would not be needed): say so.
        store.set_meta(
            "trainer_status", {**status, "phase": "no trainer running (labels are kept)"}
        )
    worker = _start_render_worker(store_path, videos_dir, video_cfg or VideoConfig())
    handle = serve_in_thread(store, videos_dir, cfg, total_labels_hint=_labels_hint(run_dir))
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        print(f"Label pairs of {run_dir.name} at {handle.url}  (Ctrl-C to stop)", flush=True)
        if worker is None and store.counts().pending_video:
            print("note: no render worker available; pairs without a video stay hidden", flush=True)
        if cfg.open_browser:
            webbrowser.open(handle.url)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        handle.stop()
        if worker is not None:
            worker.stop()
        store.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
