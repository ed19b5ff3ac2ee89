"""SAC's networks and one gradient step (CleanRL ``sac_continuous_action`` details).

Twin soft Q-networks with target copies, a tanh-squashed Gaussian actor with a state-dependent
log-std, automatic entropy tuning and delayed policy updates. Written for small nets on one CPU
thread, where the number of torch calls costs as much as the arithmetic:

* both critics are one module whose layers are batched matrix products (``baddbmm``) over a
  leading axis of 2, so each layer is one call for both;
* the target's actor pass runs without a graph (one batched pass over ``[obs; next_obs]`` would
  save a call but cost a backward pass over the ``next_obs`` half: more arithmetic, which is
  what a CPU step is made of);
* the actor loss reads the critics through detached weights, so its backward pass computes no
  critic weight gradients that would be thrown away;
* optionally (``hidden_dtype=torch.bfloat16``) the hidden-to-hidden products, ~90% of a step's
  arithmetic, run in bfloat16, which CPUs with native bf16 (AVX512-BF16, AMX) multiply several
  times faster; weights, inputs, outputs, biases and losses stay float32, so Q-values keep their
  precision (a bf16 Q-value of 300 would move in steps of 2) and only the hidden activations of
  one layer are rounded.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""The actor's log-std is squashed into this range (CleanRL)."""

