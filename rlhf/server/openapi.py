"""The labelling API described as OpenAPI 3.1, served at ``/api/openapi.json``.

With it, people can write their own labelling clients, and tools can test the server against it
(the test suite does, with schemathesis: every response must match what is written here). Keep it
true: ``tests/server/test_openapi.py`` fails when a route, a method, a status code or a field
changes without this document changing with it.
"""

from __future__ import annotations

import copy
from typing import Any

from rlhf.core.status import Phase
from rlhf.core.types import Answer
from rlhf.store import MAX_ROW_ID

MAX_EXCLUDE_IDS = 100
MAX_OUTBOX_REPORT = 1_000_000


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _int(minimum: int = 0, maximum: int | None = None, nullable: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["integer", "null"] if nullable else "integer"}
    schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def _nullable(kind: str) -> dict[str, Any]:
    return {"type": [kind, "null"]}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    400: "Malformed request: bad query value, bad JSON, or HTTP the server cannot parse.",
    401: "A token is required (the server is exposed beyond this machine).",
    403: "Wrong token, a Host header that is not loopback, or a cross-origin request.",
    404: "No such route, pair or video.",
    409: "The request conflicts with what is stored.",
    413: "The body is too large (16 KiB for the API, 64 KiB for any request).",
    415: "The body is not application/json.",
    422: "The JSON body has a wrong or missing field.",
    416: "The requested byte range is not in the video.",
    431: "The request line and headers are too large.",
    503: "The server is shutting down, or the label store is busy: retry.",
    507: "The trainer's disk is full: the answer was not saved; send it again once space is"
    " freed (retrying sooner cannot help).",
}
_ALWAYS = (400, 401, 403, 413, 431, 503)
"""What any request may get: the HTTP layer's and access control's answers, and "retry later"."""


def _responses(ok: dict[str, Any], *codes: int) -> dict[str, Any]:
    out: dict[str, Any] = {"200": ok}
    for code in sorted({*_ALWAYS, *codes}):
        out[str(code)] = {"$ref": f"#/components/responses/E{code}"}
    return out


def _video(summary: str, id_name: str) -> dict[str, Any]:
    """GET of an mp4 named by a row id in the path: byte ranges, conditional requests."""
    return {
        "summary": summary,
        "parameters": [
            {"name": id_name, "in": "path", "required": True, "schema": _int(1, MAX_ROW_ID)}
        ],
        "responses": {
            **_responses(
                {
                    "description": "The video (byte ranges are supported: 206, 416).",
                    "content": {"video/mp4": {"schema": {"type": "string"}}},
                },
                404,
                416,
            ),
            "206": {"description": "Part of the video.", "content": {"video/mp4": {}}},
            "304": {"description": "Not modified."},
        },
    }


_PAGE_HEADER = {
    "name": "X-Rlhf-Page",
    "in": "header",
    "required": False,
    "description": "A random id per page load; lets the server end its grace period early.",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{8,64}$"},
}

