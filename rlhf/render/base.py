"""What every renderer shares: its error, making the env it draws with, checking a segment's
state against the model (:mod:`rlhf.render.frames` for gymnasium's envs, :mod:`rlhf.render.dmc`
for DeepMind Control's)."""

from __future__ import annotations

from typing import Any

import numpy as np


class RenderError(RuntimeError):
    """A segment cannot be drawn (unknown env, no replayable state, state of the wrong size)."""


def make_env_for_render(env_id: str, kwargs: dict[str, Any] | None, **extra: Any):
    """``gym.make`` for a renderer: ids of extras (gymnasium-robotics, shimmy) are registered on
    demand, since a render process starts without them."""
    import gymnasium as gym

    from rlhf.envs import EnvError, check_env_id

    try:  # registers gymnasium-robotics' ids on demand: a render process starts without them
        check_env_id(env_id)
    except EnvError:
        raise RenderError(f"unknown environment id {env_id!r}") from None
    return gym.make(env_id, **(kwargs or {}), **extra)


def check_state(
    env_id: str, qpos: np.ndarray, qvel: np.ndarray, nq: int, nv: int
) -> tuple[np.ndarray, np.ndarray]:
    qpos = np.asarray(qpos, dtype=np.float64)
    qvel = np.asarray(qvel, dtype=np.float64)
    if qpos.ndim != 2 or qpos.shape[1] != nq:
        raise RenderError(f"qpos has shape {qpos.shape}; {env_id} needs (T, {nq})")
    if qvel.shape != (len(qpos), nv):
        raise RenderError(f"qvel has shape {qvel.shape}; {env_id} needs ({len(qpos)}, {nv})")
    if len(qpos) == 0:
        raise RenderError("a segment needs at least one state")
    return qpos, qvel
