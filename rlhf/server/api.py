"""The JSON API blueprint: the next pair, answers (idempotent by pair id), undo, status, videos.

Every answer is written durably before the reply, so a label the page saw acknowledged survives
any crash, and the page may re-send whenever it is unsure whether one arrived.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, jsonify, request, send_file

from rlhf.server.access import labeller
from rlhf.server.pages import PAGE_HEADER, valid_page_id
from rlhf.server.payloads import pair_payload, status_payload, waiting
from rlhf.server.state import ApiError, ServerState, server_state
from rlhf.store import VIDEO_READY, LabelConflict, UnknownPair
from rlhf.types import Answer

MAX_EXCLUDE = 100
MAX_OUTBOX = 1_000_000

bp = Blueprint("api", __name__)


@bp.before_request
def _note_page() -> None:
    """Keep track of the pages talking to us (they decide when the grace period may end)."""
    if request.path.startswith("/api/"):
        page = valid_page_id(request.headers.get(PAGE_HEADER))
        answering = request.method == "POST"
        server_state().pages.seen(page, time.monotonic(), answering=answering)


@bp.get("/api/status")
def api_status() -> Response:
    state = server_state()
    outbox, ended = _parse_outbox_report()
    if outbox is not None:
        page = valid_page_id(request.headers.get(PAGE_HEADER))
        state.pages.seen(page, time.monotonic(), outbox=outbox, ended=ended)
    return jsonify(status_payload(state))


def _parse_outbox_report() -> tuple[int | None, bool]:
    """``?outbox=N&ended=1``: answers the page still holds, and whether it has seen the end."""
    raw = request.args.get("outbox")
    if raw is None:
        return None, False
    if not raw.isdigit() or int(raw) > MAX_OUTBOX:
        raise ApiError(400, "bad_outbox", "outbox must be a count of answers.")
    return int(raw), request.args.get("ended") == "1"


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
    state = server_state()
    exclude = _parse_exclude(request.args.get("exclude", ""))
    who = labeller()
    assert who is not None
    recs = [] if state.closing else _lease_next(state, exclude, who)
    if recs:
        pair = pair_payload(recs[0])
        return jsonify({"pair": pair, **pair, "state": "ready", "reason": None})
    status = status_payload(state)
    kind, reason = waiting(status, held_elsewhere=bool(exclude))
    return jsonify({"pair": None, "state": kind, "reason": reason, "status": status})


def _lease_next(state: ServerState, exclude: list[int], who: str) -> list[Any]:
    with state.leases.lock:
        now = time.monotonic()
        # The pairs the page already holds stay its own while it keeps asking.
        state.leases.take([p for p in exclude if p > 0], who, now)
        others = state.leases.held_by_others(who, now)
        recs = state.store.next_ready(tuple(sorted(set(exclude) | others)), limit=1)
        if not recs and others:
            recs = state.store.next_ready(tuple(exclude), limit=1)
        if recs:
            state.leases.take([recs[0].id], who, now)
    return recs


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
    # Still accepted while the run is closing: this is what the grace period is for.
    state = server_state()
    pair_id, answer, response_ms = _parse_label(_json_object())
    try:
        new = state.store.add_label(
            pair_id, answer, source="human", labeller=labeller(), response_ms=response_ms
        )
    except UnknownPair:
        raise ApiError(404, "unknown_pair", f"There is no pair {pair_id}.") from None
    except LabelConflict:
        raise ApiError(
            409, "conflict", f"Pair {pair_id} already has a different answer; it was kept."
        ) from None
    state.leases.release(pair_id)
    return jsonify(
        {
            "saved": True,
            "duplicate": not new,
            "pair_id": pair_id,
            "answer": answer.value,
            "labels_done": state.store.counts().labelled,
        }
    )


@bp.post("/api/undo")
def api_undo() -> Response:
    state = server_state()
    who = labeller(create=False)
    rec = state.store.undo_last(source="human", labeller=who) if who else None
    if rec is None or who is None:
        raise ApiError(409, "nothing_to_undo", "There is no label of yours to undo.")
    with state.leases.lock:
        state.leases.take([rec.pair_id], who, time.monotonic())
    pair = pair_payload(state.store.get_pair_record(rec.pair_id))
    return jsonify(
        {
            "undone": True,
            "answer": rec.answer.value,
            "pair": pair,
            **pair,
            "labels_done": state.store.counts().labelled,
        }
    )


def _video_file(state: ServerState, pair_id: int) -> Path:
    """The pair's video, found through the store and only ever inside ``videos_dir``."""
    try:
        rec = state.store.get_pair_record(pair_id)
    except UnknownPair:
        raise ApiError(404, "unknown_pair", f"There is no pair {pair_id}.") from None
    if rec.video_status != VIDEO_READY:
        raise ApiError(404, "video_not_ready", f"The video of pair {pair_id} is not ready.")
    root = state.videos_dir.resolve()
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
    path = _video_file(server_state(), pair_id)
    return send_file(path, mimetype="video/mp4", conditional=True, max_age=0)
