"""Goal-conditioned envs (gymnasium-robotics' dict observations) for :mod:`rlhf.agent.her`.

An observation is ``{"observation", "achieved_goal", "desired_goal"}``; the policy sees the
observation and the desired goal side by side (:func:`goal_input`), :class:`GoalEpisodeRecorder`
turns the steps of one episode into a :class:`GoalEpisode`, and :func:`env_reward_fn` hands the
buffer the env's own ``compute_reward``, so relabelled goals are scored exactly as the env would.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import gymnasium as gym
import numpy as np

from rlhf.agent.her import GoalEpisode, GoalRewardFn
from rlhf.config import ConfigError
from rlhf.envs import check_env_id, is_goal_space
from rlhf.envs.goals import goal_reward_fn, goals_extra_missing, mujoco_problem, mujoco_release


def goal_env_problem(env_id: str) -> str | None:
    """Why ``env_id`` cannot be made here, in one line, or None when it can."""
    try:
        version("gymnasium-robotics")
    except PackageNotFoundError:
        return goals_extra_missing(env_id)
    return mujoco_problem(env_id, mujoco_release())


def make_goal_env(env_id: str, horizon: int, **kwargs: object) -> gym.Env:
    """The env, cut at ``horizon`` steps; :class:`ConfigError` (one line) where it cannot run."""
    problem = goal_env_problem(env_id)
    if problem:
        raise ConfigError(problem)
    check_env_id(env_id)  # registers gymnasium-robotics' envs; an unknown id is one line
    env = gym.make(env_id, max_episode_steps=horizon, **kwargs)
    if not is_goal_space(env.observation_space):
        env.close()
        raise ConfigError(f"{env_id} is not goal-conditioned (no achieved/desired goal)")
    return env


def goal_input(observation: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """What the policy and the critics see: the observation, then the goal, as float32."""
    return np.concatenate([observation, goal], axis=-1).astype(np.float32)


class GoalInputNormalizer:
    """Running mean and std of observations and goals; the policy sees them standardised and
    clipped to ``clip`` (the HER paper's, and rl-zoo3's ``normalize`` for Fetch): raw Fetch
    inputs are positions near (1.3, 0.75, 0.5) m whose few-centimetre differences decide success."""

    def __init__(self, obs_dim: int, goal_dim: int, clip: float = 5.0, eps: float = 1e-2) -> None:
        self.clip, self.eps = clip, eps
        self.count = 0
        self.mean = np.zeros(obs_dim + goal_dim)
        self.m2 = np.zeros(obs_dim + goal_dim)
        self.obs_dim = obs_dim

    def update(self, observation: np.ndarray, goal: np.ndarray) -> None:
        """Add (n, obs_dim) observations and (n, goal_dim) goals (Chan et al.'s parallel update)."""
        x = np.concatenate([observation, goal], axis=-1).astype(np.float64)
        n, batch_mean = len(x), x.mean(0)
        delta, total = batch_mean - self.mean, self.count + len(x)
        self.m2 += ((x - batch_mean) ** 2).sum(0) + delta**2 * self.count * n / total
        self.mean += delta * n / total
        self.count = total

    def __call__(self, observation: np.ndarray, goal: np.ndarray) -> np.ndarray:
        x = goal_input(observation, goal)
        if not self.count:
            return x
        std = np.maximum(np.sqrt(self.m2 / self.count), self.eps)
        return np.clip((x - self.mean) / std, -self.clip, self.clip).astype(np.float32)


def input_dim(env: gym.Env) -> int:
    space = env.observation_space
    return int(space["observation"].shape[0] + space["desired_goal"].shape[0])


def env_reward_fn(env: gym.Env) -> GoalRewardFn:
    """The env's own sparse reward on (achieved, desired) goal batches."""
    fn = goal_reward_fn(env)
    if fn is None:
        raise ConfigError(f"{env.spec.id if env.spec else env} has no compute_reward")
    return fn


class GoalEpisodeRecorder:
    """Collects the steps of one episode from dict observations."""

    def __init__(self) -> None:
        self._rows: dict[str, list[np.ndarray]] = {f: [] for f in GoalEpisode.__dataclass_fields__}

    def __len__(self) -> int:
        return len(self._rows["actions"])

    def add(self, obs: dict, action: np.ndarray, next_obs: dict, terminated: bool) -> None:
        """One step: ``obs`` before ``action``, ``next_obs`` after it."""
        for key, value in (
            ("observation", obs["observation"]),
            ("achieved_goal", obs["achieved_goal"]),
            ("desired_goal", obs["desired_goal"]),
            ("actions", action),
            ("next_observation", next_obs["observation"]),
            ("next_achieved_goal", next_obs["achieved_goal"]),
            ("terminated", np.float32(terminated)),
        ):
            self._rows[key].append(np.asarray(value))

    def finish(self) -> GoalEpisode:
        """The recorded episode; the recorder starts the next one empty."""
        episode = GoalEpisode(**{k: np.stack(v) for k, v in self._rows.items()})
        self._rows = {k: [] for k in self._rows}
        return episode
