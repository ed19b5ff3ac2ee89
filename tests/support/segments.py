"""Random segments for tests that need stored data but not real physics."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlhf.core.types import Segment


def random_segment(
    rng: np.random.Generator,
    length: int = 4,
    obs_dim: int = 3,
    act_dim: int = 2,
    nq: int = 2,
    nv: int = 2,
    **fields: Any,
) -> Segment:
    """Normal obs, uniform actions in [-1, 1], normal rewards, qpos and qvel (drawn in that
    order), from HalfCheetah-v5 unless ``fields`` says otherwise (env_id, start_step, absorbing)."""
    return Segment(
        obs=rng.normal(size=(length, obs_dim)).astype(np.float32),
        actions=rng.uniform(-1, 1, size=(length, act_dim)).astype(np.float32),
        true_rewards=rng.normal(size=length).astype(np.float32),
        qpos=rng.normal(size=(length, nq)),
        qvel=rng.normal(size=(length, nv)),
        **{"env_id": "HalfCheetah-v5", **fields},
    )


def first_coordinate_segment(rng: np.random.Generator, physics_dim: int = 0) -> Segment:
    """10 steps of 3-d obs around a random centre and 1-d actions, whose true reward is the first
    observation coordinate (an ideal teacher is then easy to learn); qpos and qvel are random, of
    width ``physics_dim`` (none by default)."""
    obs = rng.normal(size=(10, 3)).astype(np.float32) + rng.normal()
    return Segment(
        obs=obs,
        actions=rng.uniform(-1, 1, (10, 1)).astype(np.float32),
        true_rewards=obs[:, 0].copy(),
        qpos=rng.normal(size=(10, physics_dim)),
        qvel=rng.normal(size=(10, physics_dim)),
        env_id="toy",
    )
