"""Aggregates over a few seeds: mean, std, interquartile mean, percentile-bootstrap intervals.

Agarwal et al. 2021 ("Deep RL at the edge of the statistical precipice", the rliable library)
recommend the interquartile mean (robust to one outlier seed, less noisy than the median) with
bootstrap confidence intervals when there are only a few runs. rliable itself pulls in scipy,
arch, seaborn and absl for what is a few lines of numpy here; this follows its definitions
(``scipy.stats.trim_mean(x, 0.25)`` and the percentile bootstrap over runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_SAMPLES = 10_000


def iqm(values: Sequence[float] | np.ndarray, axis: int = -1) -> np.ndarray | float:
    """Interquartile mean: the mean after dropping the lowest and highest quarter of runs.

    Like ``scipy.stats.trim_mean(values, 0.25)``: floor(n / 4) runs are cut at each end, so
    with fewer than 4 runs it is the plain mean.
    """
    x = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = x.shape[axis]
    cut = n // 4
    return np.take(x, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[..., np.ndarray | float] = iqm,
    confidence: float = 0.95,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of ``statistic`` (called with an ``axis``) over the runs.

    Runs are resampled with replacement; the seed is fixed so a table prints the same twice.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    resampled = x[rng.integers(0, x.size, size=(samples, x.size))]
    estimates = np.asarray(statistic(resampled, axis=1))
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(estimates, [tail, 100 - tail])
    return float(lo), float(hi)


def mean(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(values).mean(axis=axis)


@dataclass(frozen=True)
class GroupStats:
    """Final true return of one group's finished cells."""

    n: int
    mean: float
    std: float
    """Sample standard deviation (ddof 1; 0 for one run)."""
    mean_ci: tuple[float, float]
    iqm: float
    iqm_ci: tuple[float, float]


def group_stats(values: Sequence[float]) -> GroupStats | None:
    """Mean +- std and IQM with their 95% bootstrap intervals; None for no values."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if x.size == 0:
        return None
    return GroupStats(
        n=int(x.size),
        mean=float(x.mean()),
        std=float(x.std(ddof=1)) if x.size > 1 else 0.0,
        mean_ci=bootstrap_ci(x, mean),
        iqm=float(iqm(x)),
        iqm_ci=bootstrap_ci(x, iqm),
    )
