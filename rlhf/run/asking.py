"""Asking: how many queries are due this round, which pairs and clips, and handing them over.

The stages of :func:`rlhf.run.loop.preference_round` between cutting a rollout's segments and
reading the answers; each takes the parts it uses (the schedule, the store, the pool, the
ensemble, the feedback source). Pairs replayed with the current policy stay in
:mod:`rlhf.run.loop`, which alone knows both the agent and the reward learner.
"""

from __future__ import annotations

import numpy as np

from rlhf.config import QueryConfig
from rlhf.core.types import Pair, RolloutBatch, Segment
from rlhf.data.seed_labels import imported_pairs
from rlhf.feedback.sources import FeedbackSource
from rlhf.queries.segments import SegmentPool
from rlhf.queries.select import QuerySchedule, select_clips, select_pairs
from rlhf.reward.learner import RewardLearner
from rlhf.run.logger import Logger
from rlhf.run.preferences import Preferences
from rlhf.store.protocols import TrainerStore


def steps_are_new(
    p: Preferences, raw: RolloutBatch, threshold: float, logger: Logger, step: int
) -> bool:
    """--query.ask-when-new: whether more than ``threshold`` of the rollout's steps lie outside
    the labelled steps' range (logged as labels/new_share); False before the first label."""
    share = p.new_share(raw)
    if share is not None:
        logger.scalar("labels/new_share", share, step)
    return share is not None and share > threshold


def queries_due(
    schedule: QuerySchedule,
    store: TrainerStore,
    requested: int,
    step: int,
    new: bool = False,
    horizon: int | None = None,
) -> int:
    """Queries the schedule wants asked now (``new``: up to its lead ahead of the curve) in a
    run expected to end at step ``horizon`` (None: its --total-timesteps).

    The schedule counts what was answered (or still can be): retired pairs are asked for again,
    fresh. (Failed videos are not: a renderer that always fails would ask forever.)
    """
    return schedule.due(step, ahead=new, horizon=horizon) - (requested - store.counts().retired)


def clips_due(due: int, kind: str, requested: int) -> int:
    """Of ``due`` queries, the clips to grade: none (pairs), all (ratings), or (both) every
    other query, so a person sees them mixed."""
    return {"pairs": 0, "ratings": due}.get(kind, (due + requested % 2) // 2)


def select_queries(
    pool: SegmentPool,
    ensemble: RewardLearner | None,
    q: QueryConfig,
    rng: np.random.Generator,
    n_pairs: int,
    n_clips: int,
) -> tuple[list[Pair], list[Segment]]:
    """The ``n_pairs`` pairs to compare and ``n_clips`` clips to grade that ``ensemble`` (None:
    no model yet, uniform) knows least about, by ``--query.selection``."""
    pairs = select_pairs(pool.segments(), n_pairs, q.selection, ensemble, q.oversample, rng)
    clips = select_clips(pool.segments(), n_clips, q.selection, ensemble, q.oversample, rng)
    return pairs, clips


def request_feedback(
    feedback: FeedbackSource, pairs: list[Pair], clips: list[Segment], kind: str, iteration: int
) -> int:
    """Hand the queries to the feedback source (with ``--feedback-kind both``, one pair and one
    clip in turn, so a person sees them mixed); returns how many were asked."""
    step = 1 if kind == "both" else max(len(pairs), len(clips))
    for i in range(0, max(len(pairs), len(clips)), step):
        if pairs[i : i + step]:
            feedback.request(pairs[i : i + step], iteration)
        if clips[i : i + step]:
            feedback.request_ratings(clips[i : i + step], iteration)
    return len(pairs) + len(clips)


def first_labels_needed(requested: int, schedule: QuerySchedule, store: TrainerStore) -> int:
    """``--feedback-wait``: the labels PPO waits for, the initial share of those requested.

    Every answer counts, skips included: a person who skips the first pairs must not leave the
    trainer waiting for pairs it will never ask for (with no usable label yet, PPO waits another
    iteration and the next pairs are requested then). Nothing requested yet: nothing to wait for.
    """
    return min(requested, schedule.due(0)) + imported_pairs(store)
