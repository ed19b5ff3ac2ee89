"""A tiny continuous-control task for end-to-end learning tests that must run in seconds.

A point on a plane moves by its action each step; the true reward is minus its distance to a fixed
goal. PPO solves it in ~10k steps, so a test can check that the whole RLHF pipeline (segments,
queries, teacher, Bradley-Terry training, PPO on the learned reward) really learns.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

ENV_ID = "rlhf-test/PointGoal-v0"
GOAL = np.array([0.6, -0.4], np.float32)


class PointGoal(gym.Env):
    """Observation: position (x, y); action: a step in [-1, 1]^2 scaled by 0.1; 50-step episodes."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.pos = np.zeros(2, np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self.pos.copy(), {}

    def step(self, action: np.ndarray):
        self.pos = np.clip(self.pos + 0.1 * np.asarray(action, np.float32), -2.0, 2.0)
        reward = -float(np.linalg.norm(self.pos - GOAL))
        return self.pos.copy(), reward, False, False, {}


def register() -> None:
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=PointGoal, max_episode_steps=50)
