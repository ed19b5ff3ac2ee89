"""A run's target behaviour: a name of the catalogue (``--teacher.target``,
:mod:`rlhf.envs.targets`) or a user's own function (``--teacher.reward MODULE:FUNCTION``), loaded and checked before the run
directory is made, every failure one line.

MODULE is a module importable from ``PYTHONPATH`` (``mypkg.rewards:speed``) or a Python file
(``path/to/rewards.py:speed``: a path that ends in ``.py`` or holds a ``/``). FUNCTION is called
as ``FUNCTION(obs=, action=, next_obs=, qpos=, qvel=)`` with arrays of a leading batch axis (the
physics state after the step) and returns one finite reward per row, shape (B,).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from rlhf.config import ConfigError, flag
from rlhf.envs.make import make_env
from rlhf.envs.state import StateKind, state_kind
from rlhf.envs.targets import RunTarget, TargetFn, target_fn
from rlhf.envs.wrappers import physics_state

ARGUMENTS = ("obs", "action", "next_obs", "qpos", "qvel")
"""The keyword arguments a target is called with."""


def resolve_target(
    target: str | None, reward: str | None, env_id: str, kwargs: dict[str, Any] | None = None
) -> RunTarget | None:
    """The run's target (None when neither flag is set), called once on two steps of the env.

    Raises:
        ConfigError: one line naming the flag, for everything that would fail later.
    """
    if target is None and reward is None:
        return None
    if target is not None and reward is not None:
        raise ConfigError(f"{flag('teacher.target')} and {flag('teacher.reward')}: choose one")
    if target is not None:
        run_target = RunTarget(target, target_fn(target, env_id))
        option = flag("teacher.target")
    else:
        assert reward is not None
        run_target = RunTarget(reward, load_reward(reward))
        option = flag("teacher.reward")
    check_reward(run_target, option, env_id, kwargs)
    return run_target


def split_spec(spec: str) -> tuple[str, str]:
    """``MODULE:FUNCTION`` -> (MODULE, FUNCTION); a one-line ConfigError if it is not that."""
    module, _, name = spec.rpartition(":")
    if not module or not name.isidentifier():
        raise ConfigError(
            f"{flag('teacher.reward')} must be MODULE:FUNCTION (e.g. mypkg.rewards:speed or"
            f" path/to/rewards.py:speed); got {spec!r}"
        )
    return module, name


def is_file(module: str) -> bool:
    """Does MODULE name a file (it ends in ``.py`` or holds a path separator)?"""
    return module.endswith(".py") or "/" in module or "\\" in module


def load_reward(spec: str) -> TargetFn:
    """Import ``MODULE:FUNCTION`` and return the function; one-line ConfigErrors."""
    option = flag("teacher.reward")
    module_name, name = split_spec(spec)
    module = _import_file(module_name) if is_file(module_name) else _import_module(module_name)
    if not hasattr(module, name):
        raise ConfigError(f"{option} {spec}: {module_name} has no attribute {name!r}")
    fn = getattr(module, name)
    if not callable(fn):
        raise ConfigError(
            f"{option} {spec}: {name} is not callable (its type is {type(fn).__name__})"
        )
    return fn


def _import_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"{flag('teacher.reward')}: cannot import {name} ({exc}); is it on PYTHONPATH?"
        ) from None
    except Exception as exc:
        raise _import_error(name, exc) from None


def _import_file(path: str) -> ModuleType:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"{flag('teacher.reward')}: no such file {path}")
    key = f"rlhf_user_reward_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(key, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{flag('teacher.reward')}: {path} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # so what it defines (dataclasses, pickles) can find its module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[key]
        raise _import_error(path, exc) from None
    return module


def _import_error(name: str, exc: BaseException) -> ConfigError:
    option = flag("teacher.reward")
    if isinstance(exc, SyntaxError):
        where = f"line {exc.lineno}" if exc.lineno else "somewhere"
        return ConfigError(f"{option}: {name} has a syntax error at {where} ({exc.msg})")
    return ConfigError(f"{option}: importing {name} raised {_one_line(exc)}")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_reward(
    target: RunTarget, option: str, env_id: str, kwargs: dict[str, Any] | None = None
) -> None:
    """Call ``target`` once on two steps of a fresh ``env_id`` (from a seeded reset, seeded
    random actions): it must take the keyword arguments and return two finite rewards."""
    fn, said = target.fn, f"{option} {target.name}"
    try:
        inspect.signature(fn).bind(**dict.fromkeys(ARGUMENTS))
    except TypeError as exc:
        raise ConfigError(
            f"{said} must accept the keyword arguments {', '.join(ARGUMENTS)} ({exc})"
        ) from None
    except ValueError:  # no signature to read (some builtins): the call below tells
        pass
    batch = _two_steps(env_id, kwargs, said)
    try:
        value = np.asarray(fn(**batch))
    except Exception as exc:
        raise ConfigError(f"{said} raised {_one_line(exc)} on two steps of {env_id}") from None
    if value.shape != (2,):
        raise ConfigError(
            f"{said} returned shape {value.shape} for a batch of 2 steps; it must return one"
            " reward per row, shape (B,)"
        )
    if value.dtype.kind not in "fiub" or not np.isfinite(value.astype(np.float64)).all():
        raise ConfigError(
            f"{said} returned {value.tolist()!r} for 2 steps; rewards must be finite numbers"
        )


def _two_steps(env_id: str, kwargs: dict[str, Any] | None, said: str) -> dict[str, np.ndarray]:
    """The keyword arguments of two steps of ``env_id`` from a reset, as a batch of 2 rows."""
    env = make_env(env_id, kwargs)
    try:
        obs, _ = env.reset(seed=0)
        if state_kind(env) is StateKind.NONE:
            raise ConfigError(f"{said}: {env_id} has no physics state (qpos, qvel) to reward")
        env.action_space.seed(0)
        rows: dict[str, list[np.ndarray]] = {name: [] for name in ARGUMENTS}
        for _ in range(2):
            action = env.action_space.sample()
            next_obs, *_ = env.step(action)
            qpos, qvel = physics_state(env)
            for name, value in zip(ARGUMENTS, (obs, action, next_obs, qpos, qvel), strict=True):
                rows[name].append(np.asarray(value))
            obs = next_obs
        return {name: np.stack(values) for name, values in rows.items()}
    finally:
        env.close()
