"""Fit the reward ensemble to preference labels with the Bradley-Terry loss.

P(left preferred) = sigmoid(sum_t r(left_t) - sum_t r(right_t)); the loss is the cross-entropy
against the soft label mu (1 left, 0 right, 0.5 equal). Every round trains on *all* labels so far,
warm-starting from the current weights:

* **Validation split**, stable across rounds: label i goes to validation when the i-th draw of a
  generator seeded by the ensemble's seed is below ``cfg.val_fraction``. Labels arrive append-only,
  so a label keeps its side from round to round, and a warm-started member has never been trained
  on a validation label. Below :data:`MIN_LABELS_FOR_VAL` labels there is no validation set (the
  validation figures are NaN and each member trains for ``cfg.max_epochs``).
* **Bagging**: each member trains on its own bootstrap resample of the training split (a lone
  member uses the split as is), so members disagree where the labels leave the reward open.
* **Early stopping** per member on its validation loss, with ``cfg.patience``, bounded by
  ``cfg.max_epochs``; the best weights (including the warm start itself) are restored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from rlhf.config import RewardConfig
from rlhf.reward.model import RewardEnsemble, RewardNet, stack_pairs
from rlhf.types import Preference

MIN_LABELS_FOR_VAL = 5
"""Fewer labels than this: no validation split (one or two labels say nothing about fit)."""
_EVAL_PAIRS = 512
"""Pairs per forward pass when evaluating a loss without gradients."""


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

    def metrics(self) -> dict[str, float]:
        """TensorBoard scalars under ``reward/``."""
        return {
            "reward/train_loss": self.train_loss,
            "reward/val_loss": self.val_loss,
            "reward/val_accuracy": self.val_accuracy,
            "reward/epochs": self.epochs,
        }


@dataclass(frozen=True)
class _Data:
    """All labelled pairs as tensors: x (P, 2, T, D), step mask (P, 2, T), mu (P,)."""

    x: torch.Tensor
    mask: torch.Tensor
    mu: torch.Tensor


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


def bradley_terry_loss(net: RewardNet, data: _Data, idx: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the pairs ``idx`` under ``net`` (in whatever mode it is in)."""
    rewards = net(data.x[idx])  # (B, 2, T)
    returns = (rewards * data.mask[idx]).sum(dim=-1)
    return F.binary_cross_entropy_with_logits(returns[:, 0] - returns[:, 1], data.mu[idx])


@torch.no_grad()
def _eval_loss(net: RewardNet, data: _Data, idx: torch.Tensor) -> float:
    """Per-pair loss over ``idx`` in eval mode (dropout off), in chunks."""
    if idx.numel() == 0:
        return math.nan
    net.eval()
    total = 0.0
    for chunk in idx.split(_EVAL_PAIRS):
        total += float(bradley_terry_loss(net, data, chunk)) * chunk.numel()
    return total / idx.numel()


def _run_epoch(
    net: RewardNet,
    opt: torch.optim.Optimizer,
    data: _Data,
    sample: np.ndarray,
    batch_size: int,
    rng: np.random.Generator,
) -> None:
    """One pass over ``sample`` in shuffled minibatches, dropout on."""
    net.train()
    order = torch.from_numpy(sample[rng.permutation(len(sample))]).to(data.x.device)
    for batch in order.split(batch_size):
        loss = bradley_terry_loss(net, data, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def _train_member(
    net: RewardNet,
    data: _Data,
    sample: np.ndarray,
    val_idx: torch.Tensor,
    cfg: RewardConfig,
    rng: np.random.Generator,
) -> int:
    """Train one member on the pairs ``sample`` (with repeats); returns the epochs run."""
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    if val_idx.numel() == 0:
        for _ in range(cfg.max_epochs):
            _run_epoch(net, opt, data, sample, cfg.batch_size, rng)
        net.eval()
        return cfg.max_epochs
    # The warm start competes too: a round never leaves a member worse on validation.
    best = _eval_loss(net, data, val_idx)
    best_state = {k: v.clone() for k, v in net.state_dict().items()}
    stale = epochs = 0
    while epochs < cfg.max_epochs and stale < cfg.patience:
        _run_epoch(net, opt, data, sample, cfg.batch_size, rng)
        epochs += 1
        val = _eval_loss(net, data, val_idx)
        if val < best:
            best, stale = val, 0
            best_state = {k: v.clone() for k, v in net.state_dict().items()}
        else:
            stale += 1
    net.load_state_dict(best_state)
    net.eval()
    return epochs


def _stack(ensemble: RewardEnsemble, prefs: list[Preference]) -> _Data:
    x, mask = stack_pairs(ensemble, [p.pair for p in prefs])
    mu = torch.tensor([p.mu for p in prefs], dtype=torch.float32, device=x.device)
    return _Data(x, mask, mu)


def _labelled_steps(prefs: list[Preference]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every step of every labelled segment: observations, actions and the absorbing flag."""
    segments = [seg for p in prefs for seg in (p.pair.left, p.pair.right)]
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
) -> TrainStats:
    """One training round of every member on all of ``prefs``; refits both normalisers.

    Deterministic given the ensemble's state, ``prefs`` and ``rng`` (on CPU): ``rng`` drives the
    bootstrap samples, the minibatch order and (through a torch seed) dropout.
    """
    if not prefs:
        return TrainStats(math.nan, math.nan, math.nan, 0, 0, 0)
    train_idx, val_idx = split_indices(len(prefs), cfg.val_fraction, ensemble.seed)
    obs, actions, absorbing = _labelled_steps(prefs)
    ensemble.fit_input_normaliser(obs, actions, absorbing)
    data = _stack(ensemble, prefs)
    val_t = torch.from_numpy(val_idx).to(data.x.device)
    epochs = 0
    with torch.random.fork_rng(devices=_rng_devices(ensemble.device)):
        torch.manual_seed(int(rng.integers(2**62)))
        for net in ensemble.members:
            if ensemble.size == 1:
                sample = train_idx
            else:
                sample = train_idx[rng.integers(len(train_idx), size=len(train_idx))]
            epochs = max(epochs, _train_member(net, data, sample, val_t, cfg, rng))
    ensemble.eval()
    ensemble.fit_output_normaliser(obs, actions, absorbing)
    train_t = torch.from_numpy(train_idx).to(data.x.device)
    val_prefs = [prefs[i] for i in val_idx]
    return TrainStats(
        train_loss=float(np.mean([_eval_loss(n, data, train_t) for n in ensemble.members])),
        val_loss=float(np.mean([_eval_loss(n, data, val_t) for n in ensemble.members])),
        val_accuracy=preference_accuracy(ensemble, val_prefs),
        epochs=epochs,
        n_train=len(train_idx),
        n_val=len(val_idx),
    )


def preference_accuracy(ensemble: RewardEnsemble, prefs: list[Preference]) -> float:
    """Share of non-equal labels whose side the ensemble's mean P(left) picks (NaN if none).

    A mean P of exactly 0.5 counts as wrong: the ensemble did not pick a side.
    """
    decided = [p for p in prefs if p.mu != 0.5]
    if not decided:
        return math.nan
    p_left = ensemble.preference_probs([p.pair for p in decided]).mean(axis=0)
    mu = np.array([p.mu for p in decided])
    correct = np.where(mu > 0.5, p_left > 0.5, p_left < 0.5)
    return float(correct.mean())
