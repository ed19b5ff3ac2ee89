"""Goal-conditioned envs as flat-vector envs, so ``rlhf train`` takes them like any other.

gymnasium-robotics' envs (PointMaze, AntMaze, Fetch) observe a dict of ``observation``,
``achieved_goal`` and ``desired_goal``. The agent, the segments, the reward model and the
teachers all work on one vector per step, so :class:`FlatGoalObservation` joins the three in
that order (:data:`GOAL_KEYS`): the desired goal is the last ``goal_size`` entries, where the
render path finds it again to draw the goal marker of each frame (the marker is not physics
state, so a segment's qpos/qvel alone would draw the env's current goal, not the segment's).

The env's success flag is kept as ``info["is_success"]`` (Fetch's name; PointMaze and AntMaze
call it ``success``), so the loop can report a success rate beside the return.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rlhf.core.shell import install_extra

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")
"""The order of the parts in a flattened observation."""

SUCCESS = "is_success"
"""Info key of the env's success flag after :class:`FlatGoalObservation`."""

GOAL_TASK = "Bring the agent (or the object it moves) to the red goal marker"
"""The page's task text for a goal env when the run gives none (--task): what a person would
otherwise have to guess. gymnasium-robotics draws every goal as a red ball or dot."""

_SUCCESS_ALIASES = ("success",)
"""Other names goal envs give the same flag (gymnasium-robotics' mazes)."""


ROBOTICS_IDS = (
    "PointMaze_",
    "AntMaze_",
    "Fetch",
    "HandManipulate",
    "HandReach",
    "AdroitHand",
    "FrankaKitchen",
)
"""Env id prefixes of gymnasium-robotics' envs: such an id is unknown to gymnasium until
gymnasium-robotics registers it, so without the goals extra it says which extra it needs."""


def goals_extra_missing(env_id: str) -> str:
    """One line: ``env_id`` needs the goals extra, and the command that installs it."""
    return f"{env_id} needs the goals extra (gymnasium-robotics): {install_extra('goals')}"


MUJOCO_3_ONLY = ("Fetch",)
"""Env id prefixes that need mujoco < 3.4: gymnasium-robotics 1.4.2's Fetch robots fail on mujoco
4.0.0 and 3.17.0 with an assertion in ``set_joint_qpos`` (a joint type it does not expect), and
run on 3.3.7."""
MUJOCO_FOR_FETCH = (3, 4)
"""The first mujoco release (major, minor) Fetch is refused on: the goals extra's bound."""


def goal_env_problem(env_id: str) -> str | None:
    """Why ``env_id`` cannot be made here, in one line (the goals extra is missing, or mujoco is
    too new for it), or None when it can."""
    try:
        version("gymnasium-robotics")
    except PackageNotFoundError:
        return goals_extra_missing(env_id)
    return mujoco_problem(env_id, mujoco_release())


def mujoco_release() -> tuple[int, int]:
    """The installed mujoco's (major, minor)."""
    import mujoco

    major, minor = mujoco.__version__.split(".")[:2]
    return int(major), int(minor)


def mujoco_problem(env_id: str, mujoco_release: tuple[int, int]) -> str | None:
    """Why ``env_id`` cannot run on this mujoco (major, minor), in one line (None: it can)."""
    if not env_id.startswith(MUJOCO_3_ONLY) or mujoco_release < MUJOCO_FOR_FETCH:
        return None
    return (
        f"{env_id} needs mujoco < 3.4 (gymnasium-robotics {_version('gymnasium-robotics')} fails"
        f" on mujoco {_version('mujoco')}); the goals extra pins mujoco < 3.4:"
        f" {install_extra('goals')}"
    )


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:  # the message must still be one line, not this error
        return "(not installed)"


def is_goal_space(space: gym.Space) -> bool:
    """A goal-conditioned env's observations: a dict of observation, achieved and desired goal."""
    return isinstance(space, gym.spaces.Dict) and set(GOAL_KEYS) <= set(space.spaces)


def goal_size(space: gym.Space) -> int:
    """Size of the desired goal of a goal space (0 for any other space)."""
    return int(np.prod(space["desired_goal"].shape)) if is_goal_space(space) else 0


class FlatGoalObservation(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """One vector per step: ``observation``, ``achieved_goal``, ``desired_goal`` joined in that
    order; ``info["is_success"]`` holds the env's success flag whatever it calls it. It records
    its constructor arguments (none), so ``env.spec`` rebuilds the wrapped stack."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.ObservationWrapper.__init__(self, env)
        space = env.observation_space
        if not is_goal_space(space):
            raise ValueError(f"not a goal-conditioned observation space: {space}")
        parts = [space[key] for key in GOAL_KEYS]
        self.sizes = tuple(int(np.prod(p.shape)) for p in parts)
        low = np.concatenate([np.broadcast_to(p.low, p.shape).ravel() for p in parts])
        high = np.concatenate([np.broadcast_to(p.high, p.shape).ravel() for p in parts])
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float64)

    @property
    def goal_size(self) -> int:
        return self.sizes[2]

    def observation(self, observation: dict[str, Any]) -> np.ndarray:
        return np.concatenate([np.asarray(observation[k], np.float64).ravel() for k in GOAL_KEYS])

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = super().reset(**kwargs)
        return obs, _with_success(info)

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, _with_success(info)


GoalRewardFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(achieved goals (B, g), desired goals (B, g)) -> rewards (B,)."""


def goal_reward_fn(env: gym.Env) -> GoalRewardFn | None:
    """The env's own reward of (achieved goals (B, g), desired goals (B, g)), from the
    unwrapped env's ``compute_reward`` (None: it has none). Hindsight relabelling scores
    relabelled goals with it exactly as the env would have."""
    compute = getattr(env.unwrapped, "compute_reward", None)
    if compute is None:
        return None
    return lambda achieved, desired: compute(achieved, desired, {})


def _with_success(info: dict[str, Any]) -> dict[str, Any]:
    if SUCCESS in info:
        return info
    for alias in _SUCCESS_ALIASES:
        if alias in info:
            return {**info, SUCCESS: bool(info[alias])}
    return info
