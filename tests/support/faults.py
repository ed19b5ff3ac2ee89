"""A trainer in a child process to kill (with its render worker and ffmpeg), and a scripted labeller.

The child can be instrumented (``instrument=True``): it then prints ``@FIT`` as the reward model
starts training and ``@CKPT`` once half of a checkpoint's bytes are written, pausing there for
0.3 s before the rest, so a kill lands in the middle of the write: a checkpoint written in place
(not to a temporary file renamed over the old one) is then left cut in half, and the test fails.
The instrumentation lives here, in the test: production code has no hooks for it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest

CHILD = (
    "from tests.support.toy_env import register; register(); from rlhf.cli import main; main()\n"
)
INSTRUMENT = """
import io, os, time, torch
from rlhf.reward.learner import RewardLearner
_fit, _save = RewardLearner.fit, torch.save
def fit(self, *args, **kwargs):
    print("@FIT", flush=True)
    return _fit(self, *args, **kwargs)
def save(obj, f, *args, **kwargs):
    if not (isinstance(obj, dict) and "progress" in obj):  # not a run checkpoint
        return _save(obj, f, *args, **kwargs)
    buf = io.BytesIO()
    _save(obj, buf, *args, **kwargs)
    data = buf.getvalue()
    out = open(f, "wb") if isinstance(f, (str, os.PathLike)) else f
    out.write(data[: len(data) // 2])
    out.flush()
    print("@CKPT", flush=True)
    time.sleep(0.3)
    out.write(data[len(data) // 2 :])
    if out is not f:
        out.close()
RewardLearner.fit, torch.save = fit, save
"""
ANSWERS = ("left", "right", "equal", "skip")
TIMEOUT_S = 120.0


class Session:
    """``rlhf ARGS`` in its own process group, its output read as it comes."""

    def __init__(self, args: list[str], cwd: Path, instrument: bool = False) -> None:
        code = (INSTRUMENT if instrument else "") + CHILD
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # one kill takes the trainer, its worker and ffmpeg
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: Any, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)

    @staticmethod
    def run(args: list[str], cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", CHILD, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            **kwargs,
        )

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"the trainer exited ({self.proc.returncode}): {''.join(self.err)[-3000:]}")

    def url(self) -> str:
        pattern = re.compile(r"(http://127\.0\.0\.1:\d+)/")
        wait_for(lambda: any(pattern.search(line) for line in self.out), self)
        return next(m.group(1) for line in self.out if (m := pattern.search(line)))

    def wait_for_marker(self, marker: str, count: int) -> None:
        wait_for(lambda: sum(line.strip() == marker for line in self.out) >= count, self)

    def wait_for_file(self, folder: Path, suffix: str) -> None:
        def present() -> bool:
            return folder.is_dir() and any(p.name.endswith(suffix) for p in folder.iterdir())

        wait_for(present, self, poll_s=0.002)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def kill(self) -> None:
        """SIGKILL the whole process group: no handler runs, nothing is cleaned up."""
        self.check_alive()
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        for reader in self._readers:
            reader.join(10)


def wait_for(
    condition: Callable[[], bool],
    session: Session,
    timeout: float = TIMEOUT_S,
    poll_s: float = 0.01,
) -> None:
    """Poll ``condition`` until true; fail if the trainer exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while not condition():
        session.check_alive()
        if time.monotonic() > deadline:
            pytest.fail(f"timed out; trainer output: {''.join(session.out)[-2000:]}")
        time.sleep(poll_s)


class Labeller:
    """A scripted person: next pair, an answer, over and over; ``acked`` gets each 200."""

    def __init__(self, url: str, acked: dict[int, str], rng: np.random.Generator) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.acked, self.acked_now = acked, []
        self.errors: list[str] = []
        self.seed = int(rng.integers(1 << 30))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _call(self, method: str, path: str, body: object = None) -> dict:
        con = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            data = None if body is None else json.dumps(body)
            con.request(method, path, data, {"Content-Type": "application/json"})
            resp = con.getresponse()
            reply = json.loads(resp.read())
            if resp.status != 200:
                self.errors.append(f"{method} {path}: {resp.status} {reply}")
            return reply
        finally:
            con.close()

    def _run(self) -> None:
        rng = np.random.default_rng(self.seed)
        while not self._stop.is_set():
            try:
                pair = self._call("GET", "/api/next").get("pair")
                if pair is None:
                    time.sleep(0.05)
                    continue
                answer = ANSWERS[int(rng.integers(4))]
                reply = self._call(
                    "POST", "/api/label", {"pair_id": pair["pair_id"], "answer": answer}
                )
            except (OSError, http.client.HTTPException, ValueError):
                return  # the server is gone (killed): what was not acknowledged may be lost
            if reply.get("saved"):
                self.acked[pair["pair_id"]] = answer
                self.acked_now.append(pair["pair_id"])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
