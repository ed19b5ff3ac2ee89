"""End to end: `rlhf train --feedback human` with two named labellers scripted over HTTP; the
run's TensorBoard gets the policy clips (videos/policy) and the labellers' figures."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rlhf.store import LabelStore


def _call(url: str, token: str, body: dict | None = None) -> dict:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, headers, method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def _links(proc: subprocess.Popen, names: set[str], deadline: float) -> dict[str, tuple]:
    """``{name: (base url, token)}`` from the lines the trainer prints, one per labeller."""
    assert proc.stdout is not None
    links: dict[str, tuple] = {}
    while time.monotonic() < deadline and set(links) != names:
        line = proc.stdout.readline()
        match = re.search(r"^\s+(\w+): (http://127\.0\.0\.1:\d+/)\?token=(\S+)", line)
        if match:
            links[match.group(1)] = (match.group(2), match.group(3))
        if not line and proc.poll() is not None:
            break
    assert set(links) == names, f"trainer printed no link per labeller (exit {proc.poll()})"
    return links


def _tb(log_dir: Path) -> tuple[set[str], set[str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    return set(acc.Tags()["images"]), set(acc.Tags()["scalars"])


@pytest.mark.slow
def test_two_named_labellers_train_a_run_and_tensorboard_shows_clips_and_agreement(
    tmp_path: Path,
) -> None:
    cmd = [
        sys.executable, "-m", "rlhf", "train", "--feedback", "human", "--feedback-wait",
        "--env-id", "HalfCheetah-v5", "--total-timesteps", "4096", "--num-steps", "1024",
        "--num-minibatches", "4", "--update-epochs", "1", "--query.total-labels", "12",
        "--query.initial-fraction", "0.5", "--video.width", "64", "--video.height", "64",
        "--labeller", "alice", "--labeller", "bob", "--overlap", "0.5",
        "--policy-clip-every", "1", "--finish-grace", "2",
        "--runs-dir", str(tmp_path), "--run-name", "team", "--no-progress",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        links = _links(proc, {"alice", "bob"}, time.monotonic() + 120)
        given: dict[str, int] = {"alice": 0, "bob": 0}
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            idle = True
            for n, (name, (base, token)) in enumerate(links.items()):
                try:
                    nxt = _call(base + "api/next", token)
                    if nxt.get("pair") is None:
                        continue
                    # alice always prefers the left clip, bob the right one.
                    answer = "left" if n == 0 else "right"
                    body = {"pair_id": nxt["pair"]["pair_id"], "answer": answer}
                    if _call(base + "api/label", token, body)["saved"]:
                        given[name] += 1
                        idle = False
                except urllib.error.HTTPError as err:
                    assert err.code in (409, 503), err.read()  # a pair the other just took
                except (urllib.error.URLError, http.client.HTTPException, ConnectionError):
                    break  # the run finished and its server closed between poll() and the call
            if idle:
                time.sleep(0.2)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    run = tmp_path / "team"
    store = LabelStore(run / "labels.sqlite")
    by = {lb.labeller for lb in store.labels()}
    stats = store.labeller_stats()
    store.close()
    assert by <= {"alice", "bob"} and given["alice"] and given["bob"]
    images, scalars = _tb(run / "tb")
    assert "videos/policy" in images
    assert {"labellers/labels/alice", "labellers/labels/bob"} <= scalars
    # Overlap pairs were judged by both, who always disagree (left vs right).
    assert stats.compared >= 1 and stats.agreement == 0.0
    assert "labellers/agreement" in scalars
