"""Target behaviours (``--teacher.target NAME``): rewards for what the env's reward does not ask.

Each target is a per-step reward of the physics state after the step and the action, vectorised
over a leading batch axis::

    f(obs, action, next_obs, qpos, qvel) -> rewards, shape (B,)

``qpos``/``qvel`` are MuJoCo's ``data.qpos``/``data.qvel`` *after* the step (B, nq)/(B, nv);
``obs`` and ``next_obs`` are the observations before and after it. A run with a target reports
and teaches with it instead of the env's reward (:class:`rlhf.envs.wrappers.TargetReward`).

What the formulas read (gymnasium v5 models, their default settings):

* ``v = qvel[0]``: forward velocity of the root in m/s (the ``rootx`` slide of HalfCheetah,
  Hopper and Walker2d; the free joint's world-frame x velocity of Ant; ``slider1`` of Swimmer).
* ``h``: torso height above the ground in m: ``qpos[1]`` for Hopper and Walker2d (their ``rootz``
  has ``ref=1.25``), ``qpos[1] + 0.7`` for HalfCheetah (its ``rootz`` is 0 with the torso at
  0.7 m), ``qpos[2]`` for Ant (the free joint's z).
* ``vz = qvel[1]``: vertical velocity of the planar robots' torso (``rootz``).
* ``w = qvel[2]``: pitch rate of the planar robots (``rooty``, axis +y): positive turns the front
  down (a front flip), so ``-w`` is the backward rotation of a backflip.
* ``alive``: 1 while the robot is healthy by its env's own rule (Hopper: h > 0.7, |qpos[2]| < 0.2,
  every |qpos[2:]|, |qvel| < 100; Walker2d: 0.8 < h < 2, |qpos[2]| < 1; Ant: 0.2 <= h <= 1 and a
  finite state), else 0; always 0 for HalfCheetah and Swimmer, which never fall. It is the env's
  healthy reward: positive while upright, so ending an episode early never pays.
* ``ctrl = c * |a|^2`` with the env's default ``ctrl_cost_weight`` c (HalfCheetah 0.1, Hopper and
  Walker2d 0.001, Ant 0.5, Swimmer 0.0001), so flailing is not free.

Every term is clipped, so a step's reward is bounded whatever the physics does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlhf.config import ConfigError, flag
from rlhf.config.presets import family

TargetFn = Callable[..., np.ndarray]
"""``f(obs=, action=, next_obs=, qpos=, qvel=) -> (B,)``: a target, or a user's own function."""


