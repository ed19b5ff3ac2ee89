"""Small helpers shared by several test modules."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlhf.types import Segment


def random_states(env_id: str, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo (qpos, qvel) before each of ``steps`` random-action steps of a fresh env."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    qpos, qvel = [], []
    for _ in range(steps):
        qpos.append(env.unwrapped.data.qpos.copy())
        qvel.append(env.unwrapped.data.qvel.copy())
        env.step(env.action_space.sample())
    env.close()
    return np.array(qpos), np.array(qvel)


def state_segment(
    qpos: np.ndarray, qvel: np.ndarray, env_id: str, obs_dim: int, act_dim: int
) -> Segment:
    """A segment that carries only physics states (enough to render it); the rest is zeros."""
    n = len(qpos)
    return Segment(
        obs=np.zeros((n, obs_dim), np.float32),
        actions=np.zeros((n, act_dim), np.float32),
        true_rewards=np.zeros(n, np.float32),
        qpos=qpos,
        qvel=qvel,
        env_id=env_id,
    )
