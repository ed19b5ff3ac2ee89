"""What the loop reports: TensorBoard scalars of each stage, and the status the page shows
(:class:`StatusBoard`, the one way a stage or a wait tells the page).

Keys follow CleanRL (``charts/``, ``losses/``) plus ``reward/`` and ``labels/`` for the
preference side. ``charts/episodic_return`` is always the run's *true* return, whatever PPO
trains on: the env's, or with a target behaviour (``--teacher.target``/``--teacher.reward``)
the target's, also logged as ``charts/target_return``, the env's own as ``charts/env_return``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from rlhf.agent.collector import PolicyRollout
from rlhf.agent.ppo import UpdateStats
from rlhf.config import Config
from rlhf.core.status import Phase, TrainerStatus
from rlhf.reward.learner import RewardLearner
from rlhf.run.lifecycle import Progress, Summary
from rlhf.run.logger import Logger
from rlhf.store import StoreCounts
from rlhf.store.meta import STATUS_META
from rlhf.store.protocols import TrainerStore


def log_iteration(
    logger: Logger,
    rollout: PolicyRollout,
    stats: UpdateStats | None,
    learning_rate: float,
    step: int,
    sps: float,
) -> None:
    """Episodes that ended in ``rollout``, speed, and the PPO update's losses (if there was one)."""
    for ret, length, horizon in zip(
        rollout.episode_returns, rollout.episode_lengths, rollout.horizon_returns, strict=True
    ):
        logger.scalar("charts/episodic_return", ret, step)
        logger.scalar("charts/episodic_length", length, step)
        if horizon != ret:  # fixed-horizon episodes: also the return over every step
            logger.scalar("charts/horizon_return", horizon, step)
    for ret, env_ret in zip(rollout.episode_returns, rollout.env_returns, strict=False):
        logger.scalar("charts/target_return", ret, step)  # with a target only (env_returns)
        logger.scalar("charts/env_return", env_ret, step)
    if rollout.episode_successes:  # goal envs: the share of episodes that ended at the goal
        logger.scalar("charts/success_rate", float(np.mean(rollout.episode_successes)), step)
    logger.scalar("charts/sps", sps, step)
    if stats is not None:  # no update this iteration: no label to learn from yet
        logger.scalars({"charts/learning_rate": learning_rate, **stats.metrics()}, step)


def log_labels(logger: Logger, counts: StoreCounts, step: int) -> None:
    logger.scalars(
        {
            "labels/total": counts.labelled,
            "labels/equal": counts.equal,
            "labels/skipped": counts.skipped,
        },
        step,
    )


def log_reward_quality(
    logger: Logger,
    learned: np.ndarray,
    true: np.ndarray,
    valid: np.ndarray,
    step: int,
    parts: Mapping[str, np.ndarray] | None = None,
) -> None:
    """Pearson correlation of the learned reward with the true reward over the rollout's real
    steps (``reward/pearson_true``), and with each term of the env's reward that its ``info``
    reports (``reward/pearson_ctrl`` ...): a learned reward can match the total well while
    missing a small term entirely (on Ant-v5 it follows forward progress and ignores the
    control cost)."""
    keep = valid.ravel()
    learned = learned.ravel()[keep]
    series = {"true": true.ravel()[keep]}
    series |= {name: part.ravel()[keep] for name, part in (parts or {}).items()}
    if learned.size < 2 or learned.std() == 0:
        return
    values = {
        f"reward/pearson_{name}": float(np.corrcoef(learned, target)[0, 1])
        for name, target in series.items()
        if target.std() > 0
    }
    if values:
        logger.scalars(values, step)


def log_ranking(
    logger: Logger, learned: np.ndarray, true: list[float] | np.ndarray, step: int
) -> None:
    """``reward/rollout_pair_accuracy``: on every pair of this rollout's segments whose true
    returns differ, the share the learned reward orders the same way.

    The held-out accuracy (``reward/val_accuracy``) is measured on labelled pairs, i.e. on what
    earlier policies did; this one measures the reward where PPO is using it now.
    """
    true = np.asarray(true, np.float64)
    left, right = np.triu_indices(len(true), k=1)
    differ = true[left] != true[right]
    if not differ.any():
        return
    left, right = left[differ], right[differ]
    same = np.sign(learned[left] - learned[right]) == np.sign(true[left] - true[right])
    logger.scalar("reward/rollout_pair_accuracy", float(same.mean()), step)


def trainer_status(
    cfg: Config,
    progress: Progress,
    labels_used: int,
    phase: Phase,
    message: str,
    labels_needed: int | None = None,
    resume_command: str | None = None,
    labels_target: int | None = None,
    eta_seconds: float | None = None,
    reward_accuracy: float | None = None,
) -> TrainerStatus:
    """The status the labelling page shows, from the loop's counters."""
    return TrainerStatus(
        phase=phase,
        message=message,
        iteration=progress.iteration,
        env_steps=progress.env_steps,
        total_timesteps=cfg.total_timesteps,
        latest_true_return=progress.mean_return,
        latest_success_rate=progress.success_rate,
        labels_requested=progress.requested,
        labels_total=cfg.query.total_labels,
        labels_used=labels_used,
        labels_needed=labels_needed,
        labels_target=labels_target,
        eta_seconds=eta_seconds,
        resume_command=resume_command,
        updated_at=time.time(),
        feedback_kind=cfg.feedback_kind,
        reward_accuracy=reward_accuracy,
    )


@dataclass
class StatusBoard:
    """The trainer status where the labelling page reads it (the store's meta): runs with a
    store only. Every stage and every wait tells the page through :meth:`publish` or
    :meth:`waiting`, directly."""

    store: TrainerStore
    cfg: Config
    progress: Progress
    reward: RewardLearner
    """Its ``fitted_on``: the labels the reward was last trained on."""
    eta_seconds: Callable[[], float | None]
    """Wall time left at this session's pace (None before its first step)."""

    def publish(self, phase: Phase, message: str, **extra: object) -> None:
        extra.setdefault("eta_seconds", self.eta_seconds())
        extra.setdefault("reward_accuracy", self.reward.held_out_figure(self.cfg.feedback_kind))
        labels_used = self.reward.fitted_on
        status = trainer_status(self.cfg, self.progress, labels_used, phase, message, **extra)  # type: ignore[arg-type]
        self.store.set_meta(STATUS_META, status.to_json())

    def waiting(self, message: str, labels_needed: int, labels_target: int | None = None) -> None:
        """Waiting for labels: ``labels_needed`` more, i.e. ``labels_target`` in the store when
        the wait ends (the page counts down from its live count)."""
        self.publish(
            Phase.WAITING, message, labels_needed=labels_needed, labels_target=labels_target
        )

    def final(self, summary: Summary, resume_command: str | None) -> None:
        """The finished run's figures for the page, as ``summary.json`` has them (written after
        the last labels were fitted): one source for every figure the finished page shows."""
        status = trainer_status(
            self.cfg,
            self.progress,
            summary.labels_used,
            Phase.FINISHED,
            "training has finished",
            resume_command=resume_command,
            reward_accuracy=summary.reward_val_accuracy
            if self.cfg.feedback_kind != "ratings"
            else self.reward.val_grade_agreement,
        )
        status = replace(
            status,
            env_steps=summary.env_steps,
            latest_true_return=summary.final_true_return,
            latest_success_rate=summary.final_success_rate,
            final=True,
        )
        self.store.set_meta(STATUS_META, status.to_json())
