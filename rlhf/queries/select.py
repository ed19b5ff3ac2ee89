"""Which pairs to ask about (query selection), and how many to have asked for by when.

Selection follows Christiano et al. 2017 and B-Pref: draw ``n * oversample`` candidate pairs
uniformly from the pool, score each with the reward ensemble, and keep the ``n`` most informative:

* ``disagreement``: the std across members of P(left preferred) (Christiano's choice);
* ``entropy``: the entropy of the members' mean P(left preferred) (B-Pref's "entropy" sampling);
* ``uniform``: the first ``n`` candidates, i.e. plain random pairs.
"""

from __future__ import annotations

import math
from typing import Literal, Protocol

import numpy as np

from rlhf.core.types import Pair, Segment
from rlhf.queries.segments import sample_pairs

Method = Literal["uniform", "disagreement", "entropy"]


class PreferenceModel(Protocol):
    """What selection needs of a reward model: each member's P(left preferred), (M, P)."""

    def preference_probs(self, pairs: list[Pair]) -> np.ndarray: ...


def disagreement(probs: np.ndarray) -> np.ndarray:
    """Std across members of P(left): (M, P) -> (P,)."""
    return probs.std(axis=0)


def mean_entropy(probs: np.ndarray) -> np.ndarray:
    """Binary entropy (nats) of the members' mean P(left): (M, P) -> (P,)."""
    p = np.clip(probs.mean(axis=0), 1e-7, 1 - 1e-7)
    return -(p * np.log(p) + (1 - p) * np.log1p(-p))


def select_pairs(
    pool_segments: list[Segment],
    n: int,
    method: Method,
    ensemble: PreferenceModel | None,
    oversample: int,
    rng: np.random.Generator,
) -> list[Pair]:
    """Pick ``n`` pairs of distinct pool segments, the most informative of ``n * oversample``.

    With ``ensemble=None`` (no reward model yet) every method falls back to uniform. Candidates
    are ranked by a stable sort, so ties keep their random draw order; the same segment may
    appear in several selected pairs.

    Raises:
        ValueError: an unknown method, or fewer than two segments in the pool.
    """
    if method not in ("uniform", "disagreement", "entropy"):
        raise ValueError(f"unknown selection method {method!r}")
    if n <= 0:
        return []
    # Candidates are drawn the same way for every method, so a seed gives the same candidates
    # whichever ranking follows (uniform keeps the first n of them).
    candidates = sample_pairs(pool_segments, n * max(1, oversample), rng)
    if method == "uniform" or ensemble is None:
        return candidates[:n]
    probs = ensemble.preference_probs(candidates)
    scores = disagreement(probs) if method == "disagreement" else mean_entropy(probs)
    top = np.argsort(-scores, kind="stable")[:n]
    return [candidates[i] for i in top]


class ReturnModel(Protocol):
    """What clip selection needs of a reward model: each member's return per segment, (M, S)."""

    def member_returns(self, segments: list[Segment]) -> np.ndarray: ...


def select_clips(
    pool_segments: list[Segment],
    n: int,
    method: Method,
    ensemble: ReturnModel | None,
    oversample: int,
    rng: np.random.Generator,
) -> list[Segment]:
    """Pick ``n`` pool segments to grade: of ``n * oversample`` drawn at random, those whose
    predicted return the members disagree on most (std across members; entropy and
    disagreement rank alike here), or the first ``n`` (uniform, or no model yet)."""
    if method not in ("uniform", "disagreement", "entropy"):
        raise ValueError(f"unknown selection method {method!r}")
    if n <= 0 or not pool_segments:
        return []
    size = min(len(pool_segments), n * max(1, oversample))
    picks = rng.choice(len(pool_segments), size=size, replace=False)
    candidates = [pool_segments[i] for i in picks]
    if method == "uniform" or ensemble is None:
        return candidates[:n]
    spread = ensemble.member_returns(candidates).std(axis=0)
    return [candidates[i] for i in np.argsort(-spread, kind="stable")[:n]]


class QuerySchedule:
    """Cumulative number of labels that should have been requested after ``env_steps`` steps.

    ``round(initial_fraction * total_labels)`` are due at step 0 (labels on the random policy);
    the rest arrive at a rate proportional to ``1 / (1 + t / t_half)`` (Christiano et al. ask at
    a rate decaying like 1/T), i.e. cumulatively ``rest * log(1 + t/t_half) / log(1 + T/t_half)``,
    which reaches ``total_labels`` exactly at ``total_timesteps``. The count is floored, so it
    never runs ahead of the curve, and it is monotone in ``env_steps``.

    Args:
        total_labels: labels over the whole run.
        initial_fraction: share due up front, in [0, 1].
        total_timesteps: env steps of the whole run.
        half_rate_fraction: ``t_half`` as a fraction of ``total_timesteps``: the rate has halved
            by then (0.25: the last label comes at a fifth of the first rate)...
        max_half_rate_steps: ...but never later than this many env steps: the reward must be
            right while the policy changes fastest, whatever the run's length (measured: at 1M
            steps, a quarter of the run starved the first 100k steps of labels and HalfCheetah
            reached 0.66x true-reward PPO; 75k steps, as a 300k run has, gave 1.5x).
        half_rate_steps: ``t_half`` in env steps (overrides both).
        ahead: labels :meth:`due` may run ahead of the curve when asked to (the agent's steps
            are new to the reward: ``--query.ask-when-new``); later rounds ask nothing until
            the curve has caught up, so the run's total stays the same.

    A run that ``--max-minutes`` will end before ``total_timesteps`` passes :meth:`due` the step
    it is expected to end at (its ``horizon``): the same curve then spreads the labels over the
    steps the run will take, and every label is due by its end.
    """

    def __init__(
        self,
        total_labels: int,
        initial_fraction: float,
        total_timesteps: int,
        half_rate_fraction: float = 0.25,
        half_rate_steps: int | None = None,
        max_half_rate_steps: int = 75_000,
        ahead: int = 0,
    ) -> None:
        if total_labels < 0 or not 0 <= initial_fraction <= 1 or half_rate_fraction <= 0:
            raise ValueError("need total_labels >= 0, initial_fraction in [0, 1], half_rate > 0")
        self.total_labels = total_labels
        self.initial = min(total_labels, round(initial_fraction * total_labels))
        self.total_timesteps = total_timesteps
        self.half_rate_fraction, self.max_half_rate_steps = half_rate_fraction, max_half_rate_steps
        self.half_rate_steps = half_rate_steps
        self.t_half = self._t_half(total_timesteps)
        self.ahead = ahead

    def _t_half(self, horizon: int) -> float:
        if self.half_rate_steps is not None:
            return float(self.half_rate_steps)
        return min(self.half_rate_fraction * max(horizon, 1), self.max_half_rate_steps)

    def due(self, env_steps: int, ahead: bool = False, horizon: int | None = None) -> int:
        """Labels that should have been requested in total by ``env_steps`` (``ahead``: plus
        the labels it may run ahead, never more than the total) in a run that ends at step
        ``horizon`` (None: ``total_timesteps``)."""
        if ahead:
            return min(self.total_labels, self.due(env_steps, horizon=horizon) + self.ahead)
        end = self.total_timesteps if horizon is None else min(horizon, self.total_timesteps)
        if env_steps >= end:
            return self.total_labels
        if env_steps <= 0:
            return self.initial
        t_half = self.t_half if end == self.total_timesteps else self._t_half(end)
        share = math.log1p(env_steps / t_half) / math.log1p(end / t_half)
        return self.initial + math.floor((self.total_labels - self.initial) * share)
