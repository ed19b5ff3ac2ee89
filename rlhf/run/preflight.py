"""Before a run makes anything: what it will train on, and what can never work, said in one line.

:func:`preflight` describes the env and resolves the settings that depend on it (the segment
length in steps, whether episodes run to a fixed horizon). A configuration that could never
produce a query or show a clip is refused here, before a run directory exists, rather than after
an hour of training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlhf.config import Config, ConfigError, flag
from rlhf.envs import EnvInfo, describe_env, make_env
from rlhf.envs.dmc import is_dmc
from rlhf.envs.goals import goal_reward_fn
from rlhf.envs.state import StateKind
from rlhf.envs.targets import RunTarget
from rlhf.envs.user_reward import resolve_target

DEFAULT_SEGMENT_STEPS = 50
"""Segment length for the synthetic teacher (and for people, on an env without a step length)."""


@dataclass(frozen=True)
class RunPlan:
    """Settings of a run that follow from its config and its env.

    Attributes:
        env: what the env is (sizes, step length, time limit, replayable state).
        segment_length: steps per segment.
        terminations: absorbing, fixed-horizon or standard (see ``--terminations``).
        target: the target behaviour that replaces the env's reward (``--teacher.target`` or
            ``--teacher.reward``), loaded and checked; None: the env's own reward.
    """

    env: EnvInfo
    segment_length: int
    terminations: str
    target: RunTarget | None = None

    @property
    def fixed_horizon(self) -> bool:
        """Episodes run to the time limit (see :class:`rlhf.envs.FixedHorizon`)."""
        return self.terminations == "fixed-horizon"

    @property
    def absorbing(self) -> bool:
        """Terminated episodes end in the learned absorbing state (see :mod:`rlhf.queries.segments`)."""
        return self.terminations == "absorbing"

    @property
    def segment_seconds(self) -> float | None:
        return None if self.env.dt is None else self.segment_length * self.env.dt


def preflight(cfg: Config) -> RunPlan:
    """Describe the env, resolve env-dependent settings, and refuse what cannot work.

    Raises:
        ConfigError: one line naming the flag to change.
    """
    _check_env_kwargs(cfg.env_kwargs_dict())
    env = describe_env(cfg.env_id, cfg.env_kwargs_dict())
    teacher = cfg.teacher
    target = resolve_target(teacher.target, teacher.reward, cfg.env_id, cfg.env_kwargs_dict())
    plan = RunPlan(env, _segment_length(cfg, env), cfg.termination_mode, target)
    if cfg.sac.her:
        _check_her(cfg, env)
    if cfg.reward != "learned" or cfg.reward_model_file is not None:  # no label is asked
        return plan
    if cfg.query.total_labels == 0:
        raise ConfigError(
            f"{flag('query.total_labels')} is 0, so the learned reward would never be trained:"
            f" raise it, or train on the env's reward with {flag('reward')} env"
        )
    if cfg.query.replay_share:
        _check_replays(cfg, env, plan)
    if cfg.feedback == "human" and env.render_problem is not None:
        raise ConfigError(
            f"{env.render_problem}, so its pairs cannot be shown to a person;"
            f" use {flag('feedback')} synthetic"
        )
    return plan


def _check_env_kwargs(kwargs: dict[str, Any]) -> None:
    """A NaN or an infinity in ``--env-kwargs`` (JSON takes ``NaN`` and ``Infinity``) makes an
    env that answers NaN: refused here, not found in a segment's return later."""
    for key, value in _numbers(kwargs):
        if not math.isfinite(value):
            raise ConfigError(f"{flag('env_kwargs')}: {key} is {value}; give a finite number")


def _numbers(obj: Any, where: str = "") -> list[tuple[str, float]]:
    """The floats in a JSON value, each with where it is (``a.b[2]``)."""
    if isinstance(obj, dict):
        return [n for k, v in obj.items() for n in _numbers(v, f"{where}.{k}" if where else k)]
    if isinstance(obj, list):
        return [n for i, v in enumerate(obj) for n in _numbers(v, f"{where}[{i}]")]
    return [(where, obj)] if isinstance(obj, float) else []


def _check_replays(cfg: Config, env: EnvInfo, plan: RunPlan) -> None:
    """Replayed pairs set a MuJoCo state, add PPO's noise, and pad early ends as segments do."""
    share = flag("query.replay_share")
    if cfg.algo != "ppo":
        raise ConfigError(f"{share} works with {flag('algo')} ppo only")
    if env.state is not StateKind.MUJOCO:
        raise ConfigError(
            f"{share} needs a MuJoCo env (its state is set to replay); {env.env_id} is not one"
        )
    if is_dmc(env.env_id):  # dm_control's env has no set_state/_get_obs to replay from
        raise ConfigError(
            f"{share} needs a gymnasium MuJoCo env (its state is set to replay);"
            f" {env.env_id} is DeepMind Control's"
        )
    if plan.terminations == "standard":
        raise ConfigError(f"{share} needs {flag('terminations')} absorbing or fixed-horizon")


def _check_her(cfg: Config, env: EnvInfo) -> None:
    """Hindsight relabelling rewrites a desired goal: the env must have one (and, to score a
    relabelled goal with the env's reward, its ``compute_reward``)."""
    if env.goal_size == 0:
        raise ConfigError(
            f"{flag('sac.her')} needs a goal-conditioned env (dict observations with"
            f" observation, achieved_goal, desired_goal); {env.env_id} has none"
        )
    if cfg.reward == "env":
        made = make_env(cfg.env_id, cfg.env_kwargs_dict())
        try:
            has_reward = goal_reward_fn(made) is not None
        finally:
            made.close()
        if not has_reward:
            raise ConfigError(
                f"{flag('sac.her')} with {flag('reward')} env needs the env's"
                f" compute_reward(achieved_goal, desired_goal, info); {env.env_id} has none"
            )


def _segment_length(cfg: Config, env: EnvInfo) -> int:
    """Steps per segment: given, or from seconds; never longer than an episode or a rollout."""
    limits = {f"an episode of {env.env_id}": env.max_episode_steps}
    # Segments are cut from one rollout, so a longer one could never be cut.
    if cfg.algo == "sac":
        steps = cfg.sac.iteration_steps
        limits[f"an iteration ({flag('sac.iteration_steps')} {steps})"] = steps
    else:
        limits[f"a rollout ({flag('ppo.num_steps')} {cfg.ppo.num_steps})"] = cfg.ppo.num_steps
    given = cfg.query.segment_length
    if given is not None:
        for what, limit in limits.items():
            if limit is not None and given > limit:
                raise ConfigError(
                    f"{flag('query.segment_length')} {given} is longer than {what}:"
                    f" choose at most {limit} steps"
                )
        return given
    steps = DEFAULT_SEGMENT_STEPS
    if cfg.feedback == "human" and env.dt is not None:  # a clip a person can judge
        steps = max(1, round(cfg.query.segment_seconds / env.dt))
    return min([steps, *(limit for limit in limits.values() if limit is not None)])
