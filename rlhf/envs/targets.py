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
  finite state), else 0; always 1 for HalfCheetah and Swimmer, which never fall.
* ``effort = 1 - 0.2 * mean(clip(a, -1, 1)^2)``: from 1 (no action) down to 0.8 (every control at
  its bound; MuJoCo clamps the controls to [-1, 1]), so flailing is not free.

**Every step pays between 0 and 1** (the shape of DeepMind Control's rewards)::

    reward = alive * (1 + 4 * m) / 5 * effort

where ``m`` in [0, 1] is how well the step matches the behaviour (1: exactly what is asked; each
target's ``match`` below). So a 1,000-step episode's return is at most 1,000, and the return
reads as the number of steps of the perfect behaviour. Two things hold by construction:

* **Ending never pays.** Hopper, Walker2d and Ant end their episode when they fall, and an ended
  episode earns nothing more; a step alive earns at least 0.2 x 0.8 = 0.16. (A reward that can
  be negative while the robot is up teaches it to fall: true-reward PPO on Walker2d's first
  ``speed``, ``alive - min(|v - 1|, 2)``, fell after 94 steps of 1,000.)
* **Staying alive is not the behaviour.** ``m`` has long tails (``near``, ``at_least``), so a
  step far from the behaviour still says which way is better, but a robot that only stays up
  (m about 0.2) earns about 0.36 a step, a third of the behaviour's best. The catalogue before
  this one paid ``(1 + F + C) * alive`` (F, C: the most the behaviour's terms and the control
  cost could take away in a step) plus unbounded behaviour terms; on Hopper ``backward`` that
  was 11 a step for standing, and true-reward PPO learned exactly that
  (docs/results/few-labels-behaviours.md).

``backflip`` has no ``alive``: a flip leaves the healthy range (Hopper's pitch must stay within
0.2 rad), so it would pay the robot not to flip; it is taught with ``--terminations
fixed-horizon``, where no episode ends early.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlhf.config import ConfigError, flag
from rlhf.config.presets import family

CATALOGUE_VERSION = 2
"""The catalogue's version, stored in the ``config.json`` of a run with a named target. 1: the
catalogue before every step paid in [0, 1] (it paid for staying up); 2: this one. A run that
learns from its target cannot resume on another version (:mod:`rlhf.run.run_dir`)."""

TargetFn = Callable[..., np.ndarray]
"""``f(obs=, action=, next_obs=, qpos=, qvel=) -> (B,)``: a target, or a user's own function."""


def _never_falls(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return np.ones(len(qpos))


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
    alive: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """1.0 per row while healthy by the env's rule, else 0.0 (1.0 always for a robot that never
    falls)."""
    speed: float = 1.0
    """v*, the robot's speed scale (m/s): ``speed``'s target, the pace at which ``backward``,
    ``hop`` and ``crawl`` pay in full. Swimmer's is 0.1: true-reward PPO swims at about 0.05
    m/s after 1M steps of its env's reward."""
    low: float = 0.0
    """The ``crawl`` target's highest torso height that pays in full (m)."""

    def h(self, qpos: np.ndarray) -> np.ndarray:
        return qpos[:, self.height] + self.height_offset


BODIES: dict[str, Body] = {
    "HalfCheetah": Body(1, 0.7, 0.7, _never_falls, low=0.55),
    "Hopper": Body(1, 0.0, 1.25, _hopper_alive),
    "Walker2d": Body(1, 0.0, 1.25, _walker_alive, low=1.0),
    "Ant": Body(2, 0.0, 0.75, _ant_alive, low=0.45),
    "Swimmer": Body(0, 0.0, 0.0, _never_falls, speed=0.1),
}
"""By env family (:func:`rlhf.config.presets.family`)."""

RISE = 0.2
"""``jump`` pays in full this far (m) above the standing height."""
LOW_SCALE = 0.1
"""``crawl``'s height term halves this far (m) above the low height."""
TURN = 2 * np.pi
"""``backflip`` pays in full at this pitch rate (rad/s): a turn a second."""


def effort(action: np.ndarray) -> np.ndarray:
    """1 - 0.2 x the mean squared control (clipped to [-1, 1] as MuJoCo clamps it): in [0.8, 1]."""
    return 1.0 - 0.2 * np.mean(np.square(np.clip(action, -1.0, 1.0)), axis=1)


def near(x: np.ndarray, s: float) -> np.ndarray:
    """1 at x = 0, 1/2 at |x| = s, then a long tail (1/5 at 2s, 1/10 at 3s): a step far from the
    behaviour still shows which way is better, so the first labels, on random behaviour, can
    teach something (DeepMind Control's tolerance rewards have such tails for the same reason)."""
    return 1.0 / (1.0 + np.square(x / s))


def at_least(x: np.ndarray, s: float) -> np.ndarray:
    """1 from x = s on; below it ``near``'s tail, halving at s/2 (1/5 at x = 0)."""
    return near(np.minimum(x - s, 0.0), s / 2)


# How well a step matches a behaviour, in [0, 1]: (body, qpos, qvel) -> (B,). obs, next_obs and
# the action are not needed by any of them (the action is in ``effort``).
Match = Callable[[Body, np.ndarray, np.ndarray], np.ndarray]


def _speed(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return near(qvel[:, 0] - b.speed, b.speed / 2)


def _backward(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return at_least(-qvel[:, 0], b.speed)


def _stand(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return near(qvel[:, 0], b.speed / 2)


def _hop(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return at_least(np.abs(qvel[:, 1]), b.speed) * near(qvel[:, 0], b.speed / 2)


def _jump(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return at_least(b.h(qpos) - b.stand, RISE)


def _backflip(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    return at_least(-qvel[:, 2], TURN)


def _crawl(b: Body, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    low = near(np.maximum(b.h(qpos) - b.low, 0.0), LOW_SCALE)
    return at_least(qvel[:, 0], b.speed) * low


@dataclass(frozen=True)
class Target:
    """One entry of the catalogue."""

    name: str
    about: str
    """What it asks for, in words."""
    match: str
    """m, how well a step matches it in [0, 1], as a formula (the module docstring says what
    each symbol reads; near(x, s) = 1 / (1 + (x / s)^2), at_least(x, s) = near(min(x - s, 0), s/2))."""
    alive: bool
    """Paid only while the robot is healthy (every target but ``backflip``)."""
    families: tuple[str, ...]
    fn: Match


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "speed", "move forward at a steady v* (1 m/s; Swimmer 0.1 m/s)",
            "near(v - v*, v*/2)", True,
            ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Swimmer"), _speed,
        ),
        Target(
            "backward", "run backwards at v* or faster", "at_least(-v, v*)", True,
            ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Swimmer"), _backward,
        ),
        Target(
            "stand", "stay upright without travelling", "near(v, v*/2)", True,
            ("Hopper", "Walker2d"), _stand,
        ),
        Target(
            "hop", "hop in place: move up and down, not along",
            "at_least(abs(vz), v*) * near(v, v*/2)", True, ("Hopper", "Walker2d"), _hop,
        ),
        Target(
            "jump", "lift the torso 0.2 m above its standing height (0.7 m; Hopper, Walker2d "
            "1.25 m)", "at_least(h - h_stand, 0.2)", True, ("HalfCheetah", "Hopper", "Walker2d"),
            _jump,
        ),
        Target(
            "backflip", "rotate backwards (nose up and over), a turn a second",
            "at_least(-w, 2 pi)", False, ("HalfCheetah", "Hopper"), _backflip,
        ),
        Target(
            "crawl", "move forward at v* with the torso low (at most 0.55 m; Walker2d 1.0 m, "
            "Ant 0.45 m)", "at_least(v, v*) * near(max(h - h_low, 0), 0.1)", True,
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
    body, match, alive = BODIES[family(env_id)], target.fn, target.alive

    def reward(
        obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray, qpos: np.ndarray,
        qvel: np.ndarray,
    ) -> np.ndarray:  # fmt: skip
        qpos, qvel = np.asarray(qpos, np.float64), np.asarray(qvel, np.float64)
        paid = (1.0 + 4.0 * match(body, qpos, qvel)) / 5.0 * effort(np.asarray(action, np.float64))
        return np.where(body.alive(qpos, qvel) > 0, paid, 0.0) if alive else paid

    reward.__name__ = reward.__qualname__ = name
    return reward
