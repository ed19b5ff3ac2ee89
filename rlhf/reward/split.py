"""Which labels train and which validate, and what each ensemble member draws to train on.

Pairs and rated clips are split apart, each with :func:`split_indices` (rated clips with a seed
of their own), unless ``--data.holdout best-recent`` holds out the best, most recent clips.
"""

from __future__ import annotations

import numpy as np

from rlhf.config.ratings import DataConfig
from rlhf.core.types import Preference, Rating
from rlhf.reward import sampling

MIN_LABELS_FOR_VAL = 5
"""Fewer labels than this: no validation split (one or two labels say nothing about fit)."""
_RATING_SPLIT = 0x4A7E
"""Mixed into the seed of the rated clips' split, so it is not the pairs' split again."""

Split = tuple[np.ndarray, np.ndarray]


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation indices of ``n`` labels; label i's side depends on (i, seed) only.

    Both splits are non-empty from :data:`MIN_LABELS_FOR_VAL` labels on (with val_fraction > 0).
    """
    if n < MIN_LABELS_FOR_VAL or val_fraction <= 0:
        return np.arange(n), np.arange(0)
    # The first n draws of a fixed generator do not depend on n: the split is prefix-stable.
    draws = np.random.default_rng([seed, 0x5EED]).random(n)
    is_val = draws < val_fraction
    if not is_val.any():
        is_val[np.argmin(draws)] = True
    if is_val.all():
        is_val[np.argmax(draws)] = False
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


def split_label_sets(
    prefs: list[Preference],
    ratings: list[Rating],
    val_fraction: float,
    seed: int,
    data: DataConfig,
) -> tuple[Split, Split]:
    """(train, val) indices of the pairs and of the rated clips."""
    pairs = split_indices(len(prefs), val_fraction, seed)
    if data.holdout == "best-recent" and val_fraction > 0:
        grades = np.array([r.grade for r in ratings], dtype=np.float64)
        its = np.array([r.meta.iteration if r.meta else 0 for r in ratings], dtype=np.float64)
        return pairs, sampling.best_recent_holdout(grades, its, val_fraction)
    return pairs, split_indices(len(ratings), val_fraction, seed ^ _RATING_SPLIT)


def member_sample(
    prefs: list[Preference],
    ratings: list[Rating],
    train_idx: np.ndarray,
    rtrain_idx: np.ndarray,
    members: int,
    data: DataConfig,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """One member's training sample: (pair indices, clip indices), with repeats.

    Uniform settings: a bootstrap resample of each split (a lone member uses the splits as
    they are), which is plain bagging. Otherwise as many draws as training labels, from the
    weighted probabilities over pairs and clips together (so --data.demo-fraction holds over
    both kinds).
    """
    if data.uniform:
        if members == 1:
            return train_idx, rtrain_idx
        pairs = train_idx[rng.integers(len(train_idx), size=len(train_idx))]
        if not len(rtrain_idx):
            return pairs, rtrain_idx
        return pairs, rtrain_idx[rng.integers(len(rtrain_idx), size=len(rtrain_idx))]
    metas = [prefs[i].meta for i in train_idx] + [ratings[i].meta for i in rtrain_idx]
    grades = np.concatenate(
        [np.full(len(train_idx), np.nan), np.array([ratings[i].grade for i in rtrain_idx], float)]
    )
    p = sampling.probabilities(grades, metas, data)
    drawn = sampling.draw(p, len(p), rng)
    is_pair = drawn < len(train_idx)
    return train_idx[drawn[is_pair]], rtrain_idx[drawn[~is_pair] - len(train_idx)]
