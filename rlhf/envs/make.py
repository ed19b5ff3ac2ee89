"""Environment construction and physical-state capture."""

from __future__ import annotations

import difflib
import logging

import gymnasium as gym
import mujoco
import numpy as np

from rlhf.config import ConfigError


def quiet_mujoco_warnings() -> None:
    """Route MuJoCo's warnings to Python logging instead of stderr and ``MUJOCO_LOG.TXT``.

    MuJoCo 4 warns that gymnasium's model files use the deprecated ``settotalmass`` attribute on
    every env creation, and writes each warning to a log file in the current directory.
    """
    log = logging.getLogger("rlhf.mujoco")

    def handler(message: str) -> None:
        if "deprecated" in message:
            log.debug("mujoco: %s", message)
        else:
            log.warning("mujoco: %s", message)

    mujoco.set_mju_user_warning(handler)


quiet_mujoco_warnings()


class EnvError(ConfigError):
    """The environment id or its spaces cannot be used; the message is one line."""


def check_env_id(env_id: str) -> None:
    """Fail with a one-line message (and a suggestion) if ``env_id`` is not registered."""
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise EnvError(f"unknown environment id {env_id!r}{hint}")


def check_env(env_id: str) -> None:
    """Fail with one line, before a run makes anything, unless ``env_id`` is usable here."""
    check_env_id(env_id)
    env = gym.make(env_id)
    try:
        _check_spaces(env_id, env.action_space, env.observation_space)
    finally:
        env.close()


def _check_spaces(env_id: str, action: gym.Space, observation: gym.Space) -> None:
    if not isinstance(action, gym.spaces.Box):
        raise EnvError(f"{env_id} has {action}; rlhf needs continuous (Box) actions")
    if not isinstance(observation, gym.spaces.Box):
        raise EnvError(f"{env_id} has a non-Box observation space; rlhf needs flat vectors")


def make_vec_env(env_id: str, num_envs: int, seed: int) -> gym.vector.SyncVectorEnv:
    """A synchronous vector env with gymnasium's default next-step autoreset.

    No normalisation wrappers: the policy normalises its own observations and the reward model
    needs the raw ones, so the env hands out raw data only (which also keeps stepping fast).
    """
    check_env_id(env_id)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(num_envs)])
    try:
        _check_spaces(env_id, envs.single_action_space, envs.single_observation_space)
    except EnvError:
        envs.close()
        raise
    envs.action_space.seed(seed)
    return envs


class PhysicsRecorder:
    """Reads MuJoCo qpos/qvel out of every sub-env of a SyncVectorEnv (empty for non-MuJoCo envs)."""

    def __init__(self, envs: gym.vector.SyncVectorEnv) -> None:
        self._datas = [getattr(e.unwrapped, "data", None) for e in envs.envs]
        first = self._datas[0]
        self.nq = int(first.qpos.shape[0]) if first is not None else 0
        self.nv = int(first.qvel.shape[0]) if first is not None else 0

    def read(self, qpos_out: np.ndarray, qvel_out: np.ndarray) -> None:
        """Copy the current state of env i into ``qpos_out[i]`` and ``qvel_out[i]``."""
        if self.nq == 0:
            return
        for i, data in enumerate(self._datas):
            qpos_out[i] = data.qpos
            qvel_out[i] = data.qvel
