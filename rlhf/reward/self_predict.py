"""Self-prediction: the reward members' hidden layers also learn to predict the next observation.

A few hundred answers leave most of a member's hidden features free: many functions order the
labelled pairs alike, and which one a round lands on is chance. REED (Metcalf et al. 2023)
shapes those features with what every unlabelled step of the agent's own behaviour says, the
environment's dynamics: an encoder trained to predict what comes next. Here the prediction is
the next raw observation itself (standardised with the member's input statistics), from the
member's last hidden layer through a linear head of its own; REED predicts a learned embedding
of the next state instead, which needs a target network to keep it from collapsing. The loss is
added, weighted by ``--reward-model.self-predict``, to every gradient step of a round on a fresh
draw of transitions; the head lives for one round (it is not part of the saved reward).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rlhf.core.types import Segment
from rlhf.reward.model import RewardEnsemble, RewardNet

BATCH = 256
"""Transitions per gradient step."""
_CLIP = 10.0
"""Bound on a standardised target (a feature nearly constant in the labelled steps)."""


@dataclass(frozen=True)
class Transitions:
    """Steps of unlabelled behaviour: reward inputs ``x`` (N, in_dim) and next observations
    ``next_obs`` (N, obs_dim), on the ensemble's device."""

    x: torch.Tensor
    next_obs: torch.Tensor

    def __len__(self) -> int:
        return self.x.shape[0]


def transitions(ensemble: RewardEnsemble, segments: list[Segment]) -> Transitions | None:
    """Every step of ``segments`` whose next step is a real one too (absorbing padding has no
    dynamics to predict); None when there are none."""
    obs, actions, nxt = [], [], []
    for seg in segments:
        last = seg.real_steps - 1  # steps 0..last-1 have a real successor
        if last > 0:
            obs.append(seg.obs[:last])
            actions.append(seg.actions[:last])
            nxt.append(seg.obs[1 : last + 1])
    if not obs:
        return None
    x = ensemble.inputs(np.concatenate(obs), np.concatenate(actions))
    next_obs = torch.from_numpy(np.concatenate(nxt).astype(np.float32)).to(ensemble.device)
    return Transitions(x, next_obs)


def head(net: RewardNet, obs_dim: int) -> nn.Linear:
    """A fresh linear head from the member's last hidden layer to the next observation."""
    width = net.body[-1].in_features
    return nn.Linear(width, obs_dim).to(net.in_mean.device)


def loss(
    net: RewardNet, predictor: nn.Linear, data: Transitions, rng: np.random.Generator
) -> torch.Tensor:
    """Mean squared error of the predicted next observation on a random batch, in units of the
    member's input standardisation of observations."""
    idx = torch.from_numpy(rng.integers(len(data), size=min(BATCH, len(data))))
    idx = idx.to(data.x.device)
    obs_dim = data.next_obs.shape[1]
    mean, std = net.in_mean[:obs_dim], net.in_std[:obs_dim]
    target = ((data.next_obs[idx] - mean) / std).clamp(-_CLIP, _CLIP)
    return (predictor(net.features(data.x[idx])) - target).pow(2).mean()
