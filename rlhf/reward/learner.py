"""The learned reward as a plain object: fit on preferences, score steps, export and restore state.

:class:`RewardLearner` does no I/O and knows nothing of stores, schedules or logging: the loop
hands it preferences and observations, and writes its state wherever a checkpoint goes. Its
state is made of tensors and plain Python values only, so it loads with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlhf.config import RewardConfig
from rlhf.config.ratings import DataConfig
from rlhf.core.types import Pair, Preference, Rating, Segment
from rlhf.reward.bradley_terry import preference_accuracy
from rlhf.reward.model import RewardEnsemble
from rlhf.reward.ratings import DEFAULT_SHARPNESS
from rlhf.reward.stream_train import Epochs, train_ensemble_streaming
from rlhf.reward.train import TrainStats, train_ensemble

MIN_FRESH = 10
"""New labels a round needs before their accuracy may restart the members (fewer: noise)."""
FRESH_POOL = 30
"""Decided labels (not 'equal') the held-out figure of a run without a validation split pools,
from the newest rounds back: one round's 10-20 new labels move a share by about 0.1."""


class RewardLearner:
    """An ensemble of reward models and how many labels it was last fitted on.

    Args:
        obs_dim: size of a raw observation.
        act_dim: size of an action.
        cfg: the ensemble's settings.
        device: torch device of the networks (numpy in, numpy out either way).
        seed: seeds the initial weights and the train/validation split of labels.
        seen_obs: the leading observation entries the reward reads (None: all; see
            ``--reward-model.sees``).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        cfg: RewardConfig,
        device: torch.device | str = "cpu",
        seed: int = 0,
        data: DataConfig | None = None,
        sharpness: float = DEFAULT_SHARPNESS,
        seen_obs: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.data = data or DataConfig()
        """What each training round draws (--data.*)."""
        self.sharpness = sharpness
        """k of the rating loss."""
        self.ensemble = RewardEnsemble(obs_dim, act_dim, cfg, device, seed=seed, seen_obs=seen_obs)
        self.fitted_on = 0
        """Labels and ratings (skips excluded) in the last training round; 0 before the first."""
        self.fitted_prefs = 0
        """Of those, the labels (the store hands them oldest first, so later ones are new)."""
        self.stats: TrainStats | None = None
        """Figures of the last training round."""
        self.fresh_hits: list[tuple[int, int]] = []
        """Per round after the first: (decided new labels, those the reward ordered right
        before it trained on them)."""

    @property
    def trained(self) -> bool:
        """Whether the reward has been fitted to at least one label."""
        return self.fitted_on > 0

    def wants_fit(self, labels: int, final: bool = False) -> bool:
        """Whether ``labels`` preferences justify a new training round.

        The first labels always do; after that, the labels must have grown by
        ``cfg.retrain_growth`` since the last round (which bounds reward-training time over a
        run), or merely changed when ``final`` (the last round of a run).
        """
        if labels == 0 or labels == self.fitted_on:
            return False
        if final or not self.trained:
            return True
        return labels >= self.fitted_on * (1 + self.cfg.retrain_growth)

    def fit(
        self,
        prefs: list[Preference],
        rng: np.random.Generator,
        ratings: list[Rating] | None = None,
        unlabelled: list[Segment] | None = None,
    ) -> TrainStats:
        """One training round on all of ``prefs`` and ``ratings`` (warm-started, unless the new
        labels say the reward misorders what the agent does now: ``cfg.restart_below``);
        ``unlabelled``: recent behaviour for ``cfg.self_predict``."""
        ratings = ratings or []
        fresh = prefs[self.fitted_prefs :] if self.trained else []
        accuracy = preference_accuracy(self.ensemble, fresh) if fresh else float("nan")
        decided = sum(p.mu != 0.5 for p in fresh)
        if decided:
            self.fresh_hits.append((decided, round(accuracy * decided)))
        restart = len(fresh) >= MIN_FRESH and accuracy < self.cfg.restart_below
        if restart:
            self._restart(rng)
        stats = train_ensemble(
            self.ensemble, prefs, self.cfg, rng, ratings, self.data, self.sharpness, unlabelled
        )
        self.stats = dataclasses.replace(stats, fresh_accuracy=accuracy, restarted=restart)
        self.fitted_on = len(prefs) + len(ratings)
        self.fitted_prefs = len(prefs)
        return self.stats

    def _restart(self, rng: np.random.Generator) -> None:
        """New member weights (drawn from ``rng``, so one seed still gives one run); the
        train/validation split stays the ensemble's own."""
        ens = self.ensemble
        fresh = RewardEnsemble(
            ens.obs_dim, ens.act_dim, self.cfg, "cpu", seed=int(rng.integers(2**31)),
            seen_obs=ens.seen_obs,
        )  # fmt: skip
        ens.members.load_state_dict(fresh.members.state_dict())

    def fit_stream(
        self, epochs: Epochs, val: list[Preference], rng: np.random.Generator
    ) -> TrainStats:
        """One training round on labels streamed from disk, pass by pass (see
        :mod:`rlhf.reward.stream_train`); ``val`` is the held-out share kept in memory."""
        self.stats = train_ensemble_streaming(self.ensemble, epochs, val, self.cfg, rng)
        self.fitted_on = self.fitted_prefs = self.stats.n_train + self.stats.n_val
        return self.stats

    def member_returns(self, segments: list[Segment]) -> np.ndarray:
        """Each member's predicted return of each segment: (M, S); used to select clips."""
        obs = np.concatenate([s.obs for s in segments])
        actions = np.concatenate([s.actions for s in segments])
        rewards = self.ensemble.member_rewards(obs, actions)
        return rewards.reshape(rewards.shape[0], len(segments), -1).sum(axis=2)

    def score(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The learned reward of each step: (B, obs_dim), (B, act_dim) -> (B,) float32."""
        return self.ensemble.predict(obs, actions)

    def explore_weight(self, env_steps: int) -> float:
        """The weight of the disagreement bonus after ``env_steps`` (RUNE): the configured
        bonus, halved every ``explore_half_life`` steps; 0 when off."""
        return self.cfg.explore_bonus * 0.5 ** (env_steps / self.cfg.explore_half_life)

    def score_exploring(
        self, obs: np.ndarray, actions: np.ndarray, weight: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """What PPO is paid, and the learned reward alone: (mean + ``weight`` x members' std,
        mean), (B,) float32 each. With weight 0 both are :meth:`score`."""
        if weight == 0:
            mean = self.score(obs, actions)
            return mean, mean
        mean, spread = self.ensemble.predict_with_spread(obs, actions)
        return mean + np.float32(weight) * spread, mean

    def paying(self, env_steps: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """What an agent is paid per step from ``env_steps`` on: :meth:`score`, plus the
        disagreement bonus at its weight then (SAC relabels its buffer with it after a refit)."""
        weight = self.explore_weight(env_steps)
        if weight == 0:
            return self.score
        return lambda obs, actions: self.score_exploring(obs, actions, weight)[0]

    def absorbing_reward(self) -> float:
        """The learned reward of a step in the absorbing state, i.e. after an episode's end."""
        return self.ensemble.absorbing_reward()

    def preference_probs(self, pairs: list[Pair]) -> np.ndarray:
        """Each member's P(left preferred) for ``pairs``: (M, P); used to select queries."""
        return self.ensemble.preference_probs(pairs)

    @property
    def val_accuracy(self) -> float | None:
        """Held-out accuracy of the last round, or None (no round yet, or no held-out labels)."""
        if self.stats is None or np.isnan(self.stats.val_accuracy):
            return None
        return float(self.stats.val_accuracy)

    @property
    def pooled_fresh_accuracy(self) -> float | None:
        """The share of the newest labels (at least :data:`FRESH_POOL` decided ones, pooled
        from the latest rounds back) that the reward ordered right before any round trained on
        them: a held-out figure without a validation split. None below :data:`MIN_FRESH`."""
        decided = right = 0
        for n, hits in reversed(self.fresh_hits):
            decided, right = decided + n, right + hits
            if decided >= FRESH_POOL:
                break
        return right / decided if decided >= MIN_FRESH else None

    @property
    def held_out_accuracy(self) -> float | None:
        """The pair accuracy a person reads: on the validation split, or where every label
        trains (no split), on the newest labels before they were trained on."""
        if self.stats is not None and self.stats.n_val > 0:
            return self.val_accuracy
        return self.pooled_fresh_accuracy

    @property
    def val_grade_agreement(self) -> float | None:
        """Share of held-out clip pairs with different grades that the last round orders as the
        grades do, or None (no round yet, or no such pair held out)."""
        if self.stats is None or np.isnan(self.stats.rating_val_pair_accuracy):
            return None
        return float(self.stats.rating_val_pair_accuracy)

    def held_out_figure(self, feedback_kind: str) -> float | None:
        """The held-out figure a person reads for this kind of feedback: the grade agreement
        of a ratings-only run, the pair accuracy otherwise."""
        return self.val_grade_agreement if feedback_kind == "ratings" else self.held_out_accuracy

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild this learner (see :meth:`from_state_dict`)."""
        ens = self.ensemble
        return {
            "obs_dim": ens.obs_dim,
            "act_dim": ens.act_dim,
            "seen_obs": ens.seen_obs,
            "seed": ens.seed,
            "cfg": _plain(dataclasses.asdict(self.cfg)),
            "weights": ens.state_dict(),
            "fitted_on": self.fitted_on,
            "fitted_prefs": self.fitted_prefs,
            "stats": None if self.stats is None else dataclasses.asdict(self.stats),
            "fresh_hits": [list(pair) for pair in self.fresh_hits],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore weights, normalisers and figures written by :meth:`state_dict`."""
        self.ensemble.load_state_dict(state["weights"])
        self.fitted_on = int(state["fitted_on"])
        # Older checkpoints: every label was a preference unless ratings say otherwise.
        self.fitted_prefs = int(state.get("fitted_prefs", self.fitted_on))
        self.stats = None if state["stats"] is None else TrainStats(**state["stats"])
        self.fresh_hits = [
            (int(n), int(hits)) for n, hits in state.get("fresh_hits", [])
        ]  # older: none

    @classmethod
    def from_state_dict(
        cls, state: dict[str, Any], device: torch.device | str = "cpu"
    ) -> RewardLearner:
        """A learner rebuilt from :meth:`state_dict` alone (e.g. a saved ``reward_model.pt``)."""
        cfg_fields = dict(state["cfg"])
        cfg_fields["hidden_sizes"] = tuple(cfg_fields["hidden_sizes"])
        cfg = RewardConfig(**cfg_fields)
        learner = cls(
            state["obs_dim"], state["act_dim"], cfg, device, seed=state["seed"],
            seen_obs=state.get("seen_obs"),  # older files: every entry
        )  # fmt: skip
        learner.load_state_dict(state)
        return learner


def _plain(value: Any) -> Any:
    """Tuples to lists, recursively: a state of plain JSON-like values loads with weights_only."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
