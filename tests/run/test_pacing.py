"""Fresh pairs first, retired stale pairs, a schedule that counts answers, and --feedback-pace."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlhf.config import Config, PPOConfig, QueryConfig, VideoConfig, WebConfig
from rlhf.core.types import Answer, Pair
from rlhf.run.runner import run
from rlhf.store import VIDEO_READY, LabelStore
from tests.support.labelling import mark_ready
from tests.support.segments import random_segment


def _pairs(n: int, rng: np.random.Generator) -> list[Pair]:
    return [Pair(random_segment(rng), random_segment(rng)) for _ in range(n)]


@pytest.fixture
def store(tmp_path: Path, rng: np.random.Generator) -> LabelStore:
    s = LabelStore(tmp_path / "labels.sqlite")
    for iteration in (1, 2, 3):  # two pairs per iteration: ids 1-2, 3-4, 5-6
        s.add_pairs(_pairs(2, rng), iteration=iteration)
    return s


def test_newest_iteration_first_then_in_the_order_asked(store: LabelStore) -> None:
    assert [r.id for r in store.claim_for_render(3)] == [5, 6, 3]
    mark_ready(store, [1, 2, 3, 4, 5, 6])
    assert [r.id for r in store.next_ready(limit=6)] == [5, 6, 3, 4, 1, 2]
    assert [r.id for r in store.next_ready(exclude=[5], limit=2)] == [6, 3]


def test_claims_keep_only_ready_ahead_ready_or_rendering(store: LabelStore) -> None:
    mark_ready(store, [1])
    assert [r.id for r in store.claim_for_render(10, keep_ready=3)] == [5, 6]
    assert store.claim_for_render(10, keep_ready=3) == []  # 1 ready + 2 rendering
    store.add_label(1, Answer.LEFT)
    assert [r.id for r in store.claim_for_render(10, keep_ready=3)] == [3]


def test_retired_pairs_are_not_handed_out_but_a_held_one_may_be_answered(
    store: LabelStore,
) -> None:
    mark_ready(store, [1, 2, 3, 4])
    store.add_label(1, Answer.RIGHT)
    assert store.retire_before(3) == 3  # 2, 3, 4 (1 is answered; 5, 6 are of iteration 3)
    assert store.retire_before(2) == 0  # retirement never goes back
    counts = store.counts()
    assert (counts.retired, counts.ready_unlabelled, counts.pending_video, counts.live) == (
        3,
        0,
        2,
        2,
    )
    assert store.next_ready(limit=10) == []
    assert [r.id for r in store.claim_for_render(10)] == [5, 6]
    assert store.add_label(2, Answer.LEFT)  # a page that held it when it retired
    assert store.counts().retired == 2


def test_the_schedule_asks_again_for_retired_pairs_and_counts_answers(tmp_path: Path) -> None:
    from rlhf.queries.select import QuerySchedule
    from rlhf.run.lifecycle import Progress

    # What learned_rewards computes: due - (asked - retired).
    schedule = QuerySchedule(10, 0.5, 1000)
    store = LabelStore(tmp_path / "labels.sqlite")
    progress = Progress()
    progress.requested = len(store.add_pairs(_pairs(5, np.random.default_rng(0)), iteration=1))
    store.retire_before(2)
    counts = store.counts()
    assert schedule.due(0) - (progress.requested - counts.retired) == 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


class SlowLabeller(threading.Thread):
    """Answers every pair it is given, ``delay`` seconds after it got it (left, right, skip ...)."""

    def __init__(self, url: str, delay: float) -> None:
        super().__init__(daemon=True)
        self.url, self.delay = url, delay
        self.given: dict[int, str] = {}
        self.waiting_messages: set[str] = set()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                nxt = _http(f"{self.url}/api/next")
                status = _http(f"{self.url}/api/status")
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)  # not listening yet, or closed at the end
                continue
            if status.get("phase") == "waiting for labels" and status.get("message"):
                self.waiting_messages.add(status["message"])
            if nxt["pair"] is None:
                time.sleep(0.1)
                continue
            time.sleep(self.delay)
            answer = ("left", "right", "skip")[len(self.given) % 3]
            pair_id = nxt["pair"]["pair_id"]
            try:
                _http(f"{self.url}/api/label", {"pair_id": pair_id, "answer": answer})
                self.given[pair_id] = answer
            except (urllib.error.URLError, OSError):
                pass


@pytest.mark.slow
def test_with_pacing_the_reward_trains_on_every_answered_label_before_the_budget_ends(
    tmp_path: Path,
) -> None:
    port = _free_port()
    cfg = Config(
        env_id="HalfCheetah-v5", total_timesteps=2048, feedback="human", runs_dir=str(tmp_path),
        run_name="paced", progress=False, checkpoint_every=0,
        ppo=PPOConfig(num_steps=512, num_minibatches=4, update_epochs=1),
        query=QueryConfig(total_labels=8, initial_fraction=0.5, segment_length=10),
        video=VideoConfig(width=32, height=32, render_processes=1),
        web=WebConfig(port=port, finish_grace=0.0),
    )  # fmt: skip
    labeller = SlowLabeller(f"http://127.0.0.1:{port}", delay=0.4)
    labeller.start()
    try:
        summary = run(cfg)
    finally:
        labeller.done.set()
        labeller.join(10)
    store = LabelStore(tmp_path / "paced" / "labels.sqlite")
    labels = store.labels()
    trainable = sum(1 for lb in labels if lb.answer is not Answer.SKIP)
    # Every label the run asked for was answered while PPO waited, none retired or left over.
    assert len(labels) == store.counts().pairs == 8
    assert summary.labels_used == trainable
    events = EventAccumulator(str(tmp_path / "paced" / "tb")).Reload()
    used = events.Scalars("labels/used")
    assert used[-1].value == trainable  # fitted inside the loop, not only in the final round
    assert used[-1].step <= cfg.total_timesteps
    assert any("before the agent starts learning" in m for m in labeller.waiting_messages)
    assert store.get_pair_record(1).video_status == VIDEO_READY