def _never_falls(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return np.zeros(len(qpos))


def _hopper_alive(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    z, angle = qpos[:, 1], qpos[:, 2]
    state = np.concatenate([qpos[:, 2:], qvel], axis=1)  # state_vector()[2:]
    ok = (z > 0.7) & (angle > -0.2) & (angle < 0.2) & np.all(np.abs(state) < 100.0, axis=1)
    return ok.astype(np.float64)


def _walker_alive(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    z, angle = qpos[:, 1], qpos[:, 2]
    return ((z > 0.8) & (z < 2.0) & (angle > -1.0) & (angle < 1.0)).astype(np.float64)


def _ant_alive(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    finite = np.all(np.isfinite(qpos), axis=1) & np.all(np.isfinite(qvel), axis=1)
    z = qpos[:, 2]
    return (finite & (z >= 0.2) & (z <= 1.0)).astype(np.float64)


@dataclass(frozen=True)
class Body:
    """What the targets read of one robot family (gymnasium v5 defaults)."""

    height: int
    """Index of the torso height in qpos."""
    height_offset: float
    """Added to ``qpos[height]`` to give the torso height above the ground (m)."""
    stand: float
    """Torso height of the reset pose (m)."""
    ctrl_weight: float
    """The env's default ``ctrl_cost_weight``."""
    alive: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """1.0 per row while healthy by the env's rule, else 0.0 (0.0 always for a robot that never
    falls)."""
    speed: float = 1.0
    """The ``speed`` target's v* (m/s)."""
    low: float = 0.0
    """The ``crawl`` target's highest torso height without a penalty (m)."""

    def h(self, qpos: np.ndarray) -> np.ndarray:
        return qpos[:, self.height] + self.height_offset

    def ctrl(self, action: np.ndarray) -> np.ndarray:
        return self.ctrl_weight * np.sum(np.square(action), axis=1)


BODIES: dict[str, Body] = {
    "HalfCheetah": Body(1, 0.7, 0.7, 0.1, _never_falls, low=0.55),
    "Hopper": Body(1, 0.0, 1.25, 1e-3, _hopper_alive),
    "Walker2d": Body(1, 0.0, 1.25, 1e-3, _walker_alive, low=1.0),
    "Ant": Body(2, 0.0, 0.75, 0.5, _ant_alive, low=0.45),
    "Swimmer": Body(0, 0.0, 0.0, 1e-4, _never_falls, speed=0.3),
}
"""By env family (:func:`rlhf.config.presets.family`)."""


# Each term: (body, action, qpos, qvel) -> (B,). obs and next_obs are not needed by any of them.
Term = Callable[[Body, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _speed(b: Body, a: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return b.alive(qpos, qvel) - np.minimum(np.abs(qvel[:, 0] - b.speed), 2.0) - b.ctrl(a)


def _backward(b: Body, a: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return b.alive(qpos, qvel) + np.clip(-qvel[:, 0], -10.0, 10.0) - b.ctrl(a)


def _stand(b: Body, a: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return b.alive(qpos, qvel) - np.minimum(np.abs(qvel[:, 0]), 1.0) - b.ctrl(a)


def _hop(b: Body, a: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    bounce = np.minimum(np.abs(qvel[:, 1]), 2.0) - np.minimum(np.abs(qvel[:, 0]), 2.0)
    return b.alive(qpos, qvel) + bounce - b.ctrl(a)


def _jump(b: Body, a: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    height = 10.0 * np.clip(b.h(qpos) - b.stand, -0.5, 1.0)
    return b.alive(qpos, qvel) + height - b.ctrl(a)


def _backflip(b: Body, a: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return np.clip(-qvel[:, 2], -10.0, 10.0) - b.ctrl(a)


def _crawl(b: Body, a: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    over = np.clip(b.h(qpos) - b.low, 0.0, 1.0)
    forward = np.clip(qvel[:, 0], -10.0, 10.0)
    return b.alive(qpos, qvel) + forward - 10.0 * over - b.ctrl(a)


@dataclass(frozen=True)
class Target:
    """One entry of the catalogue."""

    name: str
    about: str
    """What it asks for, in words."""
    formula: str
    """The per-step reward (the module docstring says what each symbol reads)."""
    families: tuple[str, ...]
    term: Term


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "speed", "move forward at a steady v* (1 m/s; Swimmer 0.3 m/s)",
            "alive - min(abs(v - v*), 2) - ctrl",
            ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Swimmer"), _speed,
        ),
        Target(
            "backward", "run backwards, as fast as it can",
            "alive + clip(-v, -10, 10) - ctrl",
            ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Swimmer"), _backward,
        ),
        Target(
            "stand", "stay upright without travelling",
            "alive - min(abs(v), 1) - ctrl", ("Hopper", "Walker2d"), _stand,
        ),
        Target(
            "hop", "hop in place: move up and down, not along",
            "alive + min(abs(vz), 2) - min(abs(v), 2) - ctrl", ("Hopper", "Walker2d"), _hop,
        ),
        Target(
            "jump", "lift the torso above its standing height (0.7 m; Hopper, Walker2d 1.25 m)",
            "alive + 10 * clip(h - h_stand, -0.5, 1) - ctrl",
            ("HalfCheetah", "Hopper", "Walker2d"), _jump,
        ),
        Target(
            "backflip", "rotate backwards (nose up and over)",
            "clip(-w, -10, 10) - ctrl", ("HalfCheetah", "Hopper"), _backflip,
        ),
        Target(
            "crawl", "move forward with the torso low (below 0.55 m; Walker2d 1.0 m, Ant 0.45 m)",
            "alive + clip(v, -10, 10) - 10 * clip(h - h_low, 0, 1) - ctrl",
            ("HalfCheetah", "Walker2d", "Ant"), _crawl,
        ),
    )
}  # fmt: skip
"""The catalogue, by name."""


@dataclass(frozen=True)
class RunTarget:
    """The target a run reports and teaches with (:mod:`rlhf.envs.user_reward` resolves it)."""

    name: str
    """The catalogue's name, or ``MODULE:FUNCTION`` as given."""
    fn: TargetFn


def target_names(env_id: str) -> list[str]:
    """The targets defined for ``env_id``'s family, sorted."""
    fam = family(env_id)
    return sorted(name for name, t in TARGETS.items() if fam in t.families)


def target_fn(name: str, env_id: str) -> TargetFn:
    """The catalogue's ``name`` for ``env_id`` as ``f(obs, action, next_obs, qpos, qvel)``.

    Raises:
        ConfigError: one line naming ``--teacher.target`` and the names valid for ``env_id``.
    """
    option, valid = flag("teacher.target"), target_names(env_id)
    if not valid:
        robots = ", ".join(BODIES)
        raise ConfigError(
            f"{option} {name}: {env_id} has no target behaviours (they are defined for {robots});"
            f" write your own with {flag('teacher.reward')} MODULE:FUNCTION"
        )
    target = TARGETS.get(name)
    if target is None or family(env_id) not in target.families:
        where = "" if target is None else f" (it is for {', '.join(target.families)})"
        unknown = "unknown target" if target is None else "not a target for " + env_id
        raise ConfigError(f"{option} {name}: {unknown}{where}; choose one of: {', '.join(valid)}")
    body, term = BODIES[family(env_id)], target.term

    def reward(
        obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray, qpos: np.ndarray,
        qvel: np.ndarray,
    ) -> np.ndarray:  # fmt: skip
        return term(body, np.asarray(action, np.float64), np.asarray(qpos), np.asarray(qvel))

    reward.__name__ = reward.__qualname__ = name
    return reward
