"""The time left from the pace of answers: none until the pace is known, then a range."""

from __future__ import annotations

import numpy as np

from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
from rlhf.server.eta import BREAK_S, MIN_GAPS, eta_range


def test_no_time_left_until_enough_answers_set_a_pace() -> None:
    times = [3.0 * i for i in range(MIN_GAPS)]  # MIN_GAPS answers: one gap short
    assert eta_range(times, 100) is None
    assert eta_range([*times, 3.0 * MIN_GAPS], 100) is not None
    assert eta_range([], 0) == (0.0, 0.0)  # nothing left to give


def test_the_range_holds_the_time_the_answers_take() -> None:
    rng = np.random.default_rng(0)
    held = 0
    for _ in range(200):
        gaps = rng.gamma(4.0, 1.0, size=15 + 60)  # ~4 s an answer, varying
        times = np.cumsum(gaps)
        low, high = eta_range(list(times[:16]), 60)  # type: ignore[misc]
        truth = float(times[-1] - times[15])
        held += low <= truth <= high
    assert held >= 180  # about 95% by construction


def test_a_break_is_not_the_pace() -> None:
    times = [2.0 * i for i in range(12)] + [22.0 + BREAK_S + 60 + 2.0 * i for i in range(4)]
    low, high = eta_range(times, 10)  # type: ignore[misc]
    assert 10 < low <= 20 <= high < 30


def test_the_status_gives_the_range_from_the_answers(client, web_run) -> None:
    """Through the API: labels still to give, at the pace of the answers this server stored."""
    store, _ = web_run
    store.set_meta(STATUS_KEY, TrainerStatus(Phase.TRAINING, labels_total=40).to_json())
    state = client.application.extensions["rlhf"]
    for i in range(MIN_GAPS + 1):
        state.answer_times.note(100.0 + 2.0 * i + 0.5 * (i % 2))
    eta = client.get("/api/status").get_json()["eta"]
    assert eta["from"] == "answers" and eta["low_s"] < 2.0 * 40 < eta["high_s"]
    # Before a tenth of its steps, the trainer's own estimate is mostly start-up: none.
    store.set_meta(
        STATUS_KEY,
        TrainerStatus(Phase.TRAINING, labels_total=0, env_steps=10, total_timesteps=1000,
                      eta_seconds=50.0).to_json(),
    )  # fmt: skip
    client.application.extensions["rlhf"].total_labels_hint = 0
    assert client.get("/api/status").get_json()["eta"] is None
