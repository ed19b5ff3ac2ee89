"""The simulator state a segment records at each step, so the segment can be shown again later.

* MuJoCo envs: ``qpos`` and ``qvel`` (set them, ``mj_forward``, render: the exact picture);
  DeepMind Control's envs too, from dm_control's physics (``env.unwrapped.physics.data``).
* Classic-control envs (Pendulum, MountainCarContinuous): their ``state`` vector, kept in the
  segment's ``qpos`` (``qvel`` is empty); setting it back and calling the env's own ``render()``
  draws the same picture.
* Anything else records nothing and cannot be shown to a person (synthetic feedback still works).
"""

from __future__ import annotations

import enum
from typing import Any

import gymnasium as gym
import numpy as np


class StateKind(enum.StrEnum):
    MUJOCO = "mujoco"
    CLASSIC = "classic"
    NONE = "none"


def mujoco_sim(env: gym.Env) -> object:
    """The MuJoCo env that steps and draws ``env``: its unwrapped env, or the robot env a
    wrapper-like env holds (gymnasium-robotics' mazes keep theirs in ``point_env``/``ant_env``
    and only forward ``render``)."""
    inner = env.unwrapped
    if hasattr(inner, "mujoco_renderer"):
        return inner
    for value in vars(inner).values():
        if hasattr(value, "mujoco_renderer") and hasattr(value, "data"):
            return value
    return inner


def mujoco_data(env: gym.Env) -> Any | None:
    """What holds ``env``'s MuJoCo state (``qpos``, ``qvel``): gymnasium's ``data``, or
    dm_control's ``physics.data`` (shimmy's env forwards ``physics`` to dm_control's); None
    for an env without one."""
    inner = env.unwrapped
    data = getattr(inner, "data", None)
    if data is None:
        data = getattr(getattr(inner, "physics", None), "data", None)
    return data if hasattr(data, "qpos") and hasattr(data, "qvel") else None


def state_kind(env: gym.Env) -> StateKind:
    """Which kind of replayable state ``env`` has (after a reset)."""
    inner = env.unwrapped
    if mujoco_data(env) is not None:
        return StateKind.MUJOCO
    state = getattr(inner, "state", None)
    if state is not None and np.asarray(state).dtype.kind == "f" and np.ndim(state) == 1:
        return StateKind.CLASSIC
    return StateKind.NONE


def state_sizes(env: gym.Env) -> tuple[int, int]:
    """(nq, nv): sizes of the recorded state of one step (0, 0 when nothing is recorded)."""
    kind = state_kind(env)
    inner = env.unwrapped
    if kind is StateKind.MUJOCO:
        data = mujoco_data(env)
        return int(data.qpos.shape[0]), int(data.qvel.shape[0])
    if kind is StateKind.CLASSIC:
        return int(np.asarray(inner.state).shape[0]), 0
    return 0, 0


class StateRecorder:
    """Reads the state of every sub-env of a SyncVectorEnv into preallocated arrays."""

    def __init__(self, envs: gym.vector.SyncVectorEnv) -> None:
        self._envs = [e.unwrapped for e in envs.envs]
        self.kind = state_kind(envs.envs[0])
        self.nq, self.nv = state_sizes(envs.envs[0])

    def read(self, qpos_out: np.ndarray, qvel_out: np.ndarray) -> None:
        """Copy the current state of env i into ``qpos_out[i]`` and ``qvel_out[i]``."""
        if self.kind is StateKind.MUJOCO:
            for i, env in enumerate(self._envs):
                data = mujoco_data(env)  # read each time: nothing promises it is never replaced
                qpos_out[i] = data.qpos
                qvel_out[i] = data.qvel
        elif self.kind is StateKind.CLASSIC:
            for i, env in enumerate(self._envs):
                qpos_out[i] = env.state
