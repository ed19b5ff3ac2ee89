"""What the store refuses becomes an API error in one place (STORE_ERRORS in rlhf/server/app.py):
every store error class has its status, code and message, about a pair or about a clip to grade,
whichever route raised it."""

from __future__ import annotations

import inspect
from pathlib import Path

from flask.testing import FlaskClient

from rlhf.server.app import STORE_ERRORS
from rlhf.store import LabelStore, QueryError, errors
from tests.server.test_api_ratings import _clip

Run = tuple[LabelStore, Path]


def test_every_store_error_class_has_its_api_error() -> None:
    classes = {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, QueryError) and cls is not QueryError
    }
    assert classes and set(STORE_ERRORS) == classes
    assert all(400 <= status < 500 for status, *_ in STORE_ERRORS.values())


def _reply(resp) -> tuple[int, dict]:
    return resp.status_code, resp.get_json()


def test_each_route_answers_a_store_error_with_the_same_json(
    client: FlaskClient, web_run: Run
) -> None:
    store, videos = web_run
    clip = _clip(store, videos)
    label, grade = "/api/label", {"grade": 0}
    assert client.post(label, json={"pair_id": 1, "answer": "left"}).status_code == 200
    assert client.post(label, json={"pair_id": clip, "grade": 1}).status_code == 200
    expected = [
        (label, {"pair_id": 99, "answer": "left"}, 404, "unknown_pair", "There is no pair 99."),
        (label, {"pair_id": 99, **grade}, 404, "unknown_pair", "There is no clip 99."),
        (
            label,
            {"pair_id": clip, "answer": "left"},
            409,
            "wrong_kind",
            f"Query {clip} asks for a grade.",
        ),
        (label, {"pair_id": 2, **grade}, 409, "wrong_kind", "Query 2 is a pair: send an answer."),
        (
            label,
            {"pair_id": 4, "answer": "left"},
            409,
            "not_shown",
            "Pair 4 has not been shown: its video was never ready.",
        ),
        (
            label,
            {"pair_id": 1, "answer": "right"},
            409,
            "conflict",
            "Pair 1 already has an answer, so this one was not stored.",
        ),
        (
            label,
            {"pair_id": clip, **grade},
            409,
            "conflict",
            f"Clip {clip} already has a grade, so this one was not stored.",
        ),
    ]
    for url, body, status, code, message in expected:
        assert _reply(client.post(url, json=body)) == (
            status,
            {"error": code, "message": message},
        ), body
    assert _reply(client.get("/videos/77.mp4")) == (
        404,
        {"error": "unknown_pair", "message": "There is no pair 77."},
    )
