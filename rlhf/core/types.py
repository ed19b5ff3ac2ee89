"""Data that flows between the stages of the loop.

Every container here is a frozen dataclass whose array shapes are checked on construction, so a
shape bug fails where the data is made, not three stages later.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


class Answer(enum.StrEnum):
    """What a teacher (human or synthetic) says about a pair."""

    LEFT = "left"
    """The left segment is better."""
    RIGHT = "right"
    """The right segment is better."""
    EQUAL = "equal"
    """Both are equally good: trained on as a 0.5/0.5 soft label."""
    SKIP = "skip"
    """Can't tell: stored, but never trained on."""

    @property
    def mu(self) -> float | None:
        """Probability that *left* is preferred, or None for a skip."""
        return _MU[self]


_MU: dict[Answer, float | None] = {
    Answer.LEFT: 1.0,
    Answer.RIGHT: 0.0,
    Answer.EQUAL: 0.5,
    Answer.SKIP: None,
}


@dataclass(frozen=True, eq=False)
class Segment:
    """A short window of one episode, with everything needed to judge and to replay it.

    Attributes:
        obs: raw (un-normalised) observations, shape (T, obs_dim), float32.
        actions: actions as applied to the env (clipped to the action space), (T, act_dim), float32.
        true_rewards: the run's true reward for each step, (T,), float32: the env's own, or a
            target behaviour's (``--teacher.target``).
        qpos: MuJoCo generalised positions before each step, (T, nq), float64 (nq may be 0).
        qvel: MuJoCo generalised velocities before each step, (T, nv), float64 (nv may be 0).
        env_id: the gymnasium id the segment comes from (needed to render it).
        start_step: global env step (over all envs) at which the rollout containing it began.
        absorbing: how many of the last steps come after the episode ended (the env terminated
            it): padding in the *absorbing state*, where obs, actions and true rewards are zero
            and the physics state stays that of the last real step. A segment that shows an
            episode's end this way lets a teacher compare "fell after 20 steps" with "kept going"
            (see :mod:`rlhf.queries.segments`).
    """

    obs: np.ndarray
    actions: np.ndarray
    true_rewards: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    env_id: str
    start_step: int = 0
    absorbing: int = 0

    def __post_init__(self) -> None:
        length = self.obs.shape[0]
        if self.obs.ndim != 2 or length == 0:
            raise ValueError(f"obs must be (T, obs_dim) with T > 0, got {self.obs.shape}")
        for name in ("actions", "qpos", "qvel"):
            arr = getattr(self, name)
            if arr.ndim != 2 or arr.shape[0] != length:
                raise ValueError(f"{name} must be ({length}, d), got {arr.shape}")
        if self.true_rewards.shape != (length,):
            raise ValueError(f"true_rewards must be ({length},), got {self.true_rewards.shape}")
        if not 0 <= self.absorbing < length:
            raise ValueError(f"absorbing must be in [0, {length}), got {self.absorbing}")

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    @property
    def real_steps(self) -> int:
        """Steps before the absorbing padding (all of them when there is none)."""
        return len(self) - self.absorbing

    def absorbing_mask(self) -> np.ndarray:
        """(T,) bool: True on the absorbing steps."""
        mask = np.zeros(len(self), bool)
        mask[self.real_steps :] = True
        return mask

    @property
    def true_return(self) -> float:
        """Undiscounted sum of the true reward over the segment."""
        return float(self.true_rewards.sum())


@dataclass(frozen=True, eq=False)
class Pair:
    """Two segments of equal length shown side by side (left, right)."""

    left: Segment
    right: Segment

    def __post_init__(self) -> None:
        if len(self.left) != len(self.right):
            raise ValueError(f"segments differ in length: {len(self.left)} != {len(self.right)}")
        if self.left.obs.shape[1] != self.right.obs.shape[1]:
            raise ValueError("segments have different observation sizes")


@dataclass(frozen=True, eq=False)
class Preference:
    """A labelled pair as the reward trainer consumes it (skips never become a Preference)."""

    pair: Pair
    mu: float
    """Probability that the left segment is preferred: 1.0, 0.0 or 0.5 (equal)."""
    meta: LabelMeta | None = None
    """Where and when the label came from (weighted sampling); None: a fresh label."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.mu <= 1.0:
            raise ValueError(f"mu must be in [0, 1], got {self.mu}")


@dataclass(frozen=True)
class LabelMeta:
    """Bookkeeping of a label or a rating that weighted sampling reads (no arrays)."""

    iteration: int = 0
    """PPO iteration at which the query was asked."""
    created_at: float = 0.0
    """When it was answered (Unix time)."""
    source: str = ""
    """synthetic, human, import ..."""


@dataclass(frozen=True, eq=False)
class Rating:
    """A graded clip as the reward trainer consumes it (skipped clips never become a Rating)."""

    segment: Segment
    grade: int
    """0 (worst) to ``levels - 1`` (best)."""
    levels: int
    meta: LabelMeta | None = None

    def __post_init__(self) -> None:
        if self.levels < 2 or not 0 <= self.grade < self.levels:
            raise ValueError(f"grade must be in [0, {self.levels}), got {self.grade}")


@dataclass(frozen=True, eq=False)
class RolloutBatch:
    """What one PPO rollout hands to the preference side: raw data, time-major (T, N, ...).

    Row t holds the observation the agent saw at step t, the action it took, and what the env
    answered. With gymnasium 1.x next-step autoreset, the step after an episode ends is a reset
    step, not a transition: ``valid`` is False there (its obs is the finished episode's last obs).

    Attributes:
        obs: raw observations, (T, N, obs_dim) float32.
        actions: actions applied to the env (clipped), (T, N, act_dim) float32.
        true_rewards: the run's true rewards (the env's, or a target's), (T, N) float32 (0 on
            reset steps).
        terminated: the transition at t ended the episode in a terminal state, (T, N) bool.
        truncated: the transition at t ended the episode by a time limit, (T, N) bool.
        valid: the row is a real transition, (T, N) bool.
        qpos: MuJoCo qpos at step t (before the action), (T, N, nq) float64.
        qvel: MuJoCo qvel at step t, (T, N, nv) float64.
        env_id: the gymnasium id.
        start_step: global env step at which this rollout began.
        reward_parts: the terms of the env's reward where its ``info`` reports them
            (``info["reward_ctrl"]`` -> ``"ctrl"``; MuJoCo locomotion: forward, ctrl, survive,
            contact ...), (T, N) float32 each, 0 on reset steps. Diagnostics only: which term the
            learned reward misses (TensorBoard ``reward/pearson_<term>``).
    """

    obs: np.ndarray
    actions: np.ndarray
    true_rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    env_id: str
    start_step: int = 0
    reward_parts: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        steps, envs = self.true_rewards.shape
        for name in ("terminated", "truncated", "valid"):
            if getattr(self, name).shape != (steps, envs):
                raise ValueError(
                    f"{name} must be ({steps}, {envs}), got {getattr(self, name).shape}"
                )
        for name in ("obs", "actions", "qpos", "qvel"):
            arr = getattr(self, name)
            if arr.ndim != 3 or arr.shape[:2] != (steps, envs):
                raise ValueError(f"{name} must be ({steps}, {envs}, d), got {arr.shape}")
        for name, part in self.reward_parts.items():
            if part.shape != (steps, envs):
                raise ValueError(f"reward part {name} must be ({steps}, {envs}), got {part.shape}")

    @property
    def dones(self) -> np.ndarray:
        """terminated | truncated, (T, N) bool."""
        return self.terminated | self.truncated
