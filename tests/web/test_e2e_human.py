"""End to end: `rlhf train --feedback human` with a scripted person labelling over HTTP."""

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

from rlhf.core.types import Answer
from rlhf.store import LabelStore

ANSWERS = [Answer.LEFT, Answer.RIGHT, Answer.EQUAL, Answer.SKIP]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def _wait_for_url(proc: subprocess.Popen, deadline: float) -> str:
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        if match:
            return match.group(1)
        if proc.poll() is not None:
            break
    pytest.fail(f"trainer printed no URL (exit code {proc.poll()})")


def _label_while_it_runs(cmd: list[str]) -> tuple[dict[int, Answer], str]:
    """Start the trainer, answer every pair the page offers until the run ends; returns the
    acknowledged answers and the trainer's output (it must have exited 0)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = _wait_for_url(proc, time.monotonic() + 120)
        given: dict[int, Answer] = {}
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                nxt = _get(url + "api/next")
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError):
                break  # the run has finished and closed its server

            if nxt.get("pair") is None:
                time.sleep(0.2)
                continue
            pair_id = nxt["pair"]["pair_id"]
            answer = ANSWERS[len(given) % len(ANSWERS)]
            try:
                reply = _post(url + "api/label", {"pair_id": pair_id, "answer": answer.value})
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError):
                break  # not acknowledged: the server closed as the run ended
            assert reply["saved"]
            given[pair_id] = answer
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    return given, out


def _stored(run: Path) -> dict[int, Answer]:
    store = LabelStore(run / "labels.sqlite")
    try:
        return {lab.pair_id: lab.answer for lab in store.labels()}
    finally:
        store.close()


def _trainable(given: dict[int, Answer]) -> int:
    return sum(1 for a in given.values() if a is not Answer.SKIP)


COMMON = [
    sys.executable, "-m", "rlhf", "train", "--feedback", "human", "--feedback-wait",
    "--env-id", "HalfCheetah-v5", "--query.total-labels", "8", "--query.initial-fraction", "0.5",
    "--video.width", "64", "--video.height", "64", "--run-name", "human", "--no-progress",
]  # fmt: skip


@pytest.mark.slow
def test_human_feedback_run_trains_on_the_labels_it_was_given(tmp_path: Path) -> None:
    cmd = [
        *COMMON, "--total-timesteps", "3072", "--num-steps", "1024", "--num-minibatches", "4",
        "--update-epochs", "1", "--runs-dir", str(tmp_path),
    ]  # fmt: skip
    given, _ = _label_while_it_runs(cmd)
    summary = json.loads((tmp_path / "human" / "summary.json").read_text())
    assert _stored(tmp_path / "human") == given  # every acknowledged label is there, nothing else
    assert len(given) >= 4  # --feedback-wait held PPO until the initial labels arrived
    assert summary["labels_used"] == _trainable(given)
    # The agent in view: a curve point per iteration, a policy clip queued at the first.
    store = LabelStore(tmp_path / "human" / "labels.sqlite")
    assert [p.iteration for p in store.curve()] == [1, 2, 3]
    assert store.curve()[-1].predicted_return is not None
    clip = store.policy_clip(1)
    assert clip is not None and clip.iteration == 1
    store.close()


@pytest.mark.slow
def test_a_person_teaches_pebble_through_the_page(tmp_path: Path) -> None:
    """--algo sac: PEBBLE's pretraining asks nothing, then the page's pairs are its queries."""
    cmd = [
        *COMMON, "--algo", "sac", "--total-timesteps", "2000", "--sac.learning-starts", "500",
        "--sac.pretrain-steps", "50", "--sac.iteration-steps", "500", "--sac.hidden-size", "32",
        "--sac.batch-size", "32", "--reward-model.max-epochs", "2", "--runs-dir", str(tmp_path),
    ]  # fmt: skip
    given, _ = _label_while_it_runs(cmd)
    summary = json.loads((tmp_path / "human" / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["env_steps"] == 2000
    assert _stored(tmp_path / "human") == given
    assert len(given) >= 4  # --feedback-wait held SAC until the initial labels arrived
    assert summary["labels_used"] == _trainable(given)
    store = LabelStore(tmp_path / "human" / "labels.sqlite")
    try:
        curve = store.curve()
        assert [p.iteration for p in curve] == [1, 2, 3, 4]
        assert curve[-1].predicted_return is not None  # the reward learned from the answers
        assert store.policy_clip(1) is not None
    finally:
        store.close()
