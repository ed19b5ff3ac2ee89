"""DeepMind Control's suite (``dm_control/walker-walk-v0`` ...) as flat-vector gymnasium envs.

Shimmy registers each suite task as ``dm_control/<domain>-<task>-v0`` (on ``import shimmy``). Its
envs observe a dict of named parts (walker: ``height``, ``orientations``, ``velocity``):
gymnasium's :class:`~gymnasium.wrappers.FlattenObservation` joins them in the space's (sorted)
key order, so the agent, the segments and the reward model see one vector per step like any
other env. The physics is dm_control's (``env.unwrapped.physics``), whose ``data.qpos`` and
``data.qvel`` are what a segment records; a clip sets them back and renders with dm_control's
own renderer (:mod:`rlhf.render.dmc`).

The extra (``dmc``) pins mujoco < 4: dm-control 1.0.50, the newest, fails on mujoco 4.0.0
(``'MjModel' object has no attribute 'flex_vertedge'``) and runs on 3.17.0. Without the extra, or
on mujoco 4, a ``dm_control/`` id is refused in one line that says how to install it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import re
from importlib.metadata import PackageNotFoundError, version

import gymnasium as gym

from rlhf.core.shell import install_extra

PREFIX = "dm_control/"
"""The namespace shimmy registers DeepMind Control's envs under."""

MUJOCO_FOR_DMC = (4, 0)
"""The first mujoco release (major, minor) dm-control 1.0.50 fails on: the dmc extra's bound."""

_SUITE_ID = re.compile(r"^dm_control/(?P<domain>[A-Za-z_]+)-(?P<task>[A-Za-z0-9_]+)-v0$")

CLIP_TASKS = frozenset(
    {
        *(
            f"{domain}-*"
            for domain in (
                "acrobot",
                "ball_in_cup",
                "cartpole",
                "cheetah",
                "hopper",
                "humanoid",
                "humanoid_CMU",
                "pendulum",
                "point_mass",
                "walker",
            )
        ),
        "finger-spin",
        "fish-upright",
        "quadruped-walk",
        "quadruped-run",
    }
)
"""Tasks whose picture is their physics state: every other task moves something at each reset
outside qpos/qvel (reacher's, swimmer's, fish-swim's and finger-turn's targets, manipulator's
and stacker's target objects, quadruped-escape's terrain), so a clip drawn from a segment's
recorded state would show the wrong target; those train on synthetic feedback only."""


def is_dmc(env_id: str) -> bool:
    """``env_id`` names a DeepMind Control env (shimmy's namespace)."""
    return env_id.startswith(PREFIX)


def suite_task(env_id: str) -> tuple[str, str] | None:
    """(domain, task) of a suite id (``dm_control/walker-walk-v0`` -> walker, walk); None for
    any other id (shimmy's composer envs: locomotion and manipulation)."""
    match = _SUITE_ID.match(env_id)
    return (match["domain"], match["task"]) if match else None


def dmc_extra_missing(env_id: str) -> str:
    """One line: ``env_id`` needs the dmc extra, and the command that installs it."""
    return f"{env_id} needs the dmc extra (shimmy, dm-control): {install_extra('dmc')}"


def dmc_problem(env_id: str, mujoco_release: tuple[int, int]) -> str | None:
    """Why the DeepMind Control env ``env_id`` cannot be made here, in one line (the extra is
    missing, mujoco is too new for dm-control, or the id is not one of the suite's tasks); None
    when it can."""
    if importlib.util.find_spec("shimmy") is None or importlib.util.find_spec("dm_control") is None:
        return dmc_extra_missing(env_id)
    if mujoco_release >= MUJOCO_FOR_DMC:
        return (
            f"{env_id} needs mujoco < 4 (dm-control {_version('dm-control')} fails on mujoco"
            f" {_version('mujoco')}); the dmc extra pins mujoco < 4: {install_extra('dmc')}"
        )
    if suite_task(env_id) is None:
        return (
            f"{env_id} is not a task of DeepMind Control's suite; rlhf takes"
            " dm_control/<domain>-<task>-v0 (walker-walk, cheetah-run, quadruped-walk ...)"
        )
    return None


def register_dmc() -> None:
    """Register shimmy's ``dm_control/`` ids (``import shimmy`` does; about a second, so only
    for a run that asks for one)."""
    absl = logging.getLogger("absl")
    if _deprecation_notes not in absl.filters:
        absl.addFilter(_deprecation_notes)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import shimmy

        gym.register_envs(shimmy)


def _deprecation_notes(record: logging.LogRecord) -> bool:
    """Drop dm_control's warning that the suite's model files use deprecated attributes (cheetah's
    ``settotalmass``), logged at each env creation: not the user's to act on."""
    return "is deprecated" not in record.getMessage()


def clip_problem(env_id: str) -> str | None:
    """Why clips of ``env_id`` cannot be drawn from recorded state (None: they can)."""
    domain, task = suite_task(env_id) or ("", "")
    if f"{domain}-*" in CLIP_TASKS or f"{domain}-{task}" in CLIP_TASKS:
        return None
    return (
        f"{env_id} changes its scene at each reset outside the recorded physics state (a"
        " target's place, the terrain): its clips cannot be drawn"
    )


def episode_steps(env: gym.Env) -> int | None:
    """Steps in an episode of a suite env: dm_control ends it itself (at 1,000 steps for every
    suite task), so the gymnasium spec has no time limit to say so."""
    limit = getattr(env.unwrapped, "_step_limit", None)  # dm_control's control.Environment
    return int(limit) if limit is not None and limit != float("inf") else None


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:  # the message must still be one line, not this error
        return "(not installed)"
