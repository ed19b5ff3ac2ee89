"""The rating loss: learn a reward from single clips graded on a K-level scale.

Rating-based RL (White et al., AAAI 2024, arXiv 2307.16348; checked against the authors' code,
Dev1nW/Rating-based-Reinforcement-Learning ``reward_model.py``):

1. each clip's predicted return R (sum of the member's per-step rewards) is normalised over the
   minibatch, x = (R - min R) / (max R - min R), so x is in [0, 1];
2. the class boundaries 0 = b_0 <= b_1 <= ... <= b_K = 1 split the sorted x of the minibatch in
   the proportions of its grades: b_i is the largest x among the n_0 + ... + n_{i-1} lowest
   (no gradient flows through them);
3. class i gets the logit -k (x - b_i)(x - b_{i+1}): positive inside its interval, largest in
   the middle, falling off quadratically outside; softmax over classes gives P(grade = i);
4. the loss is the cross-entropy with the given grade.

A minibatch with a single clip, or clips all predicted alike, has no spread to normalise; a tiny
epsilon keeps x finite there (the loss then says nothing, as it should).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from rlhf.core.types import Rating
from rlhf.reward.model import RewardEnsemble, RewardNet

_EPS = 1e-8
DEFAULT_SHARPNESS = 30.0
"""k of White et al. (their code uses 30)."""


@dataclass(frozen=True)
class RatingData:
    """All rated clips as tensors: x (R, T, D), step mask (R, T), grade (R,) long, K levels."""

    x: torch.Tensor
    mask: torch.Tensor
    grade: torch.Tensor
    levels: int

    def __len__(self) -> int:
        return int(self.grade.shape[0])


def stack_ratings(ensemble: RewardEnsemble, ratings: list[Rating]) -> RatingData:
    """Inputs as :func:`rlhf.reward.model.stack_pairs` builds them, one clip per row."""
    levels = max(r.levels for r in ratings)
    longest = max(len(r.segment) for r in ratings)
    obs_dim, act_dim = ensemble.obs_dim, ensemble.act_dim
    x = np.zeros((len(ratings), longest, ensemble.in_dim), dtype=np.float32)
    mask = np.zeros((len(ratings), longest), dtype=np.float32)
    for i, rating in enumerate(ratings):
        seg = rating.segment
        if seg.obs.shape[1] != obs_dim or seg.actions.shape[1] != act_dim:
            raise ValueError(
                f"a rated clip has obs/action sizes {seg.obs.shape[1]}/{seg.actions.shape[1]},"
                f" the ensemble expects {obs_dim}/{act_dim}"
            )
        steps = len(seg)
        x[i, :steps, :obs_dim] = seg.obs
        x[i, :steps, obs_dim : obs_dim + act_dim] = ensemble.seen_actions(seg.actions)
        x[i, seg.real_steps : steps, -1] = 1.0
        mask[i, :steps] = 1.0
    ensemble.hide_unseen(x)
    device = ensemble.device
    grade = torch.tensor([r.grade for r in ratings], dtype=torch.long, device=device)
    return RatingData(
        torch.from_numpy(x).to(device), torch.from_numpy(mask).to(device), grade, levels
    )


def class_logits(returns: torch.Tensor, grade: torch.Tensor, levels: int, k: float) -> torch.Tensor:
    """(B,) predicted returns and their (B,) grades -> (B, K) class logits (see the module doc)."""
    lo, hi = returns.min(), returns.max()
    x = (returns - lo) / (hi - lo + _EPS)
    counts = torch.bincount(grade, minlength=levels)
    cum = torch.cumsum(counts, 0)[:-1]  # clips in classes 0..i-1, for the boundary b_i
    sorted_x = torch.sort(x.detach()).values
    inner = torch.where(cum > 0, sorted_x[(cum - 1).clamp_min(0)], torch.zeros_like(sorted_x[:1]))
    bounds = torch.cat([x.new_zeros(1), inner, x.new_ones(1)])  # (K + 1,)
    return -k * (x[:, None] - bounds[None, :-1]) * (x[:, None] - bounds[None, 1:])


def member_returns(net: RewardNet, data: RatingData, idx: torch.Tensor) -> torch.Tensor:
    """(B,) predicted returns of clips ``idx`` under ``net`` (in whatever mode it is in)."""
    return (net(data.x[idx]) * data.mask[idx]).sum(dim=-1)


def rating_loss(
    net: RewardNet, data: RatingData, idx: torch.Tensor, k: float = DEFAULT_SHARPNESS
) -> torch.Tensor:
    """Mean cross-entropy of the grades of clips ``idx`` (a minibatch) under ``net``."""
    returns = member_returns(net, data, idx)
    logits = class_logits(returns, data.grade[idx], data.levels, k)
    return F.cross_entropy(logits, data.grade[idx])


@torch.no_grad()
def eval_rating_loss(net: RewardNet, data: RatingData | None, idx: torch.Tensor, k: float) -> float:
    """The loss of all of ``idx`` as one batch, in eval mode (NaN without clips)."""
    if data is None or idx.numel() == 0:
        return math.nan
    net.eval()
    return float(rating_loss(net, data, idx, k))


@torch.no_grad()
def rating_accuracy(
    ensemble: RewardEnsemble, data: RatingData | None, idx: torch.Tensor, k: float
) -> float:
    """Share of clips ``idx`` whose most likely class (ensemble-mean return) is their grade."""
    if data is None or idx.numel() < 2:
        return math.nan
    ensemble.eval()
    returns = torch.stack([member_returns(n, data, idx) for n in ensemble.members]).mean(0)
    logits = class_logits(returns, data.grade[idx], data.levels, k)
    return float((logits.argmax(dim=1) == data.grade[idx]).float().mean())


@torch.no_grad()
def rated_pair_accuracy(
    ensemble: RewardEnsemble, data: RatingData | None, idx: torch.Tensor
) -> float:
    """Share of pairs of clips ``idx`` with different grades that the ensemble-mean predicted
    return orders as the grades do (the ranking figure pairs and ratings share)."""
    if data is None or idx.numel() < 2:
        return math.nan
    ensemble.eval()
    returns = torch.stack([member_returns(n, data, idx) for n in ensemble.members]).mean(0)
    grade = data.grade[idx]
    differ = grade[:, None] > grade[None, :]
    if not bool(differ.any()):
        return math.nan
    right = (returns[:, None] > returns[None, :]) & differ
    return float(right.sum() / differ.sum())
