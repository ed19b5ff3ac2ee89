"""Making environments, and checking at start that a run can work with one.

Everything that can be known before training is checked here and refused in one line: an
unknown id (with the closest ids), keyword arguments the env does not take, discrete actions or
non-vector observations, and (for people labelling) an env whose clips cannot be drawn.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import io
import logging
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from rlhf.config import ConfigError
from rlhf.core.motion import motion_size
from rlhf.core.shell import program
from rlhf.envs.dmc import clip_problem, dmc_problem, episode_steps, is_dmc, register_dmc
from rlhf.envs.goals import (
    ROBOTICS_IDS,
    FlatGoalObservation,
    goals_extra_missing,
    is_goal_space,
    mujoco_problem,
    mujoco_release,
)
from rlhf.envs.state import (
    StateKind,
    mujoco_data,
    mujoco_sim,
    state_kind,
    state_sizes,
)
from rlhf.envs.targets import RunTarget
from rlhf.envs.wrappers import FixedHorizon, TargetReward


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
    """The environment id, its arguments or its spaces cannot be used; the message is one line."""


@dataclass(frozen=True)
class EnvInfo:
    """What a run needs to know about its env before it starts.

    Attributes:
        env_id: the gymnasium id.
        obs_dim: size of an observation vector.
        act_dim: size of an action vector.
        dt: simulated seconds per step (None when the env does not say).
        max_episode_steps: the time limit (None: none).
        state: which replayable state a segment records (see :mod:`rlhf.envs.state`).
        nq: size of the recorded position-like state per step.
        nv: size of the recorded velocity state per step.
        render_problem: why clips of this env cannot be drawn for a person (None: they can).
        goal_size: size of the desired goal that ends each observation of a goal-conditioned
            env (:mod:`rlhf.envs.goals`); 0 for any other env.
        motion_obs: how many leading observation entries are the robot's joint positions and
            velocities (:func:`rlhf.core.motion.motion_size`); None: the observation does not
            start with them.
    """

    env_id: str
    obs_dim: int
    act_dim: int
    dt: float | None
    max_episode_steps: int | None
    state: StateKind
    nq: int
    nv: int
    render_problem: str | None
    goal_size: int = 0
    motion_obs: int | None = None


def check_env_id(env_id: str) -> None:
    """Fail with a one-line message (and a suggestion) if ``env_id`` is not registered; a
    gymnasium-robotics id without gymnasium-robotics says how to install the goals extra, and a
    DeepMind Control id without the dmc extra (or on mujoco 4) the dmc extra."""
    if is_dmc(env_id):
        problem = dmc_problem(env_id, mujoco_release())
        if problem:
            raise EnvError(problem)
        register_dmc()
    if env_id in gym.registry:
        return
    if _register_robotics():
        if env_id in gym.registry:
            return
    elif env_id.startswith(ROBOTICS_IDS):
        raise EnvError(goals_extra_missing(env_id))
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise EnvError(f"unknown environment id {env_id!r}{hint}")


def _register_robotics() -> bool:
    """Register gymnasium-robotics' envs (PointMaze, Fetch ...) if it is installed: their ids
    are then known, so a run can say why it does not take them rather than not knowing them."""
    if importlib.util.find_spec("gymnasium_robotics") is None:
        return False
    # Its import prints a note about Adroit reward versions: not ours to show.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
    return True


def make_env(env_id: str, kwargs: dict[str, Any] | None = None, **extra: Any) -> gym.Env:
    """``gym.make(env_id, **kwargs, **extra)``; arguments the env does not take are one line.

    A goal-conditioned env comes flattened (:class:`rlhf.envs.goals.FlatGoalObservation`), and
    so does a DeepMind Control env (its dict of named parts joined in the space's key order).
    """
    check_env_id(env_id)
    problem = mujoco_problem(env_id, mujoco_release())
    if problem:  # it would fail later in an assertion, deep in its reset
        raise EnvError(problem)
    try:
        env = gym.make(env_id, **(kwargs or {}), **extra)
    except TypeError as exc:  # an unexpected keyword argument, or a wrong value type
        raise EnvError(f"--env-kwargs: {env_id} refused them ({exc})") from None
    if is_dmc(env_id):
        return gym.wrappers.FlattenObservation(env)
    return FlatGoalObservation(env) if is_goal_space(env.observation_space) else env


def with_target(env: gym.Env, target: RunTarget | None) -> gym.Env:
    """``env`` paying ``target``'s reward, the env's own kept in ``info["env_reward"]``
    (:class:`rlhf.envs.wrappers.TargetReward`); ``env`` itself when there is no target."""
    return env if target is None else TargetReward(env, target.fn, target.name)


def describe_env(env_id: str, kwargs: dict[str, Any] | None = None) -> EnvInfo:
    """Make the env once and report what a run needs; refuse envs rlhf cannot train on.

    Raises:
        EnvError: unknown id, refused kwargs, discrete actions or non-vector observations.
    """
    env = make_env(env_id, kwargs)
    try:
        _check_spaces(env_id, env.action_space, env.observation_space)
        obs, _ = env.reset(seed=0)
        kind = state_kind(env)
        data = mujoco_data(env) if kind is StateKind.MUJOCO else None
        motion = None if data is None else motion_size(obs, data.qpos, data.qvel)
        _first_step(env_id, env, kwargs)
        nq, nv = state_sizes(env)
        dt = getattr(mujoco_sim(env), "dt", None)
        if dt is None and env.metadata.get("render_fps"):
            dt = 1.0 / float(env.metadata["render_fps"])
        return EnvInfo(
            env_id=env_id,
            obs_dim=int(env.observation_space.shape[0]),
            act_dim=int(env.action_space.shape[0]),
            dt=float(dt) if dt else None,
            max_episode_steps=_episode_limit(env),
            state=kind,
            nq=nq,
            nv=nv,
            render_problem=_render_problem(env_id, env, kind),
            goal_size=env.goal_size if isinstance(env, FlatGoalObservation) else 0,
            motion_obs=motion,
        )
    finally:
        env.close()


def _episode_limit(env: gym.Env) -> int | None:
    """The time limit gymnasium's spec gives, or a DeepMind Control env's own (its spec has none:
    dm_control ends the episode itself)."""
    limit = env.spec.max_episode_steps if env.spec else None
    return limit if limit is not None else episode_steps(env)


def _first_step(env_id: str, env: gym.Env, kwargs: dict[str, Any] | None) -> None:
    """One step with a zero action: a keyword of the wrong type (``{"g": "x"}``) passes
    ``gym.make`` and only fails in the physics, which would be a traceback mid-run."""
    if not kwargs:
        return  # the env's own defaults: stepping it says nothing new and costs a step
    try:
        env.step(np.zeros(env.action_space.shape, env.action_space.dtype))
    except Exception as exc:  # any failure of the env's own code
        raise EnvError(f"--env-kwargs: {env_id} fails its first step with them ({exc})") from None


def _render_problem(env_id: str, env: gym.Env, kind: StateKind) -> str | None:
    if kind is StateKind.NONE:
        return f"{env_id} has no state that can be replayed to draw its clips"
    if is_dmc(env_id):
        return clip_problem(env_id)
    if "rgb_array" not in env.metadata.get("render_modes", []):
        return f"{env_id} cannot draw frames (no rgb_array render mode)"
    if kind is StateKind.CLASSIC and importlib.util.find_spec("pygame") is None:
        return f"{env_id} draws its frames with pygame, which is not installed ({program('pip')} install pygame)"
    return None


def _check_spaces(env_id: str, action: gym.Space, observation: gym.Space) -> None:
    if not isinstance(action, gym.spaces.Box):
        raise EnvError(f"{env_id} has {action}; rlhf needs continuous (Box) actions")
    if isinstance(observation, gym.spaces.Dict):  # goal envs arrive here flattened
        raise EnvError(
            f"{env_id} has dict observations with keys {sorted(observation.spaces)}; rlhf needs"
            " flat vectors, or a goal-conditioned dict (observation, achieved_goal, desired_goal)"
        )
    if not isinstance(observation, gym.spaces.Box) or len(observation.shape) != 1:
        raise EnvError(
            f"{env_id} has {observation} observations; rlhf needs flat vectors (a Box of rank 1)"
        )


def make_vec_env(
    env_id: str,
    num_envs: int,
    seed: int,
    kwargs: dict[str, Any] | None = None,
    fixed_horizon: bool = False,
    target: RunTarget | None = None,
) -> gym.vector.SyncVectorEnv:
    """A synchronous vector env with gymnasium's default next-step autoreset.

    No normalisation wrappers: the policy normalises its own observations and the reward model
    needs the raw ones, so the env hands out raw data only (which also keeps stepping fast).
    ``target`` pays its reward instead of the env's (:func:`with_target`); ``fixed_horizon``
    then wraps each env in :class:`FixedHorizon`.
    """

    def one() -> gym.Env:
        env = with_target(make_env(env_id, kwargs), target)
        return FixedHorizon(env) if fixed_horizon else env

    envs = gym.vector.SyncVectorEnv([one for _ in range(num_envs)])
    try:
        _check_spaces(env_id, envs.single_action_space, envs.single_observation_space)
    except EnvError:
        envs.close()
        raise
    envs.action_space.seed(seed)
    return envs
