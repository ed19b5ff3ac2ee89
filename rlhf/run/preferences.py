"""The learned-reward side of a run: store, reward learner, feedback source, segment pool, schedule.

:func:`open_preferences` builds them for a run; :mod:`rlhf.run.loop` drives them stage by stage.
Human and synthetic feedback both go through the run's durable store, so a batch run leaves the
same record as an interactive one, and a resumed run trains on every label ever given to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rlhf.config import Config
from rlhf.core.types import Pair, Preference, Rating, RolloutBatch, Segment
from rlhf.data.seed_labels import LabelsSource, imported_pairs, rating_levels, seed_labels
from rlhf.envs.goals import GOAL_TASK
from rlhf.feedback.sources import FeedbackSource, HumanSource, SyntheticSource
from rlhf.queries.novelty import Coverage, coverage, new_share
from rlhf.queries.segments import SegmentPool
from rlhf.queries.select import QuerySchedule
from rlhf.reward.learner import RewardLearner
from rlhf.run.preflight import RunPlan
from rlhf.run.run_dir import RunDir
from rlhf.store import LabelStore
from rlhf.store.meta import (
    ENV_ID_META,
    ENV_KWARGS_META,
    RUN_NAME_META,
    SCALE_META,
    TARGET_META,
    TASK_META,
)
from rlhf.store.protocols import TrainerStore


@dataclass
class Preferences:
    """What a learned-reward run holds besides the agent."""

    store: TrainerStore
    reward: RewardLearner
    feedback: FeedbackSource
    pool: SegmentPool
    schedule: QuerySchedule
    pair_cache: dict[int, Pair] = field(default_factory=dict)
    """Pairs read from the store so far, by id (their segments never change)."""
    clip_cache: dict[int, Segment] = field(default_factory=dict)
    """Rated clips read from the store so far, by query id."""
    coverage: Coverage | None = None
    """The labelled steps' input range (--query.ask-when-new), as of its ``labels``."""

    def labelled(self) -> list[Preference]:
        """Every trainable label in the store (skips excluded), oldest first."""
        return self.store.preferences(self.pair_cache)

    def rated(self) -> list[Rating]:
        """Every trainable rating in the store (skips excluded), oldest first."""
        return self.store.rated(self.clip_cache)

    def new_share(self, raw: RolloutBatch) -> float | None:
        """Share of the rollout's steps outside the labelled steps' range
        (:mod:`rlhf.queries.novelty`); None before the first label."""
        labelled = self.labelled()
        if self.coverage is None or self.coverage.labels != len(labelled):
            self.coverage = coverage(labelled, with_actions=not self.reward.cfg.observations_only)
        return None if self.coverage is None else new_share(self.coverage, raw)

    def state_dict(self) -> dict[str, Any]:
        """The reward learner and the feedback source's own state (the store is its own record).

        The segment pool is not kept: it holds recent behaviour only, and a resumed run refills
        it from its first rollout.
        """
        return {"reward": self.reward.state_dict(), "feedback": self.feedback.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reward.load_state_dict(state["reward"])
        self.feedback.load_state_dict(state["feedback"])


def open_preferences(
    cfg: Config,
    run_dir: RunDir,
    plan: RunPlan,
    device: torch.device,
    rng_feedback: np.random.Generator,
    say: Callable[[str], None],
    labels: LabelsSource | None = None,
) -> Preferences:
    """Open the run's store and build the reward learner and the feedback source; a new run's
    store gets the ``labels`` of ``--labels-from`` (read once, by the runner).

    With human feedback this starts the labelling session (render worker and web server); the
    caller closes it through ``feedback.close``.
    """
    store = _open_store(cfg, run_dir, plan, say, labels)
    scale = cfg.rating_scale()
    store.set_meta(SCALE_META, scale.to_json())  # the page draws the grade buttons from it
    env = plan.env
    seen = env.motion_obs if cfg.reward_model.sees == "motion" else None
    reward = RewardLearner(
        env.obs_dim,
        env.act_dim,
        cfg.reward_model,
        device,
        seed=cfg.seed,
        data=cfg.data,
        sharpness=cfg.ratings.sharpness,
        seen_obs=seen,
    )
    if (reads := reward.ensemble.what_it_reads()) is not None:
        say(f"reward {reads}")
    feedback = _feedback_source(cfg, run_dir, store, rng_feedback, scale.levels, say)
    return Preferences(
        store=store,
        reward=reward,
        feedback=feedback,
        pool=SegmentPool(cfg.query.pool_size),
        schedule=QuerySchedule(
            cfg.query.total_labels,
            cfg.query.initial_fraction,
            cfg.total_timesteps,
            half_rate_steps=cfg.query.half_rate_steps,
            ahead=round(cfg.query.ask_ahead * cfg.query.total_labels)
            if cfg.query.ask_when_new is not None
            else 0,
        ),
    )


def _open_store(
    cfg: Config,
    run_dir: RunDir,
    plan: RunPlan,
    say: Callable[[str], None],
    labels: LabelsSource | None,
) -> LabelStore:
    """The run's label store, with what the page and the renderer read from it."""
    store = LabelStore(run_dir.labels)
    store.set_meta(RUN_NAME_META, run_dir.name)
    store.set_meta(ENV_ID_META, cfg.env_id)
    # What the person is asked to teach, shown on the page (a goal env says what its marker is).
    store.set_meta(TASK_META, cfg.task or (GOAL_TASK if plan.env.goal_size else ""))
    store.set_meta(ENV_KWARGS_META, cfg.env_kwargs_dict())  # the renderer makes the same env
    store.set_meta(TARGET_META, cfg.teacher.target_name or "")  # whose return the page shows
    # Once: a resumed run finds them in its store (one killed while copying them does not).
    if labels is not None and not imported_pairs(store):
        copied = seed_labels(store, labels, cfg.env_id, rating_levels(cfg))
        if copied:
            say(f"seeded {copied} labels from {cfg.labels_from}")
    return store


def _feedback_source(
    cfg: Config,
    run_dir: RunDir,
    store: LabelStore,
    rng: np.random.Generator,
    levels: int,
    say: Callable[[str], None],
) -> FeedbackSource:
    """The synthetic teacher, or the labelling session a person answers in."""
    if cfg.feedback != "synthetic":
        return HumanSource(
            run_dir.root, store, cfg.web, cfg.video, rng, say, cfg.query.total_labels
        )
    clips = None
    if cfg.clip_every() > 0:  # opt-in: a render process for TensorBoard's videos/policy
        from rlhf.feedback.policy_clips import PolicyClipWorker

        clips = PolicyClipWorker(run_dir.root, store, cfg.video, say)
    return SyntheticSource(cfg.teacher, store, rng, levels, clips)
