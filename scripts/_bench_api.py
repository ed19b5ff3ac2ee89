"""The API half of bench_web.py: scripted labellers against a server in its own process, audited.

Each labeller keeps one keep-alive connection and its own labeller cookie, and loops
``GET /api/next`` then ``POST /api/label`` (every label is durable before its 200). Afterwards the
store is read back: an acknowledged label missing or changed is *lost*; a pair acknowledged as
new to two labellers is *duplicated*. The labellers are threads of one client process, so on a
small machine part of each latency is the client's own GIL: the figures are an upper bound.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlhf.config import WebConfig
from rlhf.core.types import Pair, Segment
from rlhf.server import serve_in_thread
from rlhf.store import LabelStore

ANSWERS = ("left", "right", "equal", "skip")


def _segment(rng: np.random.Generator) -> Segment:
    return Segment(
        obs=rng.normal(size=(50, 17)).astype(np.float32),
        actions=rng.uniform(-1, 1, (50, 6)).astype(np.float32),
        true_rewards=rng.normal(size=50).astype(np.float32),
        qpos=rng.normal(size=(50, 9)),
        qvel=rng.normal(size=(50, 9)),
        env_id="HalfCheetah-v5",
    )


def make_store(path: Path, pairs: int, video: Path | None) -> LabelStore:
    """A store with ``pairs`` ready pairs; each gets a copy of ``video`` (or just a path)."""
    rng = np.random.default_rng(0)
    store = LabelStore(path / "labels.sqlite")
    videos = path / "videos"
    videos.mkdir(exist_ok=True)
    ids = store.add_pairs([Pair(_segment(rng), _segment(rng)) for _ in range(pairs)])
    data = video.read_bytes() if video else b""
    for pair_id in ids:
        if video:
            (videos / f"{pair_id}.mp4").write_bytes(data)
    # One transaction for all, as the render worker's marks would add up to the same state.
    con = sqlite3.connect(path / "labels.sqlite")
    with con:
        con.executemany(
            "UPDATE pairs SET video_status='ready', video_path=? WHERE id=?",
            [(str(videos / f"{pair_id}.mp4"), pair_id) for pair_id in ids],
        )
    con.close()
    return store


def _server_main(run_dir: str, port_q: mp.Queue, stop: mp.Event) -> None:
    store = LabelStore(Path(run_dir) / "labels.sqlite")
    handle = serve_in_thread(store, Path(run_dir) / "videos", WebConfig())
    port_q.put(handle.port)
    stop.wait()
    handle.stop()


@dataclass(frozen=True)
class ApiResult:
    labellers: int
    next_ms: list[float]
    label_ms: list[float]
    wall_s: float
    saved: int
    duplicates: int
    errors: int
    lost: int
    """Labels acknowledged (200) that the store does not hold as acknowledged."""
    duplicated: int
    """Pairs acknowledged as a new label to more than one labeller."""

    @property
    def all_ms(self) -> list[float]:
        return self.next_ms + self.label_ms


class _Labeller:
    """One scripted labeller: keep-alive connection, its own labeller cookie."""

    def __init__(self, port: int, rounds: int) -> None:
        self.con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.rounds = rounds
        self.cookie = ""
        self.next_ms: list[float] = []
        self.label_ms: list[float] = []
        self.acked: list[tuple[int, str, bool]] = []  # (pair, answer, duplicate)
        self.errors = 0

    def _request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        headers = {"Cookie": self.cookie} if self.cookie else {}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body)
        self.con.request(method, path, data, headers)
        resp = self.con.getresponse()
        payload = json.loads(resp.read())
        cookie = resp.getheader("Set-Cookie")
        if cookie and not self.cookie:
            self.cookie = cookie.split(";")[0]
        return resp.status, payload

    def run(self, start: threading.Barrier) -> None:
        start.wait()
        for i in range(self.rounds):
            t0 = time.perf_counter()
            status, nxt = self._request("GET", "/api/next")
            t1 = time.perf_counter()
            self.next_ms.append((t1 - t0) * 1000)
            if status != 200 or nxt.get("pair") is None:
                self.errors += status != 200
                break
            answer = ANSWERS[i % 4]
            body = {"pair_id": nxt["pair_id"], "answer": answer, "response_ms": 1500}
            status, reply = self._request("POST", "/api/label", body)
            self.label_ms.append((time.perf_counter() - t1) * 1000)
            if status == 200:
                self.acked.append((nxt["pair_id"], answer, bool(reply["duplicate"])))
            else:
                self.errors += 1
        self.con.close()


def _audit(store_path: Path, workers: list[_Labeller]) -> tuple[int, int]:
    """(lost, duplicated) against what the store holds now."""
    con = sqlite3.connect(store_path)
    stored = dict(con.execute("SELECT pair_id, answer FROM labels").fetchall())
    con.close()
    acked = [a for w in workers for a in w.acked]
    lost = sum(1 for pair_id, answer, _ in acked if stored.get(pair_id) != answer)
    new = Counter(pair_id for pair_id, _, duplicate in acked if not duplicate)
    return lost, sum(1 for count in new.values() if count > 1)


def bench_api(workdir: Path, labellers: int, rounds: int) -> ApiResult:
    run = workdir / f"api_{labellers}"
    run.mkdir()
    make_store(run, labellers * rounds + 10, None).close()
    ctx = mp.get_context("spawn")
    port_q, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_server_main, args=(str(run), port_q, stop), daemon=True)
    server.start()
    try:
        port = port_q.get(timeout=60)
        workers = [_Labeller(port, rounds) for _ in range(labellers)]
        barrier = threading.Barrier(labellers + 1)
        threads = [threading.Thread(target=w.run, args=(barrier,)) for w in workers]
        for t in threads:
            t.start()
        barrier.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
    finally:
        stop.set()
        server.join(10)
    lost, duplicated = _audit(run / "labels.sqlite", workers)
    acked = [a for w in workers for a in w.acked]
    return ApiResult(
        labellers=labellers,
        next_ms=[x for w in workers for x in w.next_ms],
        label_ms=[x for w in workers for x in w.label_ms],
        wall_s=wall,
        saved=sum(1 for a in acked if not a[2]),
        duplicates=sum(1 for a in acked if a[2]),
        errors=sum(w.errors for w in workers),
        lost=lost,
        duplicated=duplicated,
    )
