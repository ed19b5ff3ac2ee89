"""Weighted sampling of labelled data for reward training (``--data.*``); numpy only, no I/O.

Every label (a compared pair or a rated clip) gets a weight

    w = exp(beta * grade) * exp(-lambda * age)

(pairs have no grade: factor 1), and weight 0 below ``min_grade`` or beyond ``max_age``. Ages
count back from the newest label (in policy iterations, or hours between answers), so a round's
draw depends on the labels alone, never on the clock. Labels fall into buckets; a bucket with a
fixed share (the imported demonstrations, ``--data.demo-fraction``) is drawn at that share
whatever its size, the rest share what is left, each label in proportion to its weight. Each
ensemble member's training sample is drawn with replacement from these probabilities, in place
of bagging's uniform bootstrap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rlhf.config.ratings import DataConfig
from rlhf.core.types import LabelMeta

DEMO_SOURCE = "import"
"""Labels whose source is this form the demonstration bucket."""
DEMO_BUCKET = 1
REST_BUCKET = 0


def ages(metas: Sequence[LabelMeta | None], unit: str) -> np.ndarray:
    """Age of each label relative to the newest one (a missing meta counts as newest)."""
    if unit == "hours":
        times = np.array([m.created_at if m else np.nan for m in metas], dtype=np.float64)
        newest = np.nanmax(times) if np.isfinite(times).any() else 0.0
        return np.nan_to_num((newest - times) / 3600.0, nan=0.0)
    its = np.array([m.iteration if m else np.nan for m in metas], dtype=np.float64)
    newest = np.nanmax(its) if np.isfinite(its).any() else 0.0
    return np.nan_to_num(newest - its, nan=0.0)


def label_weights(grades: np.ndarray, age: np.ndarray, cfg: DataConfig) -> np.ndarray:
    """Unnormalised weight of each label; ``grades`` is NaN where a label has none (pairs)."""
    graded = np.isfinite(grades)
    g = np.where(graded, grades, 0.0)
    # Shift by the largest exponent: exp never overflows, and the ratios are unchanged.
    log_w = cfg.grade_beta * g - cfg.age_lambda * age
    finite = log_w[np.isfinite(log_w)]
    w = np.exp(log_w - (finite.max() if finite.size else 0.0))
    w[graded & (g < cfg.min_grade)] = 0.0
    if cfg.max_age is not None:
        w[age > cfg.max_age] = 0.0
    return w


def buckets(metas: Sequence[LabelMeta | None]) -> np.ndarray:
    """Bucket of each label: demonstrations (imported) or the rest."""
    return np.array(
        [DEMO_BUCKET if m is not None and m.source == DEMO_SOURCE else REST_BUCKET for m in metas],
        dtype=np.int64,
    )


def draw_probabilities(
    weights: np.ndarray, bucket: np.ndarray, shares: Mapping[int, float]
) -> np.ndarray:
    """P(draw label i): buckets in ``shares`` get that share of the mass, the others split the
    rest by weight; a bucket with no weight gives its share to the others. All zeros when no
    label has weight."""
    w = np.asarray(weights, dtype=np.float64)
    fixed = [b for b in shares if w[bucket == b].sum() > 0]
    rest = ~np.isin(bucket, fixed)
    parts = {b: shares[b] for b in fixed}
    if w[rest].sum() > 0:
        parts[-1] = max(0.0, 1.0 - sum(parts.values()))
    total = sum(parts.values())
    p = np.zeros_like(w)
    if total <= 0:
        return p
    for b, share in parts.items():
        members = rest if b == -1 else bucket == b
        p[members] = w[members] / w[members].sum() * share / total
    return p


def probabilities(
    grades: np.ndarray, metas: Sequence[LabelMeta | None], cfg: DataConfig
) -> np.ndarray:
    """P(draw label i) under ``cfg`` for labels with these grades (NaN: none) and metas."""
    w = label_weights(grades, ages(metas, cfg.age_unit), cfg)
    shares = {} if cfg.demo_fraction is None else {DEMO_BUCKET: cfg.demo_fraction}
    return draw_probabilities(w, buckets(metas), shares)


def draw(p: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` indices drawn with replacement with probabilities ``p`` (none if all are 0)."""
    if n <= 0 or p.sum() <= 0:
        return np.zeros(0, dtype=np.int64)
    return rng.choice(len(p), size=n, p=p / p.sum())


def best_recent_holdout(
    grades: np.ndarray, iterations: np.ndarray, val_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) indices of rated clips: the validation set is the ``val_fraction`` share of
    the most recent clips, best grades first within an iteration (what matters now)."""
    n = len(grades)
    k = round(val_fraction * n)
    if n < 5 or k == 0:
        return np.arange(n), np.arange(0)
    order = np.lexsort((-grades, -iterations))  # last key sorts first: newest, then best
    val = np.sort(order[: min(k, n - 1)])
    return np.setdiff1d(np.arange(n), val), val
