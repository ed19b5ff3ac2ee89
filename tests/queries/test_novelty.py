"""What the agent does that the labels never showed (--query.ask-when-new), and the schedule's lead."""

from __future__ import annotations

import numpy as np

from rlhf.core.types import Pair, Preference, RolloutBatch
from rlhf.queries.novelty import coverage, new_share
from rlhf.queries.select import QuerySchedule
from tests.support.segments import random_segment

OBS, ACT = 3, 2


def _labels(rng: np.random.Generator, n: int = 60, **fields) -> list[Preference]:
    return [
        Preference(
            Pair(
                random_segment(rng, length=20, obs_dim=OBS, act_dim=ACT, **fields),
                random_segment(rng, length=20, obs_dim=OBS, act_dim=ACT, **fields),
            ),
            1.0,
        )
        for _ in range(n)
    ]


def _rollout(obs: np.ndarray, actions: np.ndarray, valid: np.ndarray | None = None) -> RolloutBatch:
    steps, envs = obs.shape[:2]
    zeros = np.zeros((steps, envs), dtype=bool)
    return RolloutBatch(
        obs=obs.astype(np.float32),
        actions=actions.astype(np.float32),
        true_rewards=np.zeros((steps, envs), np.float32),
        terminated=zeros,
        truncated=zeros,
        valid=np.ones((steps, envs), bool) if valid is None else valid,
        qpos=np.zeros((steps, envs, 2)),
        qvel=np.zeros((steps, envs, 2)),
        env_id="HalfCheetah-v5",
    )


def _familiar(rng: np.random.Generator, steps: int = 500, envs: int = 2) -> RolloutBatch:
    """Steps drawn as the labelled ones were."""
    return _rollout(
        rng.normal(size=(steps, envs, OBS)), rng.uniform(-1, 1, size=(steps, envs, ACT))
    )


def test_steps_like_the_labelled_ones_are_not_new_and_moved_ones_are() -> None:
    rng = np.random.default_rng(0)
    cov = coverage(_labels(rng), with_actions=True)
    assert cov is not None and cov.labels == 60
    # 5 inputs, 1% of each outside: about 5% of the steps by chance.
    assert new_share(cov, _familiar(rng)) < 0.12
    moved = _familiar(rng)
    moved.obs[..., 1] += 8.0  # one input far beyond what any labelled clip showed
    assert new_share(cov, moved) > 0.95


def test_actions_count_only_when_the_reward_sees_them() -> None:
    rng = np.random.default_rng(1)
    prefs = _labels(rng)
    rollout = _familiar(rng)
    rollout.actions[...] = 0.999  # beyond the labelled 99.5% point of the uniform actions
    assert new_share(coverage(prefs, with_actions=True), rollout) > 0.95
    assert new_share(coverage(prefs, with_actions=False), rollout) < 0.12


def test_absorbing_steps_and_invalid_rows_do_not_count() -> None:
    rng = np.random.default_rng(2)
    prefs = _labels(rng, absorbing=5)
    for p in prefs:  # what an absorbing step holds is not an input the reward scores
        for s in (p.pair.left, p.pair.right):
            s.obs[-5:] = 50.0
    cov = coverage(prefs, with_actions=True)
    assert cov is not None and cov.high.max() < 10
    rollout = _familiar(rng)
    rollout.obs[::2] = 50.0
    valid = np.ones(rollout.valid.shape, bool)
    valid[::2] = False  # reset rows: not steps the agent took
    assert new_share(cov, rollout) > 0.45
    assert new_share(cov, _rollout(rollout.obs, rollout.actions, valid)) < 0.12
    assert coverage([], with_actions=True) is None


def test_the_schedule_runs_ahead_by_its_lead_and_never_past_the_total() -> None:
    s = QuerySchedule(300, 0.25, 300_000, ahead=30)
    for step in (0, 10_000, 150_000, 299_000):
        assert s.due(step, ahead=True) == min(300, s.due(step) + 30)
    assert s.due(300_000, ahead=True) == 300
    assert QuerySchedule(300, 0.25, 300_000).due(50_000, ahead=True) == s.due(50_000)
