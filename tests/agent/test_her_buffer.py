"""HER in SAC's flat replay buffer (``--sac.her``), as properties: relabelled goals are goals
achieved later in the same episode, written into obs and next_obs alike; rewards follow the
relabelled goals; a checkpoint keeps the episodes, those in progress included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlhf.agent.collector import StepRecord
from rlhf.agent.her_buffer import HindsightReplayBuffer
from rlhf.agent.replay import ENV_REWARD, ReplayBuffer
from rlhf.envs import make_env
from rlhf.envs.goals import goal_env_problem, goal_reward_fn

OBS_DIM = 3 + 2 + 2  # observation (episode, step, env), achieved goal, desired goal
LENGTH = {}  # episode id -> its length, filled by _drive


def _flat(ep: int, t: int, env: int) -> np.ndarray:
    """Before step t of episode ep: the achieved goal encodes (ep, t), the desired one (-1-ep)."""
    return np.array([ep, t, env, ep, t, -1.0 - ep, -1.0], np.float32)


def _reached(achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
    return -(np.abs(achieved - desired).sum(axis=1) > 0).astype(np.float32)  # 0 reached, -1 not


def _drive(buf: ReplayBuffer, lengths: list[list[int]], steps: int) -> dict[int, int]:
    """Step len(lengths) fake envs together for ``steps`` steps, as the collector hands them over:
    env i runs episodes of lengths[i] (cycled), the step after an episode's end is a reset step.
    Returns episode id -> length of the episodes that ended."""
    n = len(lengths)
    ep = list(range(n))
    next_id, t, k = n, [0] * n, [0] * n
    prev_done = np.zeros(n, bool)
    ended: dict[int, int] = {}
    for _ in range(steps):
        obs = np.stack([_flat(ep[i], t[i], i) for i in range(n)])
        nxt = np.stack([_flat(ep[i], t[i] + 1, i) for i in range(n)])
        length = np.array([lengths[i][k[i] % len(lengths[i])] for i in range(n)])
        valid = ~prev_done
        done = valid & (np.array(t) + 1 >= length)
        terminated = done & (length % 2 == 0)  # some episodes end in a terminal state
        rewards = _reached(nxt[:, 3:5], nxt[:, 5:7])
        buf.add_step(
            StepRecord(obs, np.ones((n, 1), np.float32), nxt, rewards, terminated, valid,
                       np.zeros((n, 0)), np.zeros((n, 0)), done & ~terminated)
        )  # fmt: skip
        for i in range(n):
            if not valid[i]:  # the reset step: a new episode starts at the next one
                ep[i], next_id, t[i], k[i] = next_id, next_id + 1, 0, k[i] + 1
            elif done[i]:
                ended[ep[i]] = t[i] + 1
            else:
                t[i] += 1
        prev_done = done
    return ended


def _buffer(capacity: int, num_envs: int, future_k: float, **kw) -> HindsightReplayBuffer:
    return HindsightReplayBuffer(
        capacity, OBS_DIM, 1, goal_size=2, num_envs=num_envs, future_k=future_k,
        goal_reward=_reached, **kw,
    )  # fmt: skip


def _check_relabelling(batch, ended: dict[int, int]) -> np.ndarray:
    """The properties every sampled minibatch has; returns which rows were relabelled."""
    ep, step = batch.obs[:, 0], batch.obs[:, 1]
    goal = batch.obs[:, 5:7]
    np.testing.assert_array_equal(batch.next_obs[:, 5:7], goal)  # obs and next_obs alike
    own = goal[:, 0] == -1.0 - ep
    np.testing.assert_array_equal(goal[own, 1], -1.0)
    r = ~own  # relabelled: goal (episode, step achieved)
    assert (goal[r, 0] == ep[r]).all()  # never from another episode
    assert (goal[r, 1] >= step[r] + 1).all()  # achieved after this step or a later one
    assert (goal[r, 1] <= np.array([ended[int(e)] for e in ep[r]])).all()
    assert all(int(e) in ended for e in ep)  # only finished episodes are stored
    np.testing.assert_array_equal(batch.rewards, _reached(batch.next_obs[:, 3:5], goal))
    return r


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.lists(st.integers(1, 9), min_size=1, max_size=4), min_size=1, max_size=3),
    capacity=st.integers(10, 40),
    steps=st.integers(10, 60),
    future_k=st.sampled_from([0.0, 1.0, 4.0]),
    seed=st.integers(0, 2**16),
)
def test_relabelled_goals_are_achieved_later_in_the_same_episode(
    lengths: list[list[int]], capacity: int, steps: int, future_k: float, seed: int
) -> None:
    buf = _buffer(capacity, len(lengths), future_k)
    ended = _drive(buf, lengths, steps)
    if not len(buf):
        assert not ended or capacity < 1
        return
    batch = buf.sample(512, np.random.default_rng(seed))
    relabelled = _check_relabelling(batch, ended)
    if future_k == 0:
        assert not relabelled.any()


def test_future_k_sets_the_share_of_relabelled_transitions_and_rewards_follow_it() -> None:
    buf = _buffer(200, 2, 4.0)
    ended = _drive(buf, [[7, 5], [9]], 150)
    batch = buf.sample(20_000, np.random.default_rng(0))
    # A relabelled goal can equal the step's own achieved goal only by chance; here never.
    relabelled = _check_relabelling(batch, ended)
    assert abs(relabelled.mean() - 0.8) < 0.02  # k / (k + 1)
    # A relabelled goal reached on the step itself (the last step's next goal) earns 0.
    assert (batch.rewards[relabelled] == 0).any() and (batch.rewards[~relabelled] == -1).all()


@pytest.mark.parametrize("future_k", [1.0, 4.0, 8.0])
def test_future_k_bounds_the_relabelled_share_and_a_last_step_reaches_its_goal(
    future_k: float,
) -> None:
    buf = _buffer(500, 1, future_k)
    ended = _drive(buf, [[50]], 520)  # 10 episodes of 50 steps, each then a reset step
    batch = buf.sample(20_000, np.random.default_rng(0))
    relabelled = _check_relabelling(batch, ended)
    share, bound = relabelled.mean(), future_k / (future_k + 1)
    assert abs(share - bound) < 0.01, (share, bound)
    assert share / (1 - share) <= future_k * 1.05  # at most future_k per original transition
    last = relabelled & (buf.steps_left[batch.indices] == 0)  # its only future goal: its own
    assert last.any() and (batch.rewards[last] == 0).all()


@pytest.mark.parametrize("env_id", ["PointMaze_UMaze-v3", "FetchReach-v4"])
def test_a_robotics_episode_is_relabelled_and_scored_by_the_envs_own_reward(env_id: str) -> None:
    """On gymnasium-robotics' envs as ``rlhf train`` makes them (skipped without the goals
    extra, and Fetch on mujoco >= 3.4)."""
    problem = goal_env_problem(env_id)
    if problem:
        pytest.skip(problem)
    horizon = 50
    env = make_env(env_id, {"max_episode_steps": horizon})
    compute = goal_reward_fn(env)
    assert compute is not None
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    buf = HindsightReplayBuffer(
        4 * horizon, obs_dim, act_dim, goal_size=env.goal_size, future_k=4.0, goal_reward=compute
    )
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(horizon):
        action = env.action_space.sample()
        nxt, reward, terminated, truncated, _ = env.step(action)
        # the env's step reward is its compute_reward on the achieved and desired goals
        assert reward == compute(nxt[None, buf.achieved], nxt[None, buf.desired])[0]
        one = np.ones(1, bool)
        buf.add_step(
            StepRecord(obs[None], action[None], nxt[None], np.array([reward]),
                       np.array([terminated]), one, np.zeros((1, 0)), np.zeros((1, 0)),
                       np.array([truncated]))
        )  # fmt: skip
        obs = nxt
        if terminated or truncated:
            break
    assert truncated and not terminated and len(buf) == horizon  # stored at the episode's end
    batch = buf.sample(512, np.random.default_rng(0))
    goal = batch.obs[:, buf.desired]
    expected = env.unwrapped.compute_reward(batch.next_obs[:, buf.achieved], goal, {})
    np.testing.assert_array_equal(batch.rewards, np.asarray(expected, np.float32))
    relabelled = (goal != buf.obs[batch.indices][:, buf.desired]).any(axis=1)
    assert 0.7 < relabelled.mean() < 0.9  # future_k 4: 80% relabelled
    achieved = buf.next_obs[:horizon, buf.achieved]
    for row, g in zip(batch.indices[relabelled], goal[relabelled], strict=True):
        assert (achieved[row:] == g).all(axis=1).any()  # achieved later in this episode
    assert len(np.unique(batch.rewards)) == 2  # reached (own step's goal) and not reached
    env.close()


def test_a_learned_reward_scores_the_relabelled_observation() -> None:
    seen = []

    def reward(obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        seen.append(obs.copy())
        return obs[:, 5] * 10 + obs[:, 6]  # a function of the desired goal only

    buf = _buffer(100, 1, 4.0, reward_fn=reward)
    ended = _drive(buf, [[6]], 40)
    batch = buf.sample(256, np.random.default_rng(1))
    np.testing.assert_array_equal(seen[-1], batch.obs)
    np.testing.assert_array_equal(batch.rewards, batch.obs[:, 5] * 10 + batch.obs[:, 6])
    assert (batch.obs[:, 5] >= 0).any()  # some goals were relabelled
    # Scored per minibatch, never from a stored value: the same rows get other goals next time.
    assert not buf._caching()
    again = buf.sample(256, np.random.default_rng(2))
    assert len(seen) == 2 and ended and again.rewards.shape == (256,)


def test_the_env_reward_needs_the_envs_compute_reward() -> None:
    buf = HindsightReplayBuffer(50, OBS_DIM, 1, goal_size=2, reward_fn=ENV_REWARD)
    _drive(buf, [[3]], 10)
    with pytest.raises(RuntimeError, match="compute_reward"):
        buf.sample(8, np.random.default_rng(0))


def test_a_checkpoint_keeps_the_episodes_and_the_ones_in_progress() -> None:
    buf = _buffer(30, 2, 4.0)
    ended = _drive(buf, [[8], [5, 6]], 43)  # wraps around; both envs are mid-episode at the end
    in_progress = sum(len(p) for p in buf._pending)
    assert in_progress > 0
    state = buf.state_dict()
    back = _buffer(30, 2, 4.0)
    back.load_state_dict(state)
    assert back.added == buf.added + in_progress and not any(back._pending)
    # The episodes in progress are stored cut where the checkpoint was written.
    cut = {
        int(e): int(back.obs[back.obs[:, 0] == e, 1].max()) + 1
        for e in set(back.obs[: len(back), 0].tolist()) - set(ended)
    }
    assert len(cut) == 2  # one cut episode per env
    _check_relabelling(back.sample(2000, np.random.default_rng(3)), ended | cut)
    # A smaller buffer keeps the newest rows, still relabelled within their episodes.
    small = _buffer(12, 2, 4.0)
    small.load_state_dict(state)
    assert len(small) == 12
    _check_relabelling(small.sample(500, np.random.default_rng(4)), ended | cut)


def test_a_plain_buffers_checkpoint_restores_as_one_step_episodes() -> None:
    plain = ReplayBuffer(20, OBS_DIM, 1)
    rows = np.stack([_flat(e, 0, 0) for e in range(5)])
    plain.add(rows, np.ones((5, 1), np.float32), rows + 1, np.zeros(5), np.zeros(5))
    buf = _buffer(20, 1, 4.0)
    buf.load_state_dict(plain.state_dict())
    assert len(buf) == 5 and not buf.steps_left[:5].any()
    batch = buf.sample(100, np.random.default_rng(0))
    np.testing.assert_array_equal(batch.obs[:, :2], batch.next_obs[:, :2] - 1)
