"""Small helpers shared by several test modules."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


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