_PAIR = _object(
    {
        "pair_id": _int(1, MAX_ROW_ID),
        "video_url": {"type": "string", "pattern": "^/videos/[0-9]+\\.mp4$"},
        "iteration": _int(),
    }
)
_STATUS = _object(
    {
        "labels_done": _int(),
        "labels_imported": _int(),
        "labels_requested": _int(nullable=True),
        "total_labels": _int(nullable=True),
        "pending": _int(),
        "ready": _int(),
        "equal": {
            **_int(nullable=True),
            "description": "Labels answered 'equal'; null with named labellers (a count that"
            " moves with another's answer would tell it).",
        },
        "skipped": {
            **_int(nullable=True),
            "description": "Labels answered 'skip'; null with named labellers.",
        },
        "failed": _int(),
        "pairs": _int(),
        "iteration": _int(nullable=True),
        "env_steps": _int(nullable=True),
        "total_timesteps": _int(nullable=True),
        "latest_true_return": _nullable("number"),
        "latest_success_rate": _nullable("number"),
        "labels_used": _int(nullable=True),
        "labels_needed": _int(nullable=True),
        "labels_target": _int(nullable=True),
        "labels_retired": _int(),
        "eta_seconds": _nullable("number"),
        "eta": {
            "oneOf": [
                {"type": "null"},
                _object(
                    {
                        "low_s": {"type": "number", "minimum": 0},
                        "high_s": {"type": "number", "minimum": 0},
                        "from": {"enum": ["answers", "trainer"]},
                    }
                ),
            ],
            "description": "Time left as a range: at the pace of the answers while labels are"
            " still to give, then the trainer's estimate; null until it is known.",
        },
        "feedback_kind": {"enum": ["pairs", "ratings", "both"]},
        "reward_accuracy": {
            **_nullable("number"),
            "description": "The learned reward's held-out figure: pair accuracy, or for a"
            " ratings run the share of held-out clip pairs it orders as their grades.",
        },
        "final": {
            "type": "boolean",
            "description": "The figures are the finished run's summary.json.",
        },
        "phase": {"enum": [*(p.value for p in Phase), None]},
        "message": _nullable("string"),
        "resume_command": _nullable("string"),
        "closing": {"type": "boolean"},
        "watch_command": _nullable("string"),
        "run_name": _nullable("string"),
        "env_id": _nullable("string"),
        "task": _nullable("string"),
        "target": {
            **_nullable("string"),
            "description": "The target behaviour whose return latest_true_return and the curve"
            " show (--teacher.target or --teacher.reward); null: the env's own reward.",
        },
        "labeller": {**_nullable("string"), "description": "Your name (named labellers)."},
        "labellers": {"oneOf": [{"type": "null"}, _ref("Labellers")]},
    }
)
_LABELLERS = _object(
    {
        "you": _nullable("string"),
        "counts": {
            "type": "array",
            "items": _object({"name": {"type": "string"}, "labels": _int()}),
        },
        "overlap": {"type": "number", "minimum": 0, "maximum": 1},
    }
)
_HANDED_OUT: dict[str, Any] = {
    "pair": _ref("Pair"),
    "pair_id": _int(1, MAX_ROW_ID),
    "video_url": {"type": "string"},
    "iteration": _int(),
    "kind": {"enum": ["pair", "rating"]},
    "scale": _ref("Scale"),
}
"""A pair handed to the page: by /api/next, and back again by /api/undo."""
_READY = _object(
    {
        **_HANDED_OUT,
        "state": {"const": "ready"},
        "reason": {"type": "null"},
    },
    required=["pair", "pair_id", "video_url", "iteration", "kind", "state", "reason"],
)
_WAITING = _object(
    {
        "pair": {"type": "null"},
        "state": {"enum": ["rendering", "busy", "waiting", "finished"]},
        "reason": {"type": "string"},
        "status": _ref("Status"),
    }
)
_SCALE = _object(
    {
        "levels": _int(2, 10),
        "names": {"type": "array", "items": {"type": "string"}},
    }
)
_LABEL_REQUEST = {
    "oneOf": [
        _object(
            {
                "pair_id": _int(1, MAX_ROW_ID),
                "answer": {"enum": [a.value for a in Answer]},
                "response_ms": _int(0, 86_400_000, nullable=True),
            },
            required=["pair_id", "answer"],
        ),
        _object(
            {
                "pair_id": _int(1, MAX_ROW_ID),
                "grade": _int(0, 9, nullable=True),
                "response_ms": _int(0, 86_400_000, nullable=True),
            },
            required=["pair_id", "grade"],
        ),
    ],
    "description": "A pair's answer, or a clip's grade on the run's scale (null: skip).",
}
_LABEL_REPLY = _object(
    {
        "saved": {"const": True},
        "duplicate": {"type": "boolean", "description": "The same answer was already stored."},
        "pair_id": _int(1, MAX_ROW_ID),
        "answer": {"enum": [*(a.value for a in Answer), "grade"]},
        "grade": _int(0, 9, nullable=True),
        "labels_done": _int(),
    },
    required=["saved", "duplicate", "pair_id", "answer", "labels_done"],
)
_UNDO_REPLY = _object(
    {
        "undone": {"const": True},
        "answer": {"enum": [*(a.value for a in Answer), "grade"]},
        "grade": _int(0, 9, nullable=True),
        **_HANDED_OUT,
        "labels_done": _int(),
    },
    required=["undone", "answer", "pair", "pair_id", "video_url", "iteration", "labels_done"],
)
_POLICY = _object(
    {
        "clip": {
            "oneOf": [
                {"type": "null"},
                _object(
                    {
                        "clip_id": _int(1, MAX_ROW_ID),
                        "iteration": _int(),
                        "env_step": _int(),
                        "video_url": {"type": "string", "pattern": "^/policy/[0-9]+\\.mp4$"},
                    }
                ),
            ]
        },
        "curve": {
            "type": "array",
            "items": _object(
                {
                    "iteration": _int(),
                    "env_step": _int(),
                    "true_return": _nullable("number"),
                    "predicted_return": _nullable("number"),
                    "accuracy": _nullable("number"),
                }
            ),
        },
    }
)
_ERROR = _object(
    {
        "error": {"type": "string", "description": "A stable code, e.g. unknown_pair."},
        "message": {"type": "string", "minLength": 1, "description": "For a person."},
    }
)

