"""A synthetic teacher that grades single clips on a K-level scale from their true reward.

Grades are relative, as a person's are: a clip's grade is where its return falls among the
returns seen so far. The class boundaries are the 1/K, 2/K, ... quantiles of every perceived
segment return the teacher has seen (this call's clips included), so on the data seen each grade
is about equally common and the scale follows the policy as it improves (RbRL's synthetic
teacher used fixed return thresholds per task instead; quantiles need no per-task tuning).

The B-Pref noise models of :class:`rlhf.feedback.teachers.SyntheticTeacher`, applied in order:

1. **Myopia** (gamma): the perceived return weights step t by gamma**(H-1-t).
2. **Skip** (skip_threshold): the return is below lo + skip_threshold * (hi - lo) -> skipped.
3. **Rationality** (beta): P(grade i) is proportional to exp(-beta * d_i), d_i the distance (in
   env-reward units, as for pairs) from the return to grade i's interval; beta = inf gives the
   grade whose interval holds the return.
4. **Mistake**: with probability ``mistake`` the grade is replaced by a uniformly random one.

``equal_threshold`` has no meaning for a single clip and is ignored.
"""

from __future__ import annotations

import math

import numpy as np

from rlhf.config import TeacherConfig
from rlhf.core.types import Segment
from rlhf.feedback.teachers import perceived_return


class RatingTeacher:
    """Grades clips; deterministic for a given ``rng`` seed (three draws per clip, always)."""

    def __init__(self, cfg: TeacherConfig, levels: int, rng: np.random.Generator) -> None:
        cfg.validate()
        if levels < 2:
            raise ValueError("a scale has at least two levels")
        self.cfg, self.levels, self.rng = cfg, levels, rng
        self.seen: list[float] = []
        """Every perceived segment return graded so far."""

    def boundaries(self) -> np.ndarray:
        """The K-1 inner class boundaries: quantiles i/K of the returns seen."""
        inner = np.arange(1, self.levels) / self.levels
        return np.quantile(np.asarray(self.seen), inner)

    def grade(self, segments: list[Segment]) -> list[int | None]:
        """A grade (0 worst .. K-1 best) or None (skip) for each clip."""
        if not segments:
            return []
        returns = np.array([perceived_return(s, self.cfg.gamma) for s in segments])
        self.seen.extend(returns.tolist())
        bounds = self.boundaries()
        choice, mistake, random_grade = (self.rng.random(len(segments)) for _ in range(3))
        lo, hi = min(self.seen), max(self.seen)
        skip = returns < lo + self.cfg.skip_threshold * (hi - lo)
        if math.isinf(self.cfg.beta):
            grades = np.searchsorted(bounds, returns, side="right")
        else:
            grades = self._boltzmann(returns, bounds, choice)
        grades = np.where(
            mistake < self.cfg.mistake, (random_grade * self.levels).astype(int), grades
        )
        return [None if s else int(g) for s, g in zip(skip.tolist(), grades.tolist(), strict=True)]

    def _boltzmann(self, returns: np.ndarray, bounds: np.ndarray, u: np.ndarray) -> np.ndarray:
        lower = np.concatenate([[-np.inf], bounds])  # grade i covers [lower_i, upper_i]
        upper = np.concatenate([bounds, [np.inf]])
        r = returns[:, None]
        distance = np.maximum(np.maximum(lower[None] - r, r - upper[None]), 0.0)
        logits = -self.cfg.beta * distance
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
        return np.minimum((cdf < u[:, None]).sum(axis=1), self.levels - 1)
