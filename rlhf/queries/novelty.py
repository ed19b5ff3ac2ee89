"""How much of what the agent does now lies outside what the labelled clips showed.

A reward fitted on the first labels orders the agent's later behaviour at about chance where
that behaviour is new to it (docs/results/few-labels-behaviours.md, "later pairs"): the reward
is a guess there, and PPO optimises the guess. :func:`new_share` measures "new" without any
answer: the share of a rollout's steps with some reward input (observation, and action when the
reward sees it) outside the central range of the labelled steps' inputs.
``--query.ask-when-new`` asks for labels ahead of the schedule while that share is high.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlhf.core.types import Preference, RolloutBatch

TAIL = 0.005
"""Share of the labelled steps cut from each end of each input's range (0.5% and 99.5%): a
few extreme steps of one clip must not make everything look familiar."""


@dataclass(frozen=True)
class Coverage:
    """The central range of each reward input over the labelled steps."""

    low: np.ndarray
    """(D,) float32."""
    high: np.ndarray
    """(D,) float32."""
    with_actions: bool
    """Whether the inputs are observation and action (else observation only)."""
    labels: int
    """How many labels it was computed from."""


def _inputs(obs: np.ndarray, actions: np.ndarray, with_actions: bool) -> np.ndarray:
    return np.concatenate([obs, actions], axis=1) if with_actions else obs


def coverage(prefs: Sequence[Preference], with_actions: bool) -> Coverage | None:
    """The labelled clips' input range; None without labels. Steps after an episode's end
    (absorbing) are not inputs the reward scores, so they do not count."""
    parts = [
        _inputs(s.obs[: s.real_steps], s.actions[: s.real_steps], with_actions)
        for p in prefs
        for s in (p.pair.left, p.pair.right)
    ]
    steps = [x for x in parts if len(x)]
    if not steps:
        return None
    x = np.concatenate(steps).astype(np.float64)
    low, high = np.quantile(x, [TAIL, 1 - TAIL], axis=0)
    return Coverage(low.astype(np.float32), high.astype(np.float32), with_actions, len(prefs))


def new_share(cov: Coverage, raw: RolloutBatch) -> float:
    """Share of the rollout's real steps with some input outside ``cov``."""
    valid = raw.valid.reshape(-1)
    obs = raw.obs.reshape(valid.size, -1)[valid]
    actions = raw.actions.reshape(valid.size, -1)[valid]
    if not len(obs):
        return 0.0
    x = _inputs(obs, actions, cov.with_actions)
    outside = (x < cov.low) | (x > cov.high)
    return float(outside.any(axis=1).mean())
