"""Small helpers shared by several test modules."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from rlhf.config import Config, PPOConfig, QueryConfig, RewardConfig
from rlhf.core.types import Segment

QUICK_REWARD_FIT = RewardConfig(max_epochs=2)
"""For a SAC run whose test checks anything but how well the reward fits: SAC's default round
(100 epochs of at least 32 steps, every member) would be nearly all of a toy run's time."""


def tiny_config(tmp_path: Path, env_id: str, **kw) -> Config:
    """A synthetic-feedback run of one 512-step PPO iteration and 8 labels; ``kw`` replaces
    any field."""
    base = dict(
        env_id=env_id,
        total_timesteps=512,
        feedback="synthetic",
        runs_dir=str(tmp_path),
        run_name="run",
        progress=False,
        ppo=PPOConfig(num_steps=512, num_minibatches=4, update_epochs=1),
        query=QueryConfig(total_labels=8),
    )
    return Config(**(base | kw))


def tb_scalars(tb: Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of every event of ``tag`` in a run's TensorBoard directory; [] if none."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return []
    return [(event.step, event.value) for event in acc.Scalars(tag)]


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
