"""The pair loss: labelled pairs as tensors, the Bradley-Terry cross-entropy with label noise,
and how many labels an ensemble orders as the teacher did.

P(left preferred) = sigmoid(sum_t r(left_t) - sum_t r(right_t)); the loss is the cross-entropy
against the soft label mu (1 left, 0 right, 0.5 equal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from rlhf.core.types import Preference
from rlhf.reward.model import RewardEnsemble, RewardNet, stack_pairs

_EVAL_PAIRS = 512
"""Pairs per forward pass when evaluating a loss without gradients."""


@dataclass(frozen=True)
class PairData:
    """All labelled pairs as tensors: x (P, 2, T, D), step mask (P, 2, T), mu (P,)."""

    x: torch.Tensor
    mask: torch.Tensor
    mu: torch.Tensor


def preference_nll(
    logits: torch.Tensor, mu: torch.Tensor, label_noise: float, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy of the soft labels ``mu`` under P(left) = (1 - e) sigmoid(logits) + e/2.

    ``e`` (``--reward-model.label-noise``) is the share of answers assumed given at random, as
    Christiano et al. (2017) assumed of people (10%): a wrong answer then costs at most
    -ln(e/2) however sure the model is, so a few mistakes cannot pull a round their way, and
    the model need not stretch its reward to reach P = 0 or 1 on every label. e = 0 is the
    plain Bradley-Terry loss.
    """
    if label_noise == 0:
        return F.binary_cross_entropy_with_logits(logits, mu, reduction=reduction)
    # log P(left) and log P(right), from log-sigmoids so that large |logits| stay finite.
    keep, half = math.log1p(-label_noise), math.log(label_noise / 2)
    log_left = torch.logaddexp(keep + F.logsigmoid(logits), torch.full_like(logits, half))
    log_right = torch.logaddexp(keep + F.logsigmoid(-logits), torch.full_like(logits, half))
    losses = -(mu * log_left + (1 - mu) * log_right)
    return losses.mean() if reduction == "mean" else losses


def bradley_terry_loss(
    net: RewardNet, data: PairData, idx: torch.Tensor, label_noise: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy of the pairs ``idx`` under ``net`` (in whatever mode it is in)."""
    rewards = net(data.x[idx])  # (B, 2, T)
    returns = (rewards * data.mask[idx]).sum(dim=-1)
    return preference_nll(returns[:, 0] - returns[:, 1], data.mu[idx], label_noise)


@torch.no_grad()
def eval_pair_loss(
    net: RewardNet, data: PairData, idx: torch.Tensor, label_noise: float = 0.0
) -> float:
    """Per-pair loss over ``idx`` in eval mode (dropout off), in chunks."""
    if idx.numel() == 0:
        return math.nan
    net.eval()
    total = 0.0
    for chunk in idx.split(_EVAL_PAIRS):
        total += float(bradley_terry_loss(net, data, chunk, label_noise)) * chunk.numel()
    return total / idx.numel()


def stack_labels(ensemble: RewardEnsemble, prefs: list[Preference]) -> PairData | None:
    """The pairs of ``prefs`` and their answers as tensors on the ensemble's device; None
    without labels."""
    if not prefs:
        return None
    x, mask = stack_pairs(ensemble, [p.pair for p in prefs])
    mu = torch.tensor([p.mu for p in prefs], dtype=torch.float32, device=x.device)
    return PairData(x, mask, mu)


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
