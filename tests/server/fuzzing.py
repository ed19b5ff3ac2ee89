"""What the fuzz suite throws at the server: hostile requests as raw bytes, and how it judges them.

Every request is built byte by byte, so it can be anything a socket can carry: any method, a
path with traversal or a space in it, huge and negative ids, odd Host / Origin / Cookie /
Content-Type / Sec-Fetch-Site headers, and bodies that are deeply nested, NaN, long, invalid
UTF-8 or oversized. The one rule for every answer: no 5xx, and every 4xx is JSON with a message.

CI runs a fixed number of examples with a fixed seed (``derandomize``); set
``RLHF_FUZZ_EXAMPLES=N`` for a deeper run with N examples per test and a fresh random seed.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from rlhf.core.types import Pair
from rlhf.store import VIDEO_READY, LabelStore
from tests.server.wire import TRAVERSALS
from tests.support.segments import random_segment

DEEP_EXAMPLES = int(os.environ.get("RLHF_FUZZ_EXAMPLES", "0") or 0)
ANSWERS = ("left", "right", "equal", "skip")


def fuzz_settings(examples: int, steps: int | None = None, deep_share: float = 1.0) -> settings:
    """``examples`` with a fixed seed, or ``RLHF_FUZZ_EXAMPLES`` (times ``deep_share``, for
    tests whose examples are long sequences) with a random one."""
    deep = DEEP_EXAMPLES > 0
    extra: dict[str, Any] = {} if steps is None else {"stateful_step_count": steps}
    return settings(
        max_examples=max(examples, int(DEEP_EXAMPLES * deep_share)) if deep else examples,
        derandomize=not deep,
        database=None,  # nothing written into the checkout; a failure prints its reproduction
        deadline=None,  # loopback timings on a shared machine are noise, not findings
        print_blob=True,
        suppress_health_check=list(HealthCheck),
        **extra,
    )


class TightStore(LabelStore):
    """A store whose connections bind at most 999 SQL variables, the default of SQLite builds
    before 3.32 (this one allows 250,000): the server must work under both."""

    def _con(self) -> sqlite3.Connection:
        con = super()._con()
        con.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        return con


# -- values ----------------------------------------------------------------------------------------
ids = st.one_of(
    st.integers(-3, 14),
    st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64, 10**20, -(2**63) - 1]),
    st.integers(-(10**30), 10**30),
)
id_texts = st.one_of(
    ids.map(str), st.text(alphabet="0123456789-+., _²١x", max_size=24), st.just("9" * 5000)
)
json_values = st.one_of(
    ids,
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=40),
    st.sampled_from(ANSWERS),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
header_text = st.text(
    st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=60
)


# -- bodies ----------------------------------------------------------------------------------------
def _depths(most: int) -> st.SearchStrategy[int]:
    """Nesting depths, shallow or beyond Python's recursion limit (hypothesis favours small)."""
    return st.integers(1, 50) | st.integers(900, most)


_label_like = st.fixed_dictionaries(
    {"pair_id": ids | json_values, "answer": st.sampled_from(ANSWERS) | json_values},
    optional={"response_ms": json_values},
).map(lambda d: json.dumps(d, allow_nan=True).encode())
bodies = st.one_of(
    st.none(),
    _label_like,
    # Deep nesting, within the app's 16 KiB so that it is parsed (larger bodies come below).
    _depths(8_000).map(lambda n: b"[" * n + b"]" * n),
    _depths(2_700).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    _depths(16_000).map(lambda n: b"[" * n),
    st.sampled_from([b"NaN", b"Infinity", b'{"pair_id": NaN, "answer": "left"}', b"[1e999]"]),
    st.integers(1, 40_000).map(lambda n: json.dumps({"pair_id": 1, "answer": "x" * n}).encode()),
    st.binary(max_size=64).map(lambda b: b'{"pair_id": 1, "answer": "\xff\xfe' + b + b'"}'),
    st.binary(max_size=200),
    st.sampled_from([17_000, 70_000, 200_000]).map(lambda n: b"{" + b" " * n + b"}"),
)

