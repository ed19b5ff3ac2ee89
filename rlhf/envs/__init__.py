"""Environments: making them (fixed-horizon if asked), describing them, recording their state."""

from rlhf.envs.goals import FlatGoalObservation, goal_size, is_goal_space
from rlhf.envs.make import (
    EnvError,
    EnvInfo,
    check_env_id,
    describe_env,
    make_env,
    make_vec_env,
    quiet_mujoco_warnings,
)
from rlhf.envs.state import StateKind, StateRecorder
from rlhf.envs.wrappers import ENDED, FixedHorizon

__all__ = [
    "ENDED",
    "EnvError",
    "EnvInfo",
    "FixedHorizon",
    "FlatGoalObservation",
    "StateKind",
    "StateRecorder",
    "check_env_id",
    "describe_env",
    "goal_size",
    "is_goal_space",
    "make_env",
    "make_vec_env",
    "quiet_mujoco_warnings",
]
