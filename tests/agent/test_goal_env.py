"""Goal-conditioned envs into the HER buffer (rlhf.agent.goal_env, scripts/bench_her.py).

The env tests need gymnasium-robotics (the goals extra) and, for Fetch, mujoco < 3.4; CI installs
neither (``.[test]`` on mujoco 4), so there they are skipped and only the refusals run.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from importlib.metadata import PackageNotFoundError
from pathlib import Path

import numpy as np
import pytest

from rlhf.agent import goal_env
from rlhf.agent.goal_env import (
    GoalEpisodeRecorder,
    GoalInputNormalizer,
    env_reward_fn,
    goal_env_problem,
    goal_input,
    input_dim,
    make_goal_env,
)
from rlhf.agent.her import HERReplayBuffer
from rlhf.config import ConfigError
from rlhf.core.shell import install_extra
from rlhf.envs import goals

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench_her.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_her", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_her"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _needs(env_id: str) -> None:
    problem = goal_env_problem(env_id)
    if problem:
        pytest.skip(problem)


@pytest.mark.parametrize("mujoco", ["4.0.0", "3.17.0"])  # both fail Fetch; 3.3.7 runs it
def test_fetch_on_a_newer_mujoco_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, mujoco: str
) -> None:
    versions = {"mujoco": mujoco, "gymnasium-robotics": "1.4.2"}
    monkeypatch.setattr(goal_env, "version", versions.__getitem__)
    monkeypatch.setattr(goals, "version", versions.__getitem__)
    release = tuple(int(p) for p in mujoco.split(".")[:2])
    monkeypatch.setattr(goal_env, "mujoco_release", lambda: release)
    with pytest.raises(ConfigError) as refused:
        make_goal_env("FetchReach-v4", 50)
    assert str(refused.value) == (
        f"FetchReach-v4 needs mujoco < 3.4 (gymnasium-robotics 1.4.2 fails on mujoco {mujoco});"
        f" the goals extra pins mujoco < 3.4: {install_extra('goals')}"
    )
    assert goal_env_problem("PointMaze_UMaze-v3") is None  # PointMaze runs on mujoco 4


def test_a_missing_goals_extra_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(goal_env, "version", missing)
    assert goal_env_problem("PointMaze_UMaze-v3") == (
        f"PointMaze_UMaze-v3 needs the goals extra (gymnasium-robotics): {install_extra('goals')}"
    )


@pytest.mark.parametrize("env_id", ["FetchReach-v4", "PointMaze_UMaze-v3"])
def test_an_episode_reaches_the_buffer_and_rewards_are_the_envs_own(env_id: str) -> None:
    _needs(env_id)
    task = _bench().TASKS[env_id]
    env = make_goal_env(env_id, task.horizon, **task.kwargs)
    rng = np.random.default_rng(0)
    buf = HERReplayBuffer(4 * task.horizon, env_reward_fn(env), task.horizon, future_k=4.0)
    recorder = GoalEpisodeRecorder()
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(task.horizon):
        action = env.action_space.sample()
        nxt, reward, terminated, truncated, info = env.step(action)
        # the env's step reward is its compute_reward on the achieved and desired goals
        assert reward == env.unwrapped.compute_reward(nxt["achieved_goal"], nxt["desired_goal"], {})
        recorder.add(obs, action, nxt, terminated)
        obs = nxt
        if terminated or truncated:
            break
    # the bench's horizon is where episodes end
    assert truncated and not terminated and len(recorder) == task.horizon
    assert task.success_key in info
    episode = recorder.finish()
    assert len(episode) == task.horizon and len(recorder) == 0
    buf.add_episode(episode)
    batch = buf.sample(512, rng)
    expected = env.unwrapped.compute_reward(batch.next_achieved_goal, batch.desired_goal, {})
    np.testing.assert_array_equal(batch.rewards, np.asarray(expected, np.float32))
    r = batch.relabelled
    assert 0.7 < r.mean() < 0.9  # future_k 4: 80% relabelled
    # a relabelled goal is a goal the arm achieved later in this episode
    np.testing.assert_array_equal(
        batch.desired_goal[r], episode.next_achieved_goal[batch.future_rows[r]]
    )
    assert len(np.unique(batch.rewards)) == 2  # reached (own step's goal) and not reached
    x = goal_input(batch.observation, batch.desired_goal)
    assert x.shape == (512, input_dim(env)) and x.dtype == np.float32
    env.close()


def test_the_bench_trains_on_fetchreach_and_reports_each_episodes_success() -> None:
    _needs("FetchReach-v4")
    bench = _bench()
    task = bench.TASKS["FetchReach-v4"]
    quick = dataclasses.replace(
        task, sac=dataclasses.replace(task.sac, learning_starts=60, batch_size=32)
    )
    episodes = bench.train("FetchReach-v4", quick, 4.0, 150, seed=1)
    assert [e.end for e in episodes] == [50, 100, 150]
    assert all(isinstance(e.success, bool) for e in episodes)
    # a Fetch return counts the steps away from the goal: -50 to 0, and 0 only ending there
    assert all(-50 <= e.ret <= 0 and (e.ret < 0 or e.success) for e in episodes)


def test_the_normalizer_standardises_with_the_running_statistics_of_all_updates() -> None:
    rng = np.random.default_rng(3)
    obs = rng.normal([1.3, 0.75], [0.02, 0.5], size=(300, 2))
    goals = rng.normal(0.5, 0.1, size=(300, 1))
    norm = GoalInputNormalizer(2, 1, clip=5.0)
    np.testing.assert_array_equal(norm(obs[:2], goals[:2]), goal_input(obs[:2], goals[:2]))
    for lo, hi in ((0, 7), (7, 100), (100, 300)):  # in uneven chunks, as episodes arrive
        norm.update(obs[lo:hi], goals[lo:hi])
    x = np.concatenate([obs, goals], axis=1)
    np.testing.assert_allclose(norm.mean, x.mean(0))
    out = norm(obs, goals)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(out.std(0), 1, atol=1e-4)  # no sample beyond 5 std here
    far = norm(np.array([[10.0, 0.75]]), np.array([[0.5]]))
    assert far[0, 0] == 5.0  # clipped
