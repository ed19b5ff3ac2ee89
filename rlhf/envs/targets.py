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
  finite state), else 0; always 0 for HalfCheetah and Swimmer, which never fall.
* ``ctrl = c * |clip(a, -1, 1)|^2`` with the env's default ``ctrl_cost_weight`` c (HalfCheetah
  0.1, Hopper and Walker2d 0.001, Ant 0.5, Swimmer 0.0001), so flailing is not free. Every robot's
  actions lie in [-1, 1] (MuJoCo clamps its controls there), so ctrl is at most ``C = c * n``
  with n actuators: HalfCheetah 0.6, Hopper 0.003, Walker2d 0.006, Ant 4, Swimmer 0.0002.

Every term is clipped, so a step's reward is bounded whatever the physics does.

**Ending must never pay.** Hopper, Walker2d and Ant end their episode when they fall, and an
ended episode earns nothing more. A per-step reward that can be negative while the robot is up
teaches it to fall: true-reward PPO on ``alive - min(|v - 1|, 2)`` on Walker2d, where standing
still earns 0 and anything slower less, still fell after 94 steps (of 1000) at 300k steps;
with the weight below it stays up for 876.
That is why gymnasium pays these robots a healthy reward. So every target with an ``alive`` term
weights it by ``1 + F + C``, where F is the most the target's other terms can take away in a
step (their clips' lower bounds) and C the most ctrl can: a step alive earns at least 1 whatever
the robot does, more than ending. On a healthy robot this adds a constant, so what the target
asks for, the best state and the order of any two, does not move; HalfCheetah and Swimmer never
fall (``alive`` is 0), so their rewards are the behaviour's terms alone. ``backflip`` has no
``alive`` term: a flip leaves the healthy range (Hopper's pitch must stay within 0.2 rad), so
weighting it would pay the robot not to flip; it is taught with ``--terminations
fixed-horizon``, where no episode ends early and so ending cannot pay.
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
    actuators: int
    """How many controls an action has (each in [-1, 1])."""
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
        # MuJoCo clamps the controls to [-1, 1], so that is the robot's effort; clipping also
        # bounds ctrl by ctrl_most, which the alive weight relies on.
        return self.ctrl_weight * np.sum(np.square(np.clip(action, -1.0, 1.0)), axis=1)

    @property
    def ctrl_most(self) -> float:
        """C: the most ``ctrl`` takes in a step."""
        return self.ctrl_weight * self.actuators


BODIES: dict[str, Body] = {
    "HalfCheetah": Body(1, 0.7, 0.7, 0.1, 6, _never_falls, low=0.55),
    "Hopper": Body(1, 0.0, 1.25, 1e-3, 3, _hopper_alive),
    "Walker2d": Body(1, 0.0, 1.25, 1e-3, 6, _walker_alive, low=1.0),
    "Ant": Body(2, 0.0, 0.75, 0.5, 8, _ant_alive, low=0.45),
    "Swimmer": Body(0, 0.0, 0.0, 1e-4, 2, _never_falls, speed=0.3),
}
"""By env family (:func:`rlhf.config.presets.family`)."""


# A behaviour's terms, without alive and ctrl: (body, qpos, qvel) -> (B,). obs, next_obs and the
# action are not needed by any of them.
Term = Callable[[Body, np.ndarray, np.ndarray], np.ndarray]


def _speed(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return -np.minimum(np.abs(qvel[:, 0] - b.speed), 2.0)


def _backward(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return np.clip(-qvel[:, 0], -10.0, 10.0)


def _stand(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return -np.minimum(np.abs(qvel[:, 0]), 1.0)


def _hop(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return np.minimum(np.abs(qvel[:, 1]), 2.0) - np.minimum(np.abs(qvel[:, 0]), 2.0)


def _jump(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return 10.0 * np.clip(b.h(qpos) - b.stand, -0.5, 1.0)


def _backflip(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return np.clip(-qvel[:, 2], -10.0, 10.0)


def _crawl(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return np.clip(qvel[:, 0], -10.0, 10.0) - 10.0 * np.clip(b.h(qpos) - b.low, 0.0, 1.0)


@dataclass(frozen=True)
class Target:
    """One entry of the catalogue."""

    name: str
    about: str
    """What it asks for, in words."""
    behaviour: str
    """Its terms besides alive and ctrl, each with its sign (the module docstring says what each
    symbol reads)."""
    floor: float | None
    """F: the most ``behaviour`` can take away in a step (its clips' lower bounds), so that
    ``alive`` weighs ``1 + F + C``; None: no alive term (``backflip``)."""
    families: tuple[str, ...]
    term: Term

    @property
    def formula(self) -> str:
        """The per-step reward, with C the most ctrl takes in a step (c x the actuators)."""
        if self.floor is None:
            return f"{self.behaviour.removeprefix('+ ')} - ctrl"
        return f"({1 + self.floor:g} + C) * alive {self.behaviour} - ctrl"


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "speed", "move forward at a steady v* (1 m/s; Swimmer 0.3 m/s)",
            "- min(abs(v - v*), 2)", 2.0,
            ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Swimmer"), _speed,
        ),
        Target(
            "backward", "run backwards, as fast as it can", "+ clip(-v, -10, 10)", 10.0,
            ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Swimmer"), _backward,
        ),
        Target(
            "stand", "stay upright without travelling", "- min(abs(v), 1)", 1.0,
            ("Hopper", "Walker2d"), _stand,
        ),
        Target(
            "hop", "hop in place: move up and down, not along",
            "+ min(abs(vz), 2) - min(abs(v), 2)", 2.0, ("Hopper", "Walker2d"), _hop,
        ),
        Target(
            "jump", "lift the torso above its standing height (0.7 m; Hopper, Walker2d 1.25 m)",
            "+ 10 * clip(h - h_stand, -0.5, 1)", 5.0, ("HalfCheetah", "Hopper", "Walker2d"), _jump,
        ),
        Target(
            "backflip", "rotate backwards (nose up and over)", "+ clip(-w, -10, 10)", None,
            ("HalfCheetah", "Hopper"), _backflip,
        ),
        Target(
            "crawl", "move forward with the torso low (below 0.55 m; Walker2d 1.0 m, Ant 0.45 m)",
            "+ clip(v, -10, 10) - 10 * clip(h - h_low, 0, 1)", 20.0,
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
    # Ending must never pay (the module docstring): a step alive earns at least 1.
    weight = 0.0 if target.floor is None else 1.0 + target.floor + body.ctrl_most

    def reward(
        obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray, qpos: np.ndarray,
        qvel: np.ndarray,
    ) -> np.ndarray:  # fmt: skip
        qpos, qvel = np.asarray(qpos), np.asarray(qvel)
        behaviour = term(body, qpos, qvel) - body.ctrl(np.asarray(action, np.float64))
        return weight * body.alive(qpos, qvel) + behaviour

    reward.__name__ = reward.__qualname__ = name
    return reward
