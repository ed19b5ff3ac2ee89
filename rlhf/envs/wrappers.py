"""Wrappers a run puts around its envs: fixed-horizon episodes, and a target behaviour's reward.

**Fixed-horizon episodes**: the env's own termination becomes information instead of an ending.
A learned reward cannot see when an episode ends, so an env that terminates leaks the sign of
the reward into the policy: with a reward that is mostly negative, falling over ends the
punishment early and the agent learns to fall; mostly positive, and it learns to live forever
whatever it does (imitation's docs: "Variable Horizon Environments Considered Harmful").
Christiano et al. 2017 removed variable-length episodes for this reason, and seals makes Ant,
Hopper, Humanoid and Walker2d fixed-horizon. :class:`FixedHorizon` does the same for any env:
episodes run to the time limit, and the step where the env would have ended its episode is
reported in ``info[ENDED]``. The env's own reward carries on (gymnasium's v5 robots pay their
healthy bonus only while healthy, and the pendulums pay nothing once the pole is down), so a
teacher still sees that falling is bad, and the loop can still report the standard return.

**A target behaviour** (``--teacher.target``, ``--teacher.reward``): :class:`TargetReward` pays
the target's reward as the step reward, so everything downstream (segments, the synthetic
teacher, the reported return) sees the target, and keeps the env's own in ``info[ENV_REWARD]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rlhf.config import ConfigError
from rlhf.envs.state import mujoco_data, mujoco_sim

ENDED = "env_terminated"
"""Info key set to True on every step at which the env itself says the episode is over."""


class FixedHorizon(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Never terminate; report the env's termination in ``info[ENDED]`` instead.

    It records its (no) constructor arguments, as gymnasium's wrappers do, so ``env.spec`` can
    rebuild the wrapped stack (``gym.make(env.spec)``, ``check_env``).
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated:
            info = {**info, ENDED: True}
        return obs, reward, False, truncated, info


ENV_REWARD = "env_reward"
"""Info key of :class:`TargetReward`: the env's own reward of the step (the target replaced it)."""


class TargetReward(gym.Wrapper):
    """Pay the step reward of a target behaviour instead of the env's own; keep the env's reward in
    ``info[ENV_REWARD]``.

    ``reward(obs=, action=, next_obs=, qpos=, qvel=)`` is called on a batch of one row: the
    observation before the step, the action applied, the observation after it, and the physics
    state after it (MuJoCo's ``data.qpos``/``data.qvel``; a classic-control env's ``state`` as
    ``qpos`` and an empty ``qvel``). It must return one finite reward (see
    :mod:`rlhf.envs.targets`); anything else stops the run with a :class:`TargetError`.
    """

    def __init__(self, env: gym.Env, reward: Callable[..., Any], name: str = "") -> None:
        gym.Wrapper.__init__(self, env)
        self._reward = reward
        self._name = name or getattr(reward, "__name__", "target")
        self._obs: Any = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        qpos, qvel = physics_state(self.env)
        try:
            value = np.asarray(
                self._reward(
                    obs=np.asarray(self._obs)[None], action=np.asarray(action)[None],
                    next_obs=np.asarray(obs)[None], qpos=qpos[None], qvel=qvel[None],
                )
            )  # fmt: skip
        except Exception as exc:
            text = " ".join(str(exc).split())
            raise TargetError(
                f"the target {self._name} raised {type(exc).__name__}: {text}"
            ) from exc
        if value.shape != (1,) or not np.isfinite(value).all():
            raise TargetError(
                f"the target {self._name} returned {value.tolist()!r} (shape {value.shape}) for"
                " one step; it must return one finite reward per row, shape (B,)"
            )
        self._obs = obs
        return obs, float(value[0]), terminated, truncated, {**info, ENV_REWARD: env_reward}


class TargetError(ConfigError):
    """A target (a user's function) raised, or returned something that is not one finite reward
    per row; the message is one line."""


def physics_state(env: gym.Env) -> tuple[np.ndarray, np.ndarray]:
    """Copies of the env's state now: MuJoCo's (qpos, qvel); a classic-control env's ``state``
    and an empty array; two empty arrays for an env without a state."""
    data = getattr(mujoco_sim(env), "data", None)
    if data is None:  # dm_control's physics (DeepMind Control through shimmy)
        data = mujoco_data(env)
    if data is not None and hasattr(data, "qpos") and hasattr(data, "qvel"):
        return np.array(data.qpos, np.float64), np.array(data.qvel, np.float64)
    state = getattr(env.unwrapped, "state", None)
    qpos = np.zeros(0) if state is None else np.array(state, np.float64).ravel()
    return qpos, np.zeros(0)