_PATHS: dict[str, Any] = {
    "/api/status": {
        "get": {
            "summary": "The run's progress and the trainer's figures.",
            "parameters": [
                {
                    "name": "outbox",
                    "in": "query",
                    "description": "Answers this page still holds (the page reports it).",
                    "schema": _int(0, MAX_OUTBOX_REPORT),
                },
                {
                    "name": "ended",
                    "in": "query",
                    "description": "1 once the page has seen the run end.",
                    "schema": {"enum": ["0", "1"]},
                },
                {
                    "name": "held",
                    "in": "query",
                    "description": "Comma-separated ids of the pairs this page shows or has queued"
                    f" (at most {MAX_EXCLUDE_IDS}): their leases to this labeller are renewed.",
                    "schema": {"type": "string", "pattern": "^[0-9,]*$"},
                },
                _PAGE_HEADER,
            ],
            "responses": _responses(_json(_ref("Status"), "Progress.")),
        }
    },
    "/api/next": {
        "get": {
            "summary": "The next pair to label (leased to this labeller for a while).",
            "parameters": [
                {
                    "name": "exclude",
                    "in": "query",
                    "description": f"Comma-separated ids this page already holds (at most {MAX_EXCLUDE_IDS}).",
                    "schema": {"type": "string", "pattern": "^[0-9,]*$"},
                },
                _PAGE_HEADER,
            ],
            "responses": _responses(
                _json({"oneOf": [_ref("NextReady"), _ref("NextWaiting")]}, "A pair, or why none.")
            ),
        }
    },
    "/api/label": {
        "post": {
            "summary": "Store an answer durably; idempotent by pair id.",
            "parameters": [_PAGE_HEADER],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("LabelRequest")}},
            },
            "responses": _responses(
                _json(_ref("LabelReply"), "Stored (or already stored) before this reply."),
                404,
                409,
                415,
                422,
                507,
            ),
        }
    },
    "/api/undo": {
        "post": {
            "summary": "Take back this labeller's most recent answer; the pair comes back.",
            "parameters": [_PAGE_HEADER],
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            "responses": _responses(_json(_ref("UndoReply"), "Undone."), 409, 507),
        }
    },
    "/videos/{pair_id}.mp4": {
        "get": _video("A pair's video (both clips side by side), once it is ready.", "pair_id")
    },
    "/api/policy": {
        "get": {
            "summary": "The agent in view: the latest clip of the policy and the learning curve.",
            "responses": _responses(_json(_ref("Policy"), "The clip (null before the first).")),
        }
    },
    "/policy/{clip_id}.mp4": {
        "get": _video("A clip of the policy, once it is rendered.", "clip_id")
    },
    "/api/openapi.json": {
        "get": {
            "summary": "This document.",
            "responses": _responses(_json({"type": "object"}, "OpenAPI 3.1.")),
        }
    },
}


def openapi_document() -> dict[str, Any]:
    """The API as an OpenAPI 3.1 document (a fresh dict each call)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "rlhf labelling API",
            "version": "1",
            "description": (
                "Pairs of robot clips to compare, and the answers people give. Every error is "
                'JSON {"error": code, "message": text}. Without a token the server answers only '
                "loopback Host headers; with one, send it as ?token=, the rlhf_token cookie or a "
                "Bearer header. POSTs from another origin are refused."
            ),
        },
        "paths": copy.deepcopy(_PATHS),
        "security": [{}, {"token": []}, {"cookie": []}, {"bearer": []}],
        "components": {
            "schemas": copy.deepcopy(
                {
                    "Pair": _PAIR,
                    "Status": _STATUS,
                    "Labellers": _LABELLERS,
                    "Policy": _POLICY,
                    "NextReady": _READY,
                    "NextWaiting": _WAITING,
                    "LabelRequest": _LABEL_REQUEST,
                    "Scale": _SCALE,
                    "LabelReply": _LABEL_REPLY,
                    "UndoReply": _UNDO_REPLY,
                    "Error": _ERROR,
                }
            ),
            "responses": {
                f"E{code}": _json(_ref("Error"), text) for code, text in sorted(_ERRORS.items())
            },
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "query", "name": "token"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "rlhf_token"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
    }
