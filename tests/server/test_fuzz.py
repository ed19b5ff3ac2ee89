"""The fuzz suite: generated and hostile requests against the live server; no 5xx, JSON 4xx, and no
client can hurt another.

- schemathesis generates valid and invalid requests from the OpenAPI document for every
  operation; every answer must be documented (status, content type, schema) and never a 5xx;
- hypothesis throws hostile raw HTTP at a live waitress server (see fuzzing.py);
- a state machine runs an honest labeller next to a hostile one sharing the server: the honest
  one is always served, and every label it saw acknowledged is stored as it was given.

CI: a fixed seed and a fixed number of examples (~20 s on 2 busy cores). Deeper, with a random seed:
``RLHF_FUZZ_EXAMPLES=20000`` (the state machine runs a twentieth of that, each a sequence).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from rlhf.config import WebConfig
from rlhf.server import LABELLER_COOKIE, ServerHandle, create_app, serve_in_thread
from tests.server.fuzzing import (
    ANSWERS,
    assert_well_answered,
    fuzz_settings,
    ids,
    make_run,
    raw_requests,
)
from tests.server.wire import http_request, raw_exchange

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    root = tmp_path_factory.mktemp("fuzz")
    store = make_run(root, ready=12)
    handle = serve_in_thread(store, root / "videos", WebConfig())
    yield handle
    handle.stop()
    store.close()


def test_hostile_requests_get_no_5xx_and_only_json_4xx(live: ServerHandle) -> None:
    @fuzz_settings(examples=1500)
    @given(request=raw_requests(live.port))
    def hostile(request: bytes) -> None:
        assert_well_answered(request, *raw_exchange(live.port, request))

    hostile()
    assert http_request(live.port, "GET", "/api/status")[0] == 200  # still serving


def test_generated_requests_get_documented_answers(tmp_path: Path) -> None:
    store = make_run(tmp_path, ready=6)
    app = create_app(store, tmp_path / "videos")
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    cases = st.one_of([op.as_strategy(generation_mode=m) for op in operations for m in modes])

    @fuzz_settings(examples=300)
    @given(case=cases)
    def generated(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=CHECKS)

    generated()
    store.close()


class _Labeller:
    """A client with its own labeller cookie.

    Every answer it gets must be well formed (no 5xx, JSON 4xx). The honest labeller fails at
    once; Eve's faults are collected and fail the example at its end, so that when Eve's request
    breaks the server for others too, the report shows the harm done to the honest labeller.
    """

    def __init__(self, port: int, faults: list[str] | None = None) -> None:
        self.port, self.cookie, self.faults = port, "", faults

    def check(self, request: bytes, status: int, headers: dict[str, str], body: bytes) -> None:
        try:
            assert_well_answered(request, status, headers, body)
        except AssertionError as exc:
            if self.faults is None:
                raise
            self.faults.append(str(exc))

    def send(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        hdrs = {"Cookie": self.cookie} if self.cookie else {}
        status, headers, payload = http_request(self.port, method, path, body, hdrs)
        if headers.get("set-cookie", "").startswith(LABELLER_COOKIE + "="):
            self.cookie = headers["set-cookie"].split(";")[0]
        self.check(f"{method} {path} {body}".encode(), status, headers, payload)
        try:
            return status, json.loads(payload)
        except ValueError:
            return status, {}


class TwoLabellers(RuleBasedStateMachine):
    """An honest labeller and Eve share a server; whatever Eve does, the honest one is served."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="rlhf-fuzz-"))
        self.store = make_run(self.root, ready=10)
        self.server = serve_in_thread(self.store, self.root / "videos", WebConfig())
        self.eve_faults: list[str] = []
        self.honest = _Labeller(self.server.port)
        self.eve = _Labeller(self.server.port, self.eve_faults)
        self.eve.send("GET", "/api/status")  # Eve's cookie, for her raw requests too
        self.held: list[int] = []
        self.acked: dict[int, str] = {}
        self.fresh_id = 1_000

    def _honest_label(self, pair_id: int, answer: str) -> None:
        status, reply = self.honest.send(
            "POST", "/api/label", {"pair_id": pair_id, "answer": answer}
        )
        # 409 only when Eve answered the same pair differently first (first answer wins).
        assert status == 200 or (status == 409 and reply["error"] == "conflict"), reply
        if status == 200:
            self.acked[pair_id] = answer

    @rule()
    def honest_asks_for_a_pair(self) -> None:
        status, reply = self.honest.send(
            "GET", f"/api/next?exclude={','.join(map(str, self.held))}"
        )
        assert status == 200, reply
        if reply["pair"] is not None and reply["pair_id"] not in self.held:
            self.held.append(reply["pair_id"])

    @precondition(lambda self: self.held)
    @rule(answer=st.sampled_from(ANSWERS))
    def honest_answers(self, answer: str) -> None:
        self._honest_label(self.held.pop(0), answer)

    @rule()
    def honest_polls_status(self) -> None:
        status, reply = self.honest.send("GET", "/api/status?outbox=0")
        assert status == 200 and reply["labels_done"] <= (reply["labels_requested"] or 0)

    @rule(data=st.data())
    def eve_sends_anything(self, data: st.DataObject) -> None:
        request = data.draw(raw_requests(self.server.port, self.eve.cookie))
        self.eve.check(request, *raw_exchange(self.server.port, request))

    @rule(count=st.integers(1, 12))
    def eve_excludes_made_up_ids(self, count: int) -> None:
        for _ in range(count):
            made_up = ",".join(str(self.fresh_id + i) for i in range(100))
            self.fresh_id += 100
            self.eve.send("GET", f"/api/next?exclude={made_up}")

    @precondition(lambda self: self.held)
    @rule(pair_id=st.sampled_from([2**63, -(2**63) - 1, 10**20]) | ids)
    def eve_races_the_honest_labeller(self, pair_id: int) -> None:
        """Eve's bad labels arrive together with the honest ones (and share their commits)."""
        mine, self.held = self.held[:2], self.held[2:]
        bad = {"pair_id": pair_id, "answer": "left"}
        start, errors = threading.Barrier(4 + len(mine)), []

        def run(action: Callable[[], object], times: int) -> None:
            try:
                start.wait(10)
                for _ in range(times):
                    action()
            except BaseException as exc:  # reported from the test's thread
                errors.append(exc)

        threads = [
            *(
                threading.Thread(
                    target=run, args=(partial(self.eve.send, "POST", "/api/label", bad), 3)
                )
                for _ in range(4)
            ),
            *(
                threading.Thread(target=run, args=(partial(self._honest_label, p, "right"), 1))
                for p in mine
            ),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        if errors:
            raise errors[0]

    @invariant()
    def every_acknowledged_label_is_stored_as_given(self) -> None:
        stored = {lb.pair_id: lb.answer.value for lb in self.store.labels()}
        assert {p: stored.get(p) for p in self.acked} == self.acked

    def teardown(self) -> None:
        self.server.stop()
        self.store.close()
        shutil.rmtree(self.root, ignore_errors=True)
        assert self.eve_faults == [], self.eve_faults[0]


TestTwoLabellers = TwoLabellers.TestCase
TestTwoLabellers.settings = fuzz_settings(examples=25, steps=30, deep_share=0.05)
