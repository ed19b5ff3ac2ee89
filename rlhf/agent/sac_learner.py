"""SACLearner: actor, twin critics, their targets and optimisers, and one gradient step.

Like :class:`rlhf.agent.ppo_learner.PPOLearner` it never knows where its rewards come from: each
minibatch arrives with them (the replay buffer computes them from its reward source).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch.nn import functional as F

from rlhf.agent.precision import choose
from rlhf.agent.replay import Transitions
from rlhf.agent.sac import NumpySACActor, SACBatch, SACStats, SquashedGaussianActor, TwinQ
from rlhf.config import SACConfig


class SACLearner:
    """Everything SAC owns. ``update`` takes one gradient step on a sampled minibatch."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        low: np.ndarray,
        high: np.ndarray,
        cfg: SACConfig,
        device: torch.device,
    ) -> None:
        self.cfg = cfg
        self.device = device
        self.obs_dim, self.act_dim = obs_dim, act_dim
        # a run resolves auto when it starts (rlhf.agent.precision); a learner built alone does here
        dtype = choose(device.type).dtype if cfg.hidden_dtype == "auto" else cfg.hidden_dtype
        self.hidden_dtype = getattr(torch, dtype)
        self.actor = SquashedGaussianActor(
            obs_dim, act_dim, low, high, cfg.hidden_size, self.hidden_dtype
        ).to(device)
        self.qf = self._new_critics()
        self.qf_target = copy.deepcopy(self.qf).requires_grad_(False)
        # fused Adam: one kernel for all parameters, where a per-tensor loop would dominate.
        self.actor_optimizer = torch.optim.Adam(
            self.actor.parameters(), lr=cfg.policy_lr, fused=True
        )
        self.q_optimizer = torch.optim.Adam(self.qf.parameters(), lr=cfg.q_lr, fused=True)
        self.target_entropy = -float(act_dim)
        self.log_alpha = torch.full(
            (1,), math.log(cfg.init_alpha), device=device, requires_grad=True
        )
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=cfg.q_lr)
        self.alpha = cfg.init_alpha if cfg.autotune else cfg.alpha
        self.gradient_steps = 0
        self.critic_resets = 0
        """Times the critics were reset (PEBBLE resets them once, after pretraining)."""
        self.terminal_value = 0.0
        """What the target is worth after a termination: 0 for the env's reward, the value of
        staying in the absorbing state forever for a learned reward that knows that state."""

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The actor's optimiser (the loop logs its learning rate)."""
        return self.actor_optimizer

    def actor_numpy(self) -> NumpySACActor:
        """A numpy actor that follows this learner's weights (see :class:`NumpySACActor`)."""
        return NumpySACActor(self.actor)

    def reset_critics(self) -> None:
        """New critics, targets and critic optimiser (PEBBLE, after unsupervised pretraining:
        values learned for the intrinsic reward would mislead the first updates on the learned one)."""
        self.qf = self._new_critics()
        self.qf_target = copy.deepcopy(self.qf).requires_grad_(False)
        self.q_optimizer = torch.optim.Adam(self.qf.parameters(), lr=self.cfg.q_lr, fused=True)
        self.critic_resets += 1

    def _new_critics(self) -> TwinQ:
        return TwinQ(
            self.obs_dim, self.act_dim, self.cfg.hidden_size, hidden_dtype=self.hidden_dtype
        ).to(self.device)

    def update(self, sample: Transitions) -> SACStats:
        """One gradient step of the critics; every ``policy_frequency`` steps as many actor
        (and entropy) steps; then the targets move by ``tau``."""
        cfg, b = self.cfg, self._tensors(sample)
        with torch.no_grad():
            next_actions, next_logprob = self.actor.sample(b.next_obs)
            next_q = self.qf_target(b.next_obs, next_actions).min(0).values
            next_v = next_q - self.alpha * next_logprob
            bootstrap = torch.where(b.terminated > 0, self.terminal_value, next_v)
            target = b.rewards + cfg.gamma * bootstrap
        q = self.qf(b.obs, b.actions)
        qf_loss = F.mse_loss(q, target.expand_as(q), reduction="none").mean(1).sum()
        self.q_optimizer.zero_grad(set_to_none=True)
        qf_loss.backward()
        self.q_optimizer.step()
        actor_loss = alpha_loss = float("nan")
        if self.gradient_steps % cfg.policy_frequency == 0:
            for _ in range(cfg.policy_frequency):
                actions, logprob = self.actor.sample(b.obs)
                actor_loss, alpha_loss = self._actor_step(b.obs, actions, logprob)
        self._soft_update()
        self.gradient_steps += 1
        return SACStats(
            qf_loss=float(qf_loss.detach()) / 2,
            qf1_value=float(q[0].detach().mean()),
            qf2_value=float(q[1].detach().mean()),
            actor_loss=actor_loss,
            alpha=self.alpha,
            alpha_loss=alpha_loss,
            gradient_steps=self.gradient_steps,
        )

    def _actor_step(
        self, obs: torch.Tensor, actions: torch.Tensor, logprob: torch.Tensor
    ) -> tuple[float, float]:
        q_pi = self.qf(obs, actions, frozen=True).min(0).values
        actor_loss = (self.alpha * logprob - q_pi).mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_optimizer.step()
        if not self.cfg.autotune:
            return float(actor_loss.detach()), float("nan")
        alpha_loss = (-self.log_alpha.exp() * (logprob.detach() + self.target_entropy)).mean()
        self.alpha_optimizer.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_optimizer.step()
        self.alpha = float(self.log_alpha.detach().exp())
        return float(actor_loss.detach()), float(alpha_loss.detach())

    @torch.no_grad()
    def _soft_update(self) -> None:
        target = list(self.qf_target.parameters())
        torch._foreach_lerp_(target, list(self.qf.parameters()), self.cfg.tau)

    def _tensors(self, s: Transitions) -> SACBatch:
        def to(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.float32, device=self.device)

        return SACBatch(to(s.obs), to(s.actions), to(s.rewards), to(s.next_obs), to(s.terminated))

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Networks, targets, optimisers, the entropy coefficient and counters."""
        return {
            "actor": self.actor.state_dict(),
            "qf": self.qf.state_dict(),
            "qf_target": self.qf_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "q_optimizer": self.q_optimizer.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "alpha": self.alpha,
            "gradient_steps": self.gradient_steps,
            "critic_resets": self.critic_resets,
        }

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.qf.load_state_dict(state["qf"])
        self.qf_target.load_state_dict(state["qf_target"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.q_optimizer.load_state_dict(state["q_optimizer"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.alpha = float(state["alpha"])
        self.gradient_steps = int(state["gradient_steps"])
        self.critic_resets = int(state["critic_resets"])
