"""Synthetic teachers that label pairs from the segments' true reward: the env's own, or with
``--teacher.target``/``--teacher.reward`` the target behaviour's (:mod:`rlhf.envs.targets`), which
the run's envs pay instead, so the segments carry it.

:class:`SyntheticTeacher` is the B-Pref simulated teacher (Lee et al. 2021), applied in order:

1. **Myopia**: the teacher perceives R = sum_t gamma**(H-1-t) r_t over a segment of H steps
   (the last step has weight 1); everything below works on these perceived returns.
2. **Skip**: both returns are low -> SKIP.
3. **Equal**: the returns are too close to tell apart -> EQUAL (also an exact tie when beta = inf).
4. **Rationality**: P(left) = sigmoid(beta * (R_left - R_right)); beta = inf always picks the
   higher return.
5. **Mistake**: a LEFT/RIGHT answer is flipped with probability ``mistake``.

The skip and equal thresholds are fractions of the *range of perceived segment returns the
teacher has seen* (every segment of every call so far, this call included), ``S = hi - lo``:
skip when max(R_left, R_right) < lo + skip_threshold * S, equal when |R_left - R_right| <
equal_threshold * S. B-Pref scales both by the average segment return of the current policy;
the range is used here because MuJoCo returns are often negative (a fraction of a negative mean
is meaningless), and it only widens, so a threshold never shrinks as training goes on.
"""

from __future__ import annotations

import math

import numpy as np

from rlhf.config import TeacherConfig
from rlhf.core.types import Answer, Pair, Segment


def perceived_return(segment: Segment, gamma: float) -> float:
    """The myopic return sum_t gamma**(H-1-t) r_t (the plain return for gamma = 1)."""
    rewards = segment.true_rewards.astype(np.float64)
    if gamma == 1.0:
        return float(rewards.sum())
    weights = gamma ** np.arange(len(rewards) - 1, -1, -1, dtype=np.float64)
    return float(rewards @ weights)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # tanh form: no overflow warnings for large |x|.
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class SyntheticTeacher:
    """B-Pref simulated teacher over the true reward; deterministic for a given ``rng`` seed.

    Every call draws the same number of random numbers (two per pair) whatever the answers, so a
    seed and the sequence of queries fix every answer.

    Args:
        cfg: the teacher's imperfections; the default config is the perfect oracle.
        rng: the teacher's own source of randomness.
    """

    def __init__(self, cfg: TeacherConfig, rng: np.random.Generator) -> None:
        cfg.validate()
        self.cfg = cfg
        self.rng = rng
        self.lo = math.inf
        """Lowest perceived segment return seen so far."""
        self.hi = -math.inf
        """Highest perceived segment return seen so far."""

    def label(self, pairs: list[Pair]) -> list[Answer]:
        """Answer each pair: LEFT, RIGHT, EQUAL or SKIP."""
        if not pairs:
            return []
        gamma = self.cfg.gamma
        left = np.array([perceived_return(p.left, gamma) for p in pairs])
        right = np.array([perceived_return(p.right, gamma) for p in pairs])
        self.lo = min(self.lo, float(left.min()), float(right.min()))
        self.hi = max(self.hi, float(left.max()), float(right.max()))
        scale = self.hi - self.lo
        choice_draw = self.rng.random(len(pairs))
        mistake_draw = self.rng.random(len(pairs))

        diff = left - right
        if math.isinf(self.cfg.beta):
            prefers_left = diff > 0
            tie = diff == 0
        else:
            prefers_left = choice_draw < _sigmoid(self.cfg.beta * diff)
            tie = np.zeros(len(pairs), dtype=bool)
        prefers_left ^= mistake_draw < self.cfg.mistake
        skip = np.maximum(left, right) < self.lo + self.cfg.skip_threshold * scale
        equal = tie | (np.abs(diff) < self.cfg.equal_threshold * scale)

        return [
            Answer.SKIP if s else Answer.EQUAL if e else Answer.LEFT if pl else Answer.RIGHT
            for s, e, pl in zip(skip.tolist(), equal.tolist(), prefers_left.tolist(), strict=True)
        ]
