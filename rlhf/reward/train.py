"""Fit the reward ensemble to preference labels (Bradley-Terry) and graded clips (rating loss).

The pair loss is :mod:`rlhf.reward.bradley_terry`'s. Every round trains on *all* labels so far,
warm-starting from the current weights:

* **Validation split**, stable across rounds: label i goes to validation when the i-th draw of a
  generator seeded by the ensemble's seed is below ``cfg.val_fraction``. Labels arrive append-only,
  so a label keeps its side from round to round, and a warm-started member has never been trained
  on a validation label. Below :data:`MIN_LABELS_FOR_VAL` labels there is no validation set (the
  validation figures are NaN and each member trains for ``cfg.max_epochs``).
* **Bagging**: each member trains on its own bootstrap resample of the training split (a lone
  member uses the split as is), so members disagree where the labels leave the reward open.
* **Ratings** (:mod:`rlhf.reward.ratings`) add their loss to each step's; they have a split of
  their own, and ``--data.*`` weights what each member draws (:mod:`rlhf.reward.sampling`).
* **Early stopping** per member on its validation loss, with ``cfg.patience``, bounded by
  ``cfg.max_epochs``; the best weights (including the warm start itself) are restored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from rlhf.config import RewardConfig
from rlhf.config.presets import general_reward
from rlhf.config.ratings import DataConfig
from rlhf.core.types import Preference, Rating, Segment
from rlhf.reward import self_predict
from rlhf.reward.bradley_terry import (
    PairData,
    bradley_terry_loss,
    eval_pair_loss,
    preference_accuracy,
    stack_labels,
)
from rlhf.reward.model import RewardEnsemble, RewardNet
from rlhf.reward.ratings import (
    DEFAULT_SHARPNESS,
    RatingData,
    eval_rating_loss,
    rated_pair_accuracy,
    rating_accuracy,
    rating_loss,
    stack_ratings,
)
from rlhf.reward.split import member_sample, split_label_sets


@dataclass(frozen=True)
class TrainStats:
    """Figures of one training round (losses are per-pair Bradley-Terry cross-entropies).

    Attributes:
        train_loss: mean over members of the loss on the whole training split, after training.
        val_loss: mean over members of the loss on the validation split (NaN without one).
        val_accuracy: share of non-equal validation labels on whose side the ensemble's mean
            P(left) falls (NaN when there are none).
        epochs: epochs run by the longest-running member.
        n_train: labels in the training split.
        n_val: labels in the validation split.
    """

    train_loss: float
    val_loss: float
    val_accuracy: float
    epochs: int
    n_train: int
    n_val: int
    rating_val_accuracy: float = math.nan
    """Share of held-out rated clips whose most likely class is their grade (NaN: none)."""
    rating_val_pair_accuracy: float = math.nan
    """Share of held-out clip pairs with different grades ordered as the grades are."""
    n_ratings: int = 0
    """Rated clips in the round (both splits)."""
    fresh_accuracy: float = math.nan
    """Share of the labels new since the last round that the reward ordered right before this
    round trained on them (NaN: the first round, or no new decided label)."""
    restarted: bool = False
    """Whether the members started this round from new weights (--reward-model.restart-below)."""

    def metrics(self) -> dict[str, float]:
        """TensorBoard scalars under ``reward/``."""
        figures = {
            "reward/train_loss": self.train_loss,
            "reward/val_loss": self.val_loss,
            "reward/val_accuracy": self.val_accuracy,
            "reward/epochs": self.epochs,
        }
        if not math.isnan(self.fresh_accuracy):
            figures["reward/fresh_accuracy"] = self.fresh_accuracy
            figures["reward/restarted"] = float(self.restarted)
        if self.n_ratings:
            figures["reward/rating_val_accuracy"] = self.rating_val_accuracy
            figures["reward/rating_val_pair_accuracy"] = self.rating_val_pair_accuracy
        return figures


@dataclass(frozen=True)
class _Round:
    """What one round trains on: pairs and/or rated clips, the rating loss's k, and the share
    of answers the pair loss assumes random."""

    pairs: PairData | None
    ratings: RatingData | None
    k: float
    label_noise: float = 0.0
    unlabelled: self_predict.Transitions | None = None
    """Steps of the agent's behaviour for ``--reward-model.self-predict`` (None: off)."""


