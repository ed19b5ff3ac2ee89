"""The JSON API blueprint: the next pair, answers (idempotent by pair id), undo, status, videos.

Every answer is written durably before the reply, so a label the page saw acknowledged survives
any crash, and the page may re-send whenever it is unsure whether one arrived. What the store
refuses (an unknown pair, a conflicting answer...) is answered by the app's handler for store
errors (``app.py``), the same for every route.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, jsonify, request, send_file

from rlhf.core.types import Answer
from rlhf.data.seed_labels import imported_pairs
from rlhf.render.paths import POLICY_DIR
from rlhf.server.access import labeller
from rlhf.server.named import label_as, second_look
from rlhf.server.openapi import MAX_EXCLUDE_IDS as MAX_EXCLUDE
from rlhf.server.openapi import MAX_OUTBOX_REPORT as MAX_OUTBOX
from rlhf.server.openapi import openapi_document
from rlhf.server.pages import PAGE_HEADER, valid_page_id
from rlhf.server.payloads import (
    pair_payload,
    policy_payload,
    rating_scale,
    status_payload,
    waiting,
)
from rlhf.server.state import ApiError, ServerState, server_state
from rlhf.store import MAX_ROW_ID, VIDEO_READY, RatingRecord

# ASCII digits only: str.isdigit() and int() also take other scripts' digits, and "²" passes
# the one but not the other.
_COUNT_RE = re.compile(r"[0-9]{1,7}")
_ID_RE = re.compile(r"[0-9]{1,19}")

bp = Blueprint("api", __name__)


@bp.before_request
def _note_page() -> None:
    """Keep track of the pages talking to us (they decide when the grace period may end)."""
    if request.path.startswith("/api/"):
        page = valid_page_id(request.headers.get(PAGE_HEADER))
        answering = request.method == "POST"
        server_state().pages.seen(page, time.monotonic(), answering=answering)


@bp.get("/api/openapi.json")
def api_openapi() -> Response:
    """The API described for other clients and for tools that test it (see openapi.py)."""
    return jsonify(openapi_document())


@bp.get("/api/status")
def api_status() -> Response:
    state = server_state()
    outbox, ended = _parse_outbox_report()
    if outbox is not None:
        page = valid_page_id(request.headers.get(PAGE_HEADER))
        state.pages.seen(page, time.monotonic(), outbox=outbox, ended=ended)
    held = _parse_exclude(request.args.get("held", ""), "held")
    if held:
        _keep_leases(state, held)
    return jsonify(status_payload(state))


def _keep_leases(state: ServerState, held: list[int]) -> None:
    """Renew this labeller's leases on the pairs its page still shows: a person may watch one
    pair for longer than a lease, and the page asks for no new pair while it has one queued."""
    who = labeller()
    assert who is not None
    with state.leases.lock:
        # As in _lease_next: only ready pairs, never away from another labeller.
        state.leases.take(state.store.ready_among(held), who, time.monotonic(), steal=False)


def _parse_outbox_report() -> tuple[int | None, bool]:
    """``?outbox=N&ended=1``: answers the page still holds, and whether it has seen the end."""
    raw, ended = request.args.get("outbox"), request.args.get("ended")
    if ended not in (None, "0", "1"):
        raise ApiError(400, "bad_ended", "ended must be 0 or 1.")
    if raw is None:
        return None, False
    if not _COUNT_RE.fullmatch(raw) or int(raw) > MAX_OUTBOX:
        raise ApiError(400, "bad_outbox", "outbox must be a count of answers.")
    return int(raw), ended == "1"


def _parse_exclude(raw: str, name: str = "exclude") -> list[int]:
    """``?exclude=`` (or ``?held=``): the pair ids a page holds, comma-separated."""
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if len(parts) > MAX_EXCLUDE:
        raise ApiError(400, f"bad_{name}", f"{name} takes at most {MAX_EXCLUDE} ids.")
    if not all(_ID_RE.fullmatch(p) and 1 <= int(p) <= MAX_ROW_ID for p in parts):
        raise ApiError(
            400, f"bad_{name}", f"{name} must be comma-separated pair ids (1 to {MAX_ROW_ID})."
        )
    return [int(p) for p in parts]


@bp.get("/api/next")
def api_next() -> Response:
    state = server_state()
    exclude = _parse_exclude(request.args.get("exclude", ""))
    who = labeller()
    assert who is not None
    # Named labellers: a second look at an overlap pair first, to measure agreement while the
    # pair is fresh (not leased: it is already labelled, nobody else is handed it for that).
    again = None
    if not state.closing and state.labellers is not None:
        again = second_look(state, exclude, who)
    if again is not None:
        recs = [again]
    else:
        recs = [] if state.closing else _lease_next(state, exclude, who)
    if recs:
        pair = pair_payload(recs[0], state.store)
        return jsonify({"pair": pair, **pair, "state": "ready", "reason": None})
    status = status_payload(state)
    with state.leases.lock:
        others = bool(state.leases.held_by_others(who, time.monotonic()))
    kind, reason = waiting(status, held_elsewhere=bool(exclude), held_by_others=others)
    return jsonify({"pair": None, "state": kind, "reason": reason, "status": status})


def _lease_next(state: ServerState, exclude: list[int], who: str) -> list[Any]:
    with state.leases.lock:
        now = time.monotonic()
        # The pairs the page already holds stay its own while it keeps asking. Only pairs that
        # can be handed out now are leased, and never away from another labeller: made-up ids
        # cannot fill the table, and one page cannot take the pairs others are watching.
        state.leases.take(state.store.ready_among(exclude), who, now, steal=False)
        others = state.leases.held_by_others(who, now)
        # Never another's pair, named or not: two people answering one pair at once waste an
        # answer and get a 409 (second opinions come from second_look, on purpose only).
        recs = state.store.next_ready(set(exclude) | others, limit=1)
        if recs:
            state.leases.take([recs[0].id], who, now)
    return recs


def _json_object() -> dict[str, Any]:
    if not request.is_json:
        raise ApiError(415, "unsupported_media_type", "Send the body as application/json.")
    try:
        body = json.loads(request.get_data(cache=False))
    except ValueError:  # UnicodeDecodeError included
        raise ApiError(400, "bad_json", "The body is not valid JSON.") from None
    except RecursionError:
        raise ApiError(400, "bad_json", "The body's JSON is nested too deeply.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", "The body must be a JSON object.")
    return body


def _parse_label(body: dict[str, Any]) -> tuple[int, Answer, int | None]:
    pair_id = body.get("pair_id")
    if isinstance(pair_id, bool) or not isinstance(pair_id, int):
        raise ApiError(422, "bad_pair_id", "pair_id must be an integer.")
    answer = body.get("answer", Answer.SKIP.value if "grade" in body else None)
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
    body = _json_object()
    pair_id, answer, response_ms = _parse_label(body)
    if "grade" in body:
        return _rate(state, pair_id, body["grade"], response_ms)
    if state.labellers is not None:
        new = label_as(state, pair_id, answer, response_ms, labeller() or "")
    else:
        new = state.store.add_label(
            pair_id, answer, source="human", labeller=labeller(), response_ms=response_ms
        )
    state.leases.release(pair_id)
    if new:
        state.answer_times.note(time.monotonic())
    return jsonify(
        {
            "saved": True,
            "duplicate": not new,
            "pair_id": pair_id,
            "answer": answer.value,
            "labels_done": _labels_done(state),
        }
    )


def _labels_done(state: ServerState) -> int:
    """This run's own answers, as ``/api/status`` counts them (not those of --labels-from)."""
    return state.store.label_count() - imported_pairs(state.store)


