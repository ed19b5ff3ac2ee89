"""The OpenAPI document at /api/openapi.json tells the truth: valid, complete, and what the server does.

Three checks keep it true: it is a valid OpenAPI 3.1 document; it lists exactly the app's API
routes and methods (both ways, read from app.url_map), with each route's path parameters and
their bounds; and a whole labelling session (every endpoint, its successes and its errors)
gets only documented status codes with bodies that match the documented schemas. test_fuzz.py
then throws schemathesis' generated requests at it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import schemathesis
from flask import Flask
from flask.testing import FlaskClient
from schemathesis.openapi.checks import JsonSchemaError
from werkzeug.routing import IntegerConverter, Rule

from rlhf.server.openapi import openapi_document
from rlhf.store import LabelStore

Run = tuple[LabelStore, Path]
PAGE_ROUTES = ("/", "/static/<path:filename>")  # the page itself, not the JSON API


def _conforms(client: FlaskClient, method: str, url: str, **kw) -> int:
    """Send a request; assert the response is documented for its operation; its status."""
    resp = client.open(url, method=method, **kw)
    path = url.split("?")[0]
    template = re.sub(r"^/videos/[0-9]+\.mp4$", "/videos/{pair_id}.mp4", path)
    template = re.sub(r"^/policy/[0-9]+\.mp4$", "/policy/{clip_id}.mp4", template)
    operation = openapi_document()["paths"][template][method.lower()]
    assert str(resp.status_code) in operation["responses"], (method, url, resp.status_code)
    schemathesis.openapi.from_dict(openapi_document())[template][method].validate_response(resp)
    return resp.status_code


def test_the_document_is_valid_openapi_and_served(client: FlaskClient) -> None:
    schemathesis.openapi.from_dict(openapi_document()).validate()
    broken = {**openapi_document(), "paths": {"/api/status": {"get": {"responses": 5}}}}
    with pytest.raises(Exception, match="responses"):  # the validation can fail
        schemathesis.openapi.from_dict(broken).validate()
    resp = client.get("/api/openapi.json")
    assert resp.status_code == 200 and resp.get_json() == openapi_document()


def _template(rule: Rule) -> str:
    """A Flask rule as an OpenAPI path: ``/videos/<int(min=1):pair_id>.mp4`` -> ``/videos/{pair_id}.mp4``."""
    return re.sub(r"<(?:[a-z]+(?:\([^)]*\))?:)?([a-z_]+)>", r"{\1}", rule.rule)


def _methods(rule: Rule) -> set[str]:
    return {m.lower() for m in rule.methods or () if m not in ("HEAD", "OPTIONS")}


def _api_rules(app: Flask) -> list[Rule]:
    """The app's routes but the page's own, which stay out of the document only while they are
    what they are (GET of the page and of its static files)."""
    rules = list(app.url_map.iter_rules())
    page = {rule.rule: _methods(rule) for rule in rules if rule.rule in PAGE_ROUTES}
    assert page == {path: {"get"} for path in PAGE_ROUTES}
    return [rule for rule in rules if rule.rule not in PAGE_ROUTES]


def test_every_api_route_and_method_is_documented_and_nothing_else(app: Flask) -> None:
    """Both ways: each route the app serves (app.url_map, but the page) with each of its methods
    is in the document, and each documented path and method is a route."""
    served = {(_template(rule), m) for rule in _api_rules(app) for m in _methods(rule)}
    documented = {
        (path, method) for path, item in openapi_document()["paths"].items() for method in item
    }
    assert not served - documented, "served but not documented"
    assert not documented - served, "documented but not served"
    assert served == documented


def test_every_path_parameter_is_the_routes_own(app: Flask) -> None:
    """A documented path parameter has the route variable's name and its converter's bounds."""
    paths = openapi_document()["paths"]
    for rule in _api_rules(app):
        for method in _methods(rule):
            params = paths[_template(rule)][method].get("parameters", [])
            documented = {p["name"]: p for p in params if p["in"] == "path"}
            assert set(documented) == set(rule.arguments), (rule.rule, method)
            for name, converter in rule._converters.items():
                assert documented[name]["required"] is True
                schema = documented[name]["schema"]
                if isinstance(converter, IntegerConverter):
                    assert schema["type"] == "integer", (rule.rule, name)
                    assert (schema.get("minimum"), schema.get("maximum")) == (
                        converter.min,
                        converter.max,
                    ), (rule.rule, name)


def test_a_labelling_session_gets_only_documented_answers(app: Flask, web_run: Run) -> None:
    store, _ = web_run
    page = app.test_client()
    assert _conforms(page, "GET", "/api/status?outbox=0") == 200
    assert _conforms(page, "GET", "/api/next") == 200  # a pair
    assert _conforms(page, "GET", "/videos/1.mp4") == 200
    assert _conforms(page, "GET", "/videos/1.mp4", headers={"Range": "bytes=0-9"}) == 206
    assert _conforms(page, "GET", "/videos/1.mp4", headers={"Range": "bytes=99999-"}) == 416
    assert _conforms(page, "GET", "/videos/4.mp4") == 404  # not rendered yet
    label = {"pair_id": 1, "answer": "left", "response_ms": 900}
    assert _conforms(page, "POST", "/api/label", json=label) == 200
    assert _conforms(page, "POST", "/api/label", json=label) == 200  # duplicate
    assert _conforms(page, "POST", "/api/label", json={**label, "answer": "right"}) == 409
    assert _conforms(page, "POST", "/api/label", json={"pair_id": 4, "answer": "left"}) == 409
    assert _conforms(page, "POST", "/api/label", json={"pair_id": 99, "answer": "left"}) == 404
    assert _conforms(page, "POST", "/api/label", json={"pair_id": "1"}) == 422
    assert _conforms(page, "POST", "/api/label", data="x", content_type="text/plain") == 415
    assert _conforms(page, "POST", "/api/label", json={"pad": "x" * 20_000}) == 413
    assert _conforms(page, "POST", "/api/undo", json={}) == 200
    assert _conforms(page, "POST", "/api/undo") == 409
    for pair_id in (1, 2, 3):
        assert (
            _conforms(page, "POST", "/api/label", json={"pair_id": pair_id, "answer": "skip"})
            == 200
        )
    assert _conforms(page, "GET", "/api/next") == 200  # none left: why, with the status
    assert _conforms(page, "GET", "/api/next?exclude=x") == 400
    assert _conforms(page, "GET", "/api/status", headers={"Host": "evil.example"}) == 403
    assert _conforms(page, "GET", "/api/openapi.json") == 200
    assert len(store.labels()) == 3


def test_the_session_check_catches_an_untrue_document(client: FlaskClient) -> None:
    """The negative control: a document that says something else fails the same check."""
    untrue = openapi_document()
    untrue["components"]["schemas"]["Status"]["properties"]["labels_done"] = {"type": "string"}
    resp = client.get("/api/status")
    with pytest.raises(JsonSchemaError):
        schemathesis.openapi.from_dict(untrue)["/api/status"]["GET"].validate_response(resp)
