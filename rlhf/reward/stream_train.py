"""Fit the reward ensemble on more labels than fit in memory: one streamed pass per epoch.

:func:`train_ensemble` (``rlhf.reward.train``) stacks every label into one tensor. This trainer
instead takes ``epochs(k)``, a fresh iterable of preference batches for pass k (read from disk by
the caller; no I/O here), and trains every member on each batch as it comes:

* **Online bagging** (Oza & Russell 2001): instead of a bootstrap resample, each member weights
  each pair by its own Poisson(1) draw, which is what a bootstrap sample of a stream amounts to.
* **Validation**: ``val`` (a held-out share small enough for memory) drives early stopping per
  member, with ``cfg.patience`` and ``cfg.max_epochs`` as in :mod:`rlhf.reward.train`; the best
  weights are restored. A member that has stopped skips the rest of the passes.
* **Normalisers** are fitted on the steps of ``val`` (a random share of the same data), inputs
  before training and outputs after, as the in-memory trainer does on all labels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import torch

from rlhf.config import RewardConfig
from rlhf.config.presets import general_reward
from rlhf.core.types import Preference
from rlhf.reward.bradley_terry import (
    PairData,
    eval_pair_loss,
    preference_accuracy,
    preference_nll,
    stack_labels,
)
from rlhf.reward.model import RewardEnsemble, RewardNet
from rlhf.reward.train import TrainStats, _labelled_steps, _rng_devices, member_optimiser

Epochs = Callable[[int], Iterable[list[Preference]]]
"""Pass k -> the training preferences in batches (each label once per pass)."""


def _weighted_loss(
    net: RewardNet, data: PairData, weights: torch.Tensor, label_noise: float
) -> torch.Tensor:
    rewards = net(data.x)  # (B, 2, T)
    returns = (rewards * data.mask).sum(dim=-1)
    losses = preference_nll(returns[:, 0] - returns[:, 1], data.mu, label_noise, "none")
    return (losses * weights).sum() / weights.sum().clamp_min(1.0)


def train_ensemble_streaming(
    ensemble: RewardEnsemble,
    epochs: Epochs,
    val: list[Preference],
    cfg: RewardConfig,
    rng: np.random.Generator,
) -> TrainStats:
    """Train every member on the streamed passes, stop early on ``val``; refits both normalisers."""
    if not val:
        raise ValueError("streamed training needs held-out labels (val) for its normalisers")
    cfg = general_reward(cfg)
    obs, actions, absorbing = _labelled_steps(val, [])  # streaming is pairs only
    ensemble.fit_input_normaliser(obs, actions, absorbing)
    val_data = stack_labels(ensemble, val)
    val_idx = torch.arange(len(val), device=val_data.x.device)
    members = ensemble.members
    opts = [member_optimiser(*n.decayed_parameters(), cfg) for n in members]
    # As in the in-memory trainer, an untrained member's ties do not compete with its epochs.
    best = [
        math.inf if n.untrained() else eval_pair_loss(n, val_data, val_idx, cfg.label_noise)
        for n in members
    ]
    best_state = [{k: v.clone() for k, v in n.state_dict().items()} for n in members]
    stale = [0] * len(members)
    epoch = n_train = 0
    train_loss = math.nan
    with torch.random.fork_rng(devices=_rng_devices(ensemble.device)):
        torch.manual_seed(int(rng.integers(2**62)))
        while epoch < cfg.max_epochs and any(s < cfg.patience for s in stale):
            active = [i for i, s in enumerate(stale) if s < cfg.patience]
            n_train, train_loss = _one_pass(
                ensemble, opts, active, epochs(epoch), rng, cfg.label_noise, cfg.input_sparsity
            )
            epoch += 1
            for i in active:
                loss = eval_pair_loss(members[i], val_data, val_idx, cfg.label_noise)
                if loss < best[i]:
                    best[i], stale[i] = loss, 0
                    best_state[i] = {k: v.clone() for k, v in members[i].state_dict().items()}
                else:
                    stale[i] += 1
    for net, state in zip(members, best_state, strict=True):
        net.load_state_dict(state)
    ensemble.eval()
    ensemble.fit_output_normaliser(obs, actions, absorbing)
    return TrainStats(
        train_loss=train_loss,
        val_loss=float(np.mean(best)),
        val_accuracy=preference_accuracy(ensemble, val),
        epochs=epoch,
        n_train=n_train,
        n_val=len(val),
    )


def _one_pass(
    ensemble: RewardEnsemble,
    opts: list[torch.optim.Optimizer],
    active: list[int],
    batches: Iterable[list[Preference]],
    rng: np.random.Generator,
    label_noise: float,
    sparsity: float = 0.0,
) -> tuple[int, float]:
    """Train the ``active`` members on one pass; returns (labels seen, mean training loss)."""
    seen, total = 0, 0.0
    for batch in batches:
        data = stack_labels(ensemble, batch)
        for i in active:
            net = ensemble.members[i]
            net.train()
            draws = rng.poisson(1.0, len(batch)) if ensemble.size > 1 else np.ones(len(batch))
            weights = torch.as_tensor(draws, dtype=torch.float32, device=data.x.device)
            loss = _weighted_loss(net, data, weights, label_noise)
            if sparsity > 0:  # --reward-model.input-sparsity, as in the in-memory trainer
                loss = loss + sparsity * net.input_group_norm()
            opts[i].zero_grad(set_to_none=True)
            loss.backward()
            opts[i].step()
            total += float(loss.detach()) * len(batch) / len(active)
        seen += len(batch)
    return seen, total / max(seen, 1)