def _round_loss(
    net: RewardNet, r: _Round, pairs: torch.Tensor, clips: torch.Tensor
) -> torch.Tensor:
    """The Bradley-Terry loss of ``pairs`` plus the rating loss of ``clips`` (either may be empty)."""
    loss = torch.zeros((), device=next(net.parameters()).device)
    if r.pairs is not None and pairs.numel():
        loss = loss + bradley_terry_loss(net, r.pairs, pairs, r.label_noise)
    if r.ratings is not None and clips.numel():
        loss = loss + rating_loss(net, r.ratings, clips, r.k)
    return loss


def _val_loss(net: RewardNet, r: _Round, pairs: torch.Tensor, clips: torch.Tensor) -> float:
    """Validation loss: per-pair BT loss plus the rating loss of all held-out clips."""
    parts = [
        eval_pair_loss(net, r.pairs, pairs, r.label_noise) if r.pairs is not None else math.nan
    ]
    parts.append(eval_rating_loss(net, r.ratings, clips, r.k))
    known = [v for v in parts if not math.isnan(v)]
    return float(sum(known)) if known else math.nan


def _batches(sample: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    if not len(sample):
        return []
    order = sample[rng.permutation(len(sample))]
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _run_epoch(
    net: RewardNet,
    opt: torch.optim.Optimizer,
    r: _Round,
    sample: tuple[np.ndarray, np.ndarray],
    cfg: RewardConfig,
    rng: np.random.Generator,
    predictor: torch.nn.Linear | None = None,
) -> None:
    """Shuffled passes over the pairs and clips of ``sample``, dropout on, until at least
    ``cfg.min_epoch_steps`` gradient steps: step i of a pass trains on pair minibatch i and clip
    minibatch i together."""
    net.train()
    device = next(net.parameters()).device
    empty = torch.zeros(0, dtype=torch.long, device=device)
    steps = 0
    while steps < cfg.min_epoch_steps:
        pair_b, clip_b = (_batches(s, cfg.batch_size, rng) for s in sample)
        if not pair_b and not clip_b:
            return
        for i in range(max(len(pair_b), len(clip_b))):
            pairs = torch.from_numpy(pair_b[i]).to(device) if i < len(pair_b) else empty
            clips = torch.from_numpy(clip_b[i]).to(device) if i < len(clip_b) else empty
            loss = _round_loss(net, r, pairs, clips)
            if cfg.input_sparsity > 0:
                loss = loss + cfg.input_sparsity * net.input_group_norm()
            if predictor is not None and r.unlabelled is not None:
                loss = loss + cfg.self_predict * self_predict.loss(
                    net, predictor, r.unlabelled, rng
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1


def member_optimiser(
    decayed: list[torch.nn.Parameter], undecayed: list[torch.nn.Parameter], cfg: RewardConfig
) -> torch.optim.AdamW:
    """AdamW on one member: --reward-model.weight-decay on ``decayed``, none on ``undecayed``."""
    groups: list[dict] = [{"params": decayed, "weight_decay": cfg.weight_decay}]
    if undecayed:
        groups.append({"params": undecayed, "weight_decay": 0.0})
    return torch.optim.AdamW(groups, lr=cfg.learning_rate)


def _train_member(
    net: RewardNet,
    r: _Round,
    sample: tuple[np.ndarray, np.ndarray],
    val: tuple[torch.Tensor, torch.Tensor],
    cfg: RewardConfig,
    rng: np.random.Generator,
) -> int:
    """Train one member on the pairs and clips ``sample`` (with repeats); returns the epochs run."""
    params, undecayed = net.decayed_parameters()
    predictor = None
    if r.unlabelled is not None and cfg.self_predict > 0:
        predictor = self_predict.head(net, r.unlabelled.next_obs.shape[1])
        params += list(predictor.parameters())
    opt = member_optimiser(params, undecayed, cfg)
    if all(v.numel() == 0 for v in val):
        for _ in range(cfg.max_epochs):
            _run_epoch(net, opt, r, sample, cfg, rng, predictor)
        net.eval()
        return cfg.max_epochs
    # The warm start competes too: a round never leaves a member worse on validation. Not an
    # untrained one (--reward-model.output-init zero): on a small validation set its ties (loss
    # ln 2) can beat every epoch, and the reward would stay flat.
    best = math.inf if net.untrained() else _val_loss(net, r, *val)
    best_state = {k: v.clone() for k, v in net.state_dict().items()}
    stale = epochs = 0
    while epochs < cfg.max_epochs and stale < cfg.patience:
        _run_epoch(net, opt, r, sample, cfg, rng, predictor)
        epochs += 1
        loss = _val_loss(net, r, *val)
        if loss < best or math.isnan(best):
            best, stale = loss, 0
            best_state = {k: v.clone() for k, v in net.state_dict().items()}
        else:
            stale += 1
    net.load_state_dict(best_state)
    net.eval()
    return epochs


def _labelled_steps(
    prefs: list[Preference], ratings: list[Rating]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every step of every labelled segment: observations, actions and the absorbing flag."""
    segments = [seg for p in prefs for seg in (p.pair.left, p.pair.right)]
    segments += [r.segment for r in ratings]
    return (
        np.concatenate([s.obs for s in segments]),
        np.concatenate([s.actions for s in segments]),
        np.concatenate([s.absorbing_mask() for s in segments]),
    )


def _rng_devices(device: torch.device) -> list[int]:
    return [device.index or 0] if device.type == "cuda" else []


def train_ensemble(
    ensemble: RewardEnsemble,
    prefs: list[Preference],
    cfg: RewardConfig,
    rng: np.random.Generator,
    ratings: list[Rating] | None = None,
    data: DataConfig | None = None,
    sharpness: float = DEFAULT_SHARPNESS,
    unlabelled: list[Segment] | None = None,
) -> TrainStats:
    """One training round of every member on all of ``prefs`` and ``ratings`` (the sum of the
    Bradley-Terry and the rating loss); refits both normalisers. With
    ``cfg.self_predict``, the members also predict the next observation on the steps of
    ``unlabelled`` (:mod:`rlhf.reward.self_predict`).

    ``data`` weights what each member draws (:mod:`rlhf.reward.sampling`); None or its
    defaults: plain bagging. Deterministic given the ensemble's state, the labels and ``rng``
    (on CPU): ``rng`` drives the samples, the minibatch order and (through a torch seed) dropout.
    """
    ratings = ratings or []
    data = data or DataConfig()
    cfg = general_reward(cfg)  # what a run leaves to its env and algorithm, outside a run
    if not prefs and not ratings:
        return TrainStats(math.nan, math.nan, math.nan, 0, 0, 0)
    split = split_label_sets(prefs, ratings, cfg.val_fraction, ensemble.seed, data)
    (train_idx, val_idx), (rtrain_idx, rval_idx) = split
    ensemble.fit_input_normaliser(*_labelled_steps(prefs, ratings))
    r = _Round(
        stack_labels(ensemble, prefs),
        stack_ratings(ensemble, ratings) if ratings else None,
        sharpness,
        cfg.label_noise,
        self_predict.transitions(ensemble, unlabelled or []) if cfg.self_predict > 0 else None,
    )
    device = ensemble.device
    val_t = (torch.from_numpy(val_idx).to(device), torch.from_numpy(rval_idx).to(device))
    epochs = 0
    with torch.random.fork_rng(devices=_rng_devices(device)):
        torch.manual_seed(int(rng.integers(2**62)))
        for net in ensemble.members:
            sample = member_sample(prefs, ratings, train_idx, rtrain_idx, ensemble.size, data, rng)
            epochs = max(epochs, _train_member(net, r, sample, val_t, cfg, rng))
    ensemble.eval()
    ensemble.fit_output_normaliser(*_labelled_steps(prefs, ratings))
    train_t = (torch.from_numpy(train_idx).to(device), torch.from_numpy(rtrain_idx).to(device))
    return TrainStats(
        train_loss=float(np.mean([_val_loss(n, r, *train_t) for n in ensemble.members])),
        val_loss=float(np.mean([_val_loss(n, r, *val_t) for n in ensemble.members])),
        val_accuracy=preference_accuracy(ensemble, [prefs[i] for i in val_idx]),
        epochs=epochs,
        n_train=len(train_idx) + len(rtrain_idx),
        n_val=len(val_idx) + len(rval_idx),
        rating_val_accuracy=rating_accuracy(ensemble, r.ratings, val_t[1], sharpness),
        rating_val_pair_accuracy=rated_pair_accuracy(ensemble, r.ratings, val_t[1]),
        n_ratings=len(ratings),
    )