# -- requests --------------------------------------------------------------------------------------
_ROUTES = ["/", "/api/status", "/api/next", "/api/label", "/api/undo", "/api/openapi.json"]
_ROUTES += ["/videos/1.mp4", "/static/app.js", "/static/nope.css", "//api/status", "/api/"]
paths = st.one_of(
    st.sampled_from(_ROUTES + TRAVERSALS),
    id_texts.map(lambda t: f"/videos/{quote(t)}.mp4"),
    st.lists(id_texts, max_size=120).map(lambda xs: "/api/next?exclude=" + quote(",".join(xs))),
    st.tuples(id_texts, header_text).map(
        lambda t: f"/api/status?outbox={quote(t[0])}&ended={quote(t[1])}"
    ),
    header_text.map(lambda t: "/api/status?token=" + quote(t)),
    st.text(max_size=80).map(lambda t: "/" + quote(t, safe="/?&=%")),
)
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "FOO"])
_ORIGINS = ["http://127.0.0.1:{port}", "https://127.0.0.1:{port}", "null", "http://evil.example"]
_ORIGINS += [
    "http://[",
    "http://[::1",
    "http://]",
    "http://localhost:99999",
    "http://h:x",
    "http://",
]
_CONTENT_TYPES = ["application/json", "application/json; charset=latin-1", "text/plain", ""]
_CONTENT_TYPES += ["multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "a/b;;="]
_HOSTILE_HEADERS: dict[str, st.SearchStrategy[str]] = {
    "Host": st.sampled_from(
        ["127.0.0.1:{port}", "localhost", "[::1]:1", "evil.example", "", "[", "h:x", "a" * 300]
    )
    | header_text,
    "Origin": st.sampled_from(_ORIGINS) | header_text,
    "Cookie": st.one_of(
        header_text.map(lambda t: "rlhf_labeller=" + t),
        header_text.map(lambda t: "rlhf_token=" + t),
        header_text,
    ),
    "Content-Type": st.sampled_from(_CONTENT_TYPES) | header_text,
    "Sec-Fetch-Site": st.sampled_from(["same-origin", "cross-site", "same-site", "none", "?"]),
    "X-Rlhf-Page": header_text,
    "Authorization": header_text.map(lambda t: "Bearer " + t),
    "Range": st.sampled_from(["bytes=0-9", "bytes=99999999999999999999-", "bytes=-", "x"])
    | header_text,
}
headers = st.fixed_dictionaries({}, optional=_HOSTILE_HEADERS)
_MALFORMED = [
    b"GET /a b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET /" + b"a" * 40_000 + b" HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(4000)) + b"\r\n",
    b"GET / HTTP/1.1\r\nbroken header\r\n\r\n",
    b"POST /api/label HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"POST /api/label HTTP/1.1\r\nContent-Length: x\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"\x00\x01\x02 / HTTP/1.1\r\n\r\n",
]


# Most requests aim at a real operation, hostile in one or more parts, so they get past routing
# and content negotiation to the code that parses and stores; the rest are anything at all.
_exclude_paths = st.lists(id_texts, max_size=120).map(
    lambda xs: "/api/next?exclude=" + quote(",".join(xs))
)
_AIMED: list[tuple[str, st.SearchStrategy[str]]] = [
    ("GET", paths),
    ("GET", _exclude_paths),
    ("GET", id_texts.map(lambda t: f"/videos/{quote(t)}.mp4")),
    ("POST", st.just("/api/label")),
    ("POST", st.just("/api/label")),
    ("POST", st.just("/api/label")),
    ("POST", st.just("/api/undo")),
]
_KINDS = ["malformed", "anything", "anything"] + ["aimed"] * 7


@st.composite
def raw_requests(draw: st.DrawFn, port: int, cookie: str | None = None) -> bytes:
    """One hostile request as bytes (``{port}`` in a header becomes the server's port)."""
    kind = draw(st.sampled_from(_KINDS))
    if kind == "malformed":
        return draw(st.sampled_from(_MALFORMED))
    hdrs = draw(headers)
    if kind == "aimed":  # clean headers, or one hostile header, or any
        spoil = draw(st.sampled_from(["none", "one", "any"]))
        if spoil != "any":
            hdrs = {}
        if spoil == "one":
            name = draw(st.sampled_from(sorted(_HOSTILE_HEADERS)))
            hdrs[name] = draw(_HOSTILE_HEADERS[name])
    hdrs = {k: v.replace("{port}", str(port)) for k, v in hdrs.items()}
    if kind == "aimed":
        method, path_strategy = _AIMED[draw(st.integers(0, len(_AIMED) - 1))]
        path = draw(path_strategy)
        hdrs.setdefault("Host", f"127.0.0.1:{port}")
        if method == "POST" and draw(st.integers(0, 3)):  # mostly JSON, as a page sends
            hdrs["Content-Type"] = "application/json"
        body = draw(bodies.filter(lambda b: b is not None)) if method == "POST" else None
    else:
        method, path, body = draw(methods), draw(paths), draw(bodies)
    if cookie and "Cookie" not in hdrs:
        hdrs["Cookie"] = cookie
    lines = [f"{method} {path} HTTP/1.1"]
    lines += [f"{name}: {value}" for name, value in hdrs.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b"")


def assert_well_answered(request: bytes, status: int, hdrs: dict[str, str], body: bytes) -> None:
    """No 5xx; every 4xx (but to HEAD) is a JSON object with an error code and a message."""
    shown = request[:300]
    assert status < 500, (shown, status, body[:300])
    if 400 <= status < 500 and not request.startswith(b"HEAD "):
        assert hdrs.get("content-type", "").startswith("application/json"), (shown, status, body)
        reply = json.loads(body)
        assert isinstance(reply.get("error"), str) and reply["error"], (shown, reply)
        assert isinstance(reply.get("message"), str) and reply["message"], (shown, reply)


def make_run(root: Path, ready: int, pending: int = 2) -> TightStore:
    """A run directory whose store has ``ready`` pairs with videos, then ``pending`` without."""
    rng = np.random.default_rng(0)

    store = TightStore(root / "labels.sqlite")
    (root / "videos").mkdir(exist_ok=True)
    pair_ids = store.add_pairs(
        [Pair(random_segment(rng), random_segment(rng)) for _ in range(ready + pending)]
    )
    for pair_id in pair_ids[:ready]:
        video = root / "videos" / f"{pair_id}.mp4"
        video.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(64))
        store.mark_video(pair_id, VIDEO_READY, path=str(video))
    return store
