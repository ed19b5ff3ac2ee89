"""HER's future strategy, as properties: goals reached later in the same episode, never across one,
and ``future_k`` bounds the share of relabelled transitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlhf.agent.her import GoalEpisode, HERReplayBuffer


def _episode(ep_id: int, n: int) -> GoalEpisode:
    """Goals encode (episode, step): achieved goal after step t is (ep_id, t + 1)."""
    t = np.arange(n, dtype=np.float64)
    ep = np.full(n, float(ep_id))
    return GoalEpisode(
        observation=np.stack([ep, t], axis=1),
        achieved_goal=np.stack([ep, t], axis=1),
        desired_goal=np.full((n, 2), -1.0),
        actions=np.zeros((n, 1), np.float32),
        next_observation=np.stack([ep, t + 1], axis=1),
        next_achieved_goal=np.stack([ep, t + 1], axis=1),
        terminated=np.zeros(n, np.float32),
    )


def _reached(achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
    return -(np.abs(achieved - desired).sum(axis=1) > 0).astype(np.float32)  # 0 reached, -1 not


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=15),
    size=st.integers(12, 40),
    future_k=st.sampled_from([0.0, 1.0, 4.0, 8.0]),
    seed=st.integers(0, 2**16),
)
def test_future_goals_come_from_a_later_step_of_the_same_episode(
    lengths: list[int], size: int, future_k: float, seed: int
) -> None:
    buf = HERReplayBuffer(size, _reached, horizon=12, future_k=future_k)
    for ep_id, n in enumerate(lengths):
        buf.add_episode(_episode(ep_id, n))
    batch = buf.sample(256, np.random.default_rng(seed))
    ep, step = batch.observation[:, 0], batch.observation[:, 1]
    goal_ep, goal_step = batch.desired_goal[:, 0], batch.desired_goal[:, 1]
    r = batch.relabelled
    assert (goal_ep[r] == ep[r]).all()  # never across an episode boundary
    assert (goal_step[r] >= step[r] + 1).all()  # achieved after this step or a later one
    assert (goal_step[r] <= np.array([lengths[int(e)] for e in ep[r]])).all()
    assert (batch.desired_goal[~r] == -1).all()  # the others keep their own goal
    np.testing.assert_array_equal(
        batch.rewards, _reached(batch.next_achieved_goal, batch.desired_goal)
    )
    # stored episodes are whole: every sampled step's episode has all its steps stored
    live = {(int(e), int(s)) for e, s in buf._data["observation"][buf._live_rows]}
    for e in set(ep.tolist()):
        assert all((int(e), s) in live for s in range(lengths[int(e)]))
    if future_k == 0:
        assert not r.any()


@pytest.mark.parametrize("future_k", [1.0, 4.0, 8.0])
def test_future_k_bounds_the_relabelled_share(future_k: float) -> None:
    buf = HERReplayBuffer(500, _reached, horizon=50, future_k=future_k)
    for ep_id in range(10):
        buf.add_episode(_episode(ep_id, 50))
    batch = buf.sample(20_000, np.random.default_rng(0))
    share = batch.relabelled.mean()
    bound = future_k / (future_k + 1)  # at most future_k relabelled per original transition
    assert abs(share - bound) < 0.01, (share, bound)
    assert share / (1 - share) <= future_k * 1.05


def test_relabelled_goals_are_reached_by_the_last_step_with_reward_zero() -> None:
    buf = HERReplayBuffer(10, _reached, horizon=5, future_k=1e9)  # relabel (almost) everything
    buf.add_episode(_episode(0, 5))
    batch = buf.sample(200, np.random.default_rng(1))
    last = batch.observation[:, 1] == 4  # the last step: its only future goal is its own
    assert (batch.rewards[last & batch.relabelled] == 0).all()
    with pytest.raises(ValueError):
        buf.add_episode(_episode(1, 6))  # longer than the horizon
