"""Environments: making them (fixed-horizon, paying a target's reward if asked), describing them,
recording their state; the target behaviours (:mod:`rlhf.envs.targets`,
:mod:`rlhf.envs.user_reward`)."""

from rlhf.envs.goals import FlatGoalObservation, goal_size, is_goal_space
from rlhf.envs.make import (
    EnvError,
    EnvInfo,
    check_env_id,
    describe_env,
    make_env,
    make_vec_env,
    quiet_mujoco_warnings,
    with_target,
)
from rlhf.envs.state import StateKind, StateRecorder
from rlhf.envs.wrappers import ENDED, ENV_REWARD, FixedHorizon, TargetReward

__all__ = [
    "ENDED",
    "ENV_REWARD",
    "EnvError",
    "EnvInfo",
    "FixedHorizon",
    "FlatGoalObservation",
    "StateKind",
    "StateRecorder",
    "TargetReward",
    "check_env_id",
    "describe_env",
    "goal_size",
    "is_goal_space",
    "make_env",
    "make_vec_env",
    "quiet_mujoco_warnings",
    "with_target",
]