_LOG_2 = math.log(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class TwinQ(nn.Module):
    """Two Q-networks Q(s, a) -> (2, B), each Linear-ReLU-Linear-ReLU-Linear."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: int = 256,
        members: int = 2,
        hidden_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.hidden_dtype = hidden_dtype
        sizes = [obs_dim + act_dim, hidden, hidden, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for n_in, n_out in itertools.pairwise(sizes):
            # nn.Linear's default init, drawn per member: U(-1/sqrt(n_in), 1/sqrt(n_in)).
            bound = 1.0 / math.sqrt(n_in)
            self.weights.append(
                nn.Parameter(torch.empty(members, n_in, n_out).uniform_(-bound, bound))
            )
            self.biases.append(nn.Parameter(torch.empty(members, 1, n_out).uniform_(-bound, bound)))

    def forward(
        self, obs: torch.Tensor, actions: torch.Tensor, frozen: bool = False
    ) -> torch.Tensor:
        """Q-values (members, B); ``frozen``: no gradient reaches the weights (only the inputs)."""
        h = torch.cat([obs, actions], dim=-1).expand(len(self.weights[0]), -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if frozen:
                w, b = w.detach(), b.detach()
            if 0 < i < last and self.hidden_dtype != torch.float32:
                dt = self.hidden_dtype
                h = torch.bmm(h.to(dt), w.to(dt)).float() + b
            else:
                h = torch.baddbmm(b, h, w)
            if i < last:
                h = F.relu(h)
        return h.squeeze(-1)


class CastLinear(nn.Linear):
    """An ``nn.Linear`` whose product runs in ``compute_dtype`` (float32 weights, input, bias and
    output: the same state dict as a plain Linear, and numpy readers see float32 weights)."""

    def __init__(self, n_in: int, n_out: int, compute_dtype: torch.dtype) -> None:
        super().__init__(n_in, n_out)
        self.compute_dtype = compute_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.compute_dtype == torch.float32:
            return super().forward(x)
        dt = self.compute_dtype
        return F.linear(x.to(dt), self.weight.to(dt)).float() + self.bias


class SquashedGaussianActor(nn.Module):
    """pi(a|s): a Gaussian in R^act_dim squashed by tanh into the action box."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        low: np.ndarray,
        high: np.ndarray,
        hidden: int = 256,
        hidden_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(obs_dim, hidden),
            nn.ReLU(),
            CastLinear(hidden, hidden, hidden_dtype),
            nn.ReLU(),
        )
        self.head = nn.Linear(hidden, 2 * act_dim)  # mean and log-std side by side
        low_t, high_t = (
            torch.as_tensor(low, dtype=torch.float32),
            torch.as_tensor(high, dtype=torch.float32),
        )
        self.register_buffer("scale", (high_t - low_t) / 2)
        self.register_buffer("bias", (high_t + low_t) / 2)

    def mean_logstd(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, raw = self.head(self.body(obs)).chunk(2, dim=-1)
        logstd = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(raw) + 1)
        return mean, logstd

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions in the box and their log-probabilities, (B, act_dim), (B,)."""
        mean, logstd = self.mean_logstd(obs)
        noise = torch.randn_like(mean)
        x = mean + logstd.exp() * noise
        # log N(x; mean, std) minus log|d tanh(x)/dx| = 2 (log 2 - x - softplus(-2x)), which
        # stays finite where 1 - tanh(x)^2 rounds to 0.
        log_det = 2 * (_LOG_2 - x - F.softplus(-2 * x)) + torch.log(self.scale)
        logprob = (-0.5 * noise.pow(2) - logstd - _HALF_LOG_2PI - log_det).sum(-1)
        return torch.tanh(x) * self.scale + self.bias, logprob


class NumpySACActor:
    """The actor's layers as numpy arrays, for stepping the env one observation at a time.

    On the CPU the arrays share memory with the torch parameters, which the optimiser updates in
    place, so the actor always acts with the latest weights without a copy per step.
    """

    def __init__(self, actor: SquashedGaussianActor) -> None:
        self._actor = actor
        self._shared = next(actor.parameters()).device.type == "cpu"
        self.refresh()

    def refresh(self) -> None:
        """Read the weights again (needed only off the CPU, where they cannot be shared)."""
        layers = [m for m in [*self._actor.body, self._actor.head] if isinstance(m, nn.Linear)]
        self._layers = [
            (m.weight.detach().cpu().numpy().T, m.bias.detach().cpu().numpy()) for m in layers
        ]
        self._scale = self._actor.scale.cpu().numpy()
        self._bias = self._actor.bias.cpu().numpy()

    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions for (N, obs_dim) raw observations -> (N, act_dim) float32."""
        mean, logstd = self._mean_logstd(obs)
        x = mean + np.exp(logstd) * rng.standard_normal(mean.shape, dtype=np.float32)
        return (np.tanh(x) * self._scale + self._bias).astype(np.float32)

    def mean(self, obs: np.ndarray) -> np.ndarray:
        """The policy's deterministic action (the squashed mean) for (N, obs_dim) observations:
        what a trained agent is shown doing (``rlhf record``)."""
        mean, _ = self._mean_logstd(obs)
        return (np.tanh(mean) * self._scale + self._bias).astype(np.float32)

    def _mean_logstd(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not self._shared:
            self.refresh()
        h = obs
        for i, (w, b) in enumerate(self._layers):
            h = h @ w + b
            if i < len(self._layers) - 1:
                h = np.maximum(h, 0.0)
        mean, raw = np.split(h, 2, axis=-1)
        logstd = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (np.tanh(raw) + 1)
        return mean, logstd


class RandomActor:
    """Uniform actions in the box: the exploration before learning starts."""

    def __init__(self, low: np.ndarray, high: np.ndarray) -> None:
        self.low, self.high = low.astype(np.float32), high.astype(np.float32)

    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.low, self.high, (obs.shape[0], self.low.shape[0])).astype(
            np.float32
        )


@dataclass(frozen=True)
class SACStats:
    """Losses of the last gradient step (logged under CleanRL's ``losses/`` keys)."""

    qf_loss: float
    qf1_value: float
    qf2_value: float
    actor_loss: float
    alpha: float
    alpha_loss: float
    gradient_steps: int

    def metrics(self) -> dict[str, float]:
        return {
            "losses/qf_loss": self.qf_loss,
            "losses/qf1_values": self.qf1_value,
            "losses/qf2_values": self.qf2_value,
            "losses/actor_loss": self.actor_loss,
            "losses/alpha": self.alpha,
            "losses/alpha_loss": self.alpha_loss,
            "charts/gradient_steps": float(self.gradient_steps),
        }


@dataclass(frozen=True)
class SACBatch:
    """A minibatch as tensors on the training device: (B, ...) float32."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor
