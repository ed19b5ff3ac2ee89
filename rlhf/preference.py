"""The learned-reward half of the loop: segments -> queries -> feedback -> reward ensemble.

:class:`PreferenceReward` is what :mod:`rlhf.loop` calls once per rollout. It keeps the segment
pool, asks the feedback source for labels on the schedule, retrains the ensemble when labels have
arrived, and scores the rollout with the ensemble in one batch. Human and synthetic feedback go
through the same durable store, so a batch run leaves the same record as an interactive one.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np
import torch

from rlhf.agent.collector import PolicyRollout
from rlhf.config import Config
from rlhf.logger import Logger
from rlhf.reward.model import RewardEnsemble
from rlhf.reward.select import QuerySchedule, select_pairs
from rlhf.reward.train import TrainStats, train_ensemble
from rlhf.run_dir import RunDir
from rlhf.segments import SegmentPool, cut_segments
from rlhf.store import LabelStore
from rlhf.types import Pair


class FeedbackSource(Protocol):
    """Where labels come from. Labels always end up in the store."""

    def request(self, pairs: list[Pair], iteration: int) -> None: ...

    def close(self) -> None: ...


class SyntheticSource:
    """Labels pairs at once with a simulated teacher and stores pairs and labels together."""

    def __init__(self, cfg: Config, store: LabelStore, rng: np.random.Generator) -> None:
        from rlhf.feedback.teachers import SyntheticTeacher

        self.teacher = SyntheticTeacher(cfg.teacher, rng)
        self.store = store

    def request(self, pairs: list[Pair], iteration: int) -> None:
        answers = self.teacher.label(pairs)
        self.store.add_pairs_with_labels(pairs, answers, source="synthetic", iteration=iteration)

    def close(self) -> None:
        pass


class HumanSource:
    """Queues pairs for people: a render worker makes the videos, a web server takes the labels."""

    def __init__(
        self,
        cfg: Config,
        run_dir: RunDir,
        store: LabelStore,
        rng: np.random.Generator,
        logger: Logger,
    ) -> None:
        from rlhf.feedback.human import queue_for_humans
        from rlhf.render_worker import RenderWorker
        from rlhf.server import serve_in_thread

        self._queue = queue_for_humans
        self.store = store
        self.rng = rng
        self.worker = RenderWorker(run_dir.labels, run_dir.videos, cfg.video)
        self.worker.start()
        try:
            self.server = serve_in_thread(store, run_dir.videos, cfg.web)
        except BaseException:
            self.worker.stop()
            raise
        logger.message(f"\n  Label pairs in your browser: {self.server.url}\n")
        if cfg.web.open_browser:
            import webbrowser

            webbrowser.open(self.server.url)

    def request(self, pairs: list[Pair], iteration: int) -> None:
        self._queue(self.store, pairs, self.rng, iteration)

    def close(self) -> None:
        try:
            self.server.stop()
        finally:
            self.worker.stop()


class PreferenceReward:
    """Reward source for ``--reward learned``: called once per rollout by the loop."""

    def __init__(
        self,
        cfg: Config,
        run_dir: RunDir,
        obs_dim: int,
        act_dim: int,
        device: torch.device,
        logger: Logger,
        rng: np.random.Generator,
    ) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.logger = logger
        seeds = np.random.SeedSequence(cfg.seed).spawn(4)
        self.rng_segments, self.rng_query, self.rng_train, rng_feedback = (
            np.random.default_rng(s) for s in seeds
        )
        self.store = LabelStore(run_dir.labels)
        self.store.set_meta("run_name", run_dir.name)
        self.store.set_meta("env_id", cfg.env_id)
        self.ensemble = RewardEnsemble(obs_dim, act_dim, cfg.reward_model, device, seed=cfg.seed)
        self.pool = SegmentPool(cfg.query.pool_size)
        self.schedule = QuerySchedule(
            cfg.query.total_labels, cfg.query.initial_fraction, cfg.total_timesteps
        )
        self.requested = 0
        self.trained_on = 0
        self._last_step = 0
        self.stats: TrainStats | None = None
        self._pairs: dict[int, Pair] = {}
        self._status("starting", 0, 0, float("nan"))
        if cfg.feedback == "synthetic":
            self.source: FeedbackSource = SyntheticSource(cfg, self.store, rng_feedback)
        else:
            self.source = HumanSource(cfg, run_dir, self.store, rng_feedback, logger)

    # -- the loop's interface -------------------------------------------------------------------
    @property
    def labels_used(self) -> int:
        return self.trained_on

    @property
    def val_accuracy(self) -> float | None:
        if self.stats is None or np.isnan(self.stats.val_accuracy):
            return None
        return float(self.stats.val_accuracy)

    def __call__(self, rollout: PolicyRollout, iteration: int, step: int) -> np.ndarray | None:
        """Score ``rollout`` with the learned reward; None while there is nothing to learn from."""
        raw = rollout.raw
        self._last_step = step
        self.pool.add(cut_segments(raw, self.cfg.query.segment_length, self.rng_segments))
        self._request_labels(iteration, step)
        self._wait_for_initial_labels(iteration, step)
        self._maybe_train(step)
        if self.trained_on == 0:
            return None
        steps, n, obs_dim = raw.obs.shape
        rewards = self.ensemble.predict(
            raw.obs.reshape(-1, obs_dim), raw.actions.reshape(steps * n, -1)
        )
        self._log_reward_quality(rewards, raw.true_rewards.reshape(-1), raw.valid.reshape(-1), step)
        return rewards.reshape(steps, n)

    def report(self, iteration: int, step: int, mean_return: float) -> None:
        self._status("training", iteration, step, mean_return)

    def close(self) -> None:
        try:
            self.source.close()
            # Labels that arrived after the last round still count: train once more on them.
            self._maybe_train(self._last_step, final=True)
        finally:
            self.ensemble.save(self.run_dir.checkpoints / "reward_ensemble.pt")
            status = self.store.get_meta("trainer_status", {})
            self.store.set_meta("trainer_status", {**status, "phase": "finished"})

    # -- stages ---------------------------------------------------------------------------------
    def _request_labels(self, iteration: int, step: int) -> None:
        want = self.schedule.due(step) - self.requested
        if want <= 0 or len(self.pool) < 2:
            return
        ensemble = self.ensemble if self.trained_on > 0 else None
        q = self.cfg.query
        pairs = select_pairs(
            self.pool.segments(), want, q.selection, ensemble, q.oversample, self.rng_query
        )
        self.source.request(pairs, iteration)
        self.requested += len(pairs)
        self.logger.scalar("labels/requested", self.requested, step)

    def _wait_for_initial_labels(self, iteration: int, step: int) -> None:
        """With --feedback-wait, block until the initial share of labels has arrived."""
        if not self.cfg.feedback_wait or self.trained_on > 0:
            return
        needed = max(1, min(self.requested, self.schedule.due(0)))
        self._status("waiting for labels", iteration, step, float("nan"))
        self.logger.message(f"waiting for {needed} labels before the first policy update")
        # Count every answer, skips included: a person who skips the first pairs must not leave
        # the trainer waiting for pairs it will never ask for. With no usable label yet, PPO
        # simply waits another iteration (the next pairs are requested then).
        while self.store.counts().labelled < needed:
            time.sleep(0.5)

    def _maybe_train(self, step: int, final: bool = False) -> None:
        """Retrain once labels grew by ``retrain_growth`` (or on any change when ``final``)."""
        prefs = self.store.preferences(self._pairs)
        growth = self.cfg.reward_model.retrain_growth
        grown = len(prefs) != self.trained_on and (
            final or self.trained_on == 0 or len(prefs) >= self.trained_on * (1 + growth)
        )
        if not prefs or not grown:
            self._log_labels(step)
            return
        self.stats = train_ensemble(self.ensemble, prefs, self.cfg.reward_model, self.rng_train)
        self.trained_on = len(prefs)
        self.logger.scalars(
            {
                "reward/train_loss": self.stats.train_loss,
                "reward/val_loss": self.stats.val_loss,
                "reward/val_accuracy": self.stats.val_accuracy,
                "reward/epochs": self.stats.epochs,
                "labels/used": self.trained_on,
            },
            step,
        )
        self._log_labels(step)

    def _log_labels(self, step: int) -> None:
        counts = self.store.counts()
        self.logger.scalars(
            {
                "labels/total": counts.labelled,
                "labels/equal": counts.equal,
                "labels/skipped": counts.skipped,
            },
            step,
        )

    def _log_reward_quality(
        self, learned: np.ndarray, true: np.ndarray, valid: np.ndarray, step: int
    ) -> None:
        learned, true = learned[valid], true[valid]
        if learned.size > 1 and learned.std() > 0 and true.std() > 0:
            self.logger.scalar("reward/pearson_true", float(np.corrcoef(learned, true)[0, 1]), step)

    def _status(self, phase: str, iteration: int, step: int, mean_return: float) -> None:
        self.store.set_meta(
            "trainer_status",
            {
                "phase": phase,
                "iteration": iteration,
                "env_steps": step,
                "total_timesteps": self.cfg.total_timesteps,
                "latest_true_return": None if np.isnan(mean_return) else round(mean_return, 2),
                "labels_requested": self.requested,
                "labels_total": self.cfg.query.total_labels,
                "updated_at": time.time(),
            },
        )