def _rate(state: ServerState, query_id: int, grade: object, response_ms: int | None) -> Response:
    """A grade (or null: skip) for a clip to rate, stored like a label."""
    levels = rating_scale(state.store)["levels"]
    if grade is not None and (
        isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade < levels
    ):
        raise ApiError(
            422, "bad_grade", f"grade must be an integer from 0 to {levels - 1}, or null."
        )
    new = state.store.add_rating(
        query_id,
        grade,
        levels,
        labeller=labeller(),
        response_ms=response_ms,  # type: ignore[arg-type]
    )
    state.leases.release(query_id)
    if new:
        state.answer_times.note(time.monotonic())
    return jsonify(
        {
            "saved": True,
            "duplicate": not new,
            "pair_id": query_id,
            "answer": Answer.SKIP.value if grade is None else "grade",
            "grade": grade,
            "labels_done": _labels_done(state),
        }
    )


@bp.post("/api/undo")
def api_undo() -> Response:
    state = server_state()
    who = labeller(create=False)
    undone = None
    if who is not None and state.labellers is not None:
        undone = state.store.undo_latest_of(who)  # named: labels, grades and second opinions
    elif who is not None:
        rec = state.store.undo_last(source="human", labeller=who)
        if isinstance(rec, RatingRecord):
            grade = rec.grade
            undone = (
                rec.pair_id,
                {"answer": "grade" if grade is not None else "skip", "grade": grade},
            )
        elif rec is not None:
            undone = rec.pair_id, {"answer": rec.answer.value}
    if undone is None or who is None:
        raise ApiError(409, "nothing_to_undo", "There is no label of yours to undo.")
    pair_id, answer = undone
    state.answer_times.forget_last()
    with state.leases.lock:
        state.leases.take([pair_id], who, time.monotonic())
    pair = pair_payload(state.store.get_pair_record(pair_id), state.store)
    return jsonify(
        {
            "undone": True,
            **answer,
            "pair": pair,
            **pair,
            "labels_done": _labels_done(state),
        }
    )


def _video_file(state: ServerState, pair_id: int) -> Path:
    """The pair's video, found through the store and only ever inside ``videos_dir``."""
    rec = state.store.get_pair_record(pair_id)
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


@bp.get(f"/videos/<int(min=1, max={MAX_ROW_ID}):pair_id>.mp4")
def video(pair_id: int) -> Response:
    path = _video_file(server_state(), pair_id)
    return send_file(path, mimetype="video/mp4", conditional=True, max_age=0)


@bp.get("/api/policy")
def api_policy() -> Response:
    """The agent in view: the latest clip of the policy, and the learning curve."""
    return jsonify(policy_payload(server_state().store))


@bp.get(f"/policy/<int(min=1, max={MAX_ROW_ID}):clip_id>.mp4")
def policy_video(clip_id: int) -> Response:
    """A policy clip, found through the store and only ever inside ``videos/policy``."""
    state = server_state()
    clip = state.store.policy_clip(clip_id)
    if clip is None or clip.video_status != VIDEO_READY or not clip.video_path:
        raise ApiError(404, "video_not_ready", f"Policy clip {clip_id} is not ready.")
    root = (state.videos_dir / POLICY_DIR).resolve()
    path = Path(clip.video_path).resolve()
    if not (path.is_relative_to(root) and path.suffix == ".mp4" and path.is_file()):
        raise ApiError(404, "video_missing", f"Policy clip {clip_id} is missing.")
    return send_file(path, mimetype="video/mp4", conditional=True, max_age=0)
