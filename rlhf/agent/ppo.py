"""Actor-critic networks and the PPO update (CleanRL ``ppo_continuous_action`` details)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rlhf.config import PPOConfig

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _layer(n_in: int, n_out: int, std: float) -> nn.Linear:
    """Orthogonal weights, zero bias (the init CleanRL and the PPO implementation details use)."""
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def _mlp(n_in: int, hidden: int, n_out: int, out_std: float) -> nn.Sequential:
    return nn.Sequential(
        _layer(n_in, hidden, np.sqrt(2)),
        nn.Tanh(),
        _layer(hidden, hidden, np.sqrt(2)),
        nn.Tanh(),
        _layer(hidden, n_out, out_std),
    )


class ActorCritic(nn.Module):
    """Gaussian policy with a state-independent log-std, and a separate value network."""

    def __init__(
        self, obs_dim: int, act_dim: int, hidden: int = 64, init_log_std: float = 0.0
    ) -> None:
        super().__init__()
        self.critic = _mlp(obs_dim, hidden, 1, 1.0)
        self.actor_mean = _mlp(obs_dim, hidden, act_dim, 0.01)
        self.actor_logstd = nn.Parameter(torch.full((1, act_dim), float(init_log_std)))

    @torch.no_grad()
    def floor_std(self, min_std: float) -> None:
        """Project the log-std back to at least log(``min_std``) (0: no floor). A projection,
        not a clamp in the forward pass: a clamp would zero the gradient below the floor and
        leave the std stuck there for good."""
        if min_std > 0:
            self.actor_logstd.clamp_(min=math.log(min_std))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probability of ``actions``, policy entropy, and value, for a batch of observations."""
        mean = self.actor_mean(obs)
        logstd = self.actor_logstd.expand_as(mean)
        # The Gaussian log-density written out: torch.distributions' argument checks and object
        # construction cost more than the maths on these tiny batches.
        logprob = -0.5 * ((actions - mean) / logstd.exp()) ** 2 - logstd - _HALF_LOG_2PI
        entropy = (0.5 + _HALF_LOG_2PI + self.actor_logstd).sum(-1).expand(mean.shape[0])
        return logprob.sum(-1), entropy, self.value(obs)


class NumpyActor:
    """A frozen numpy copy of the policy mean network, for stepping the env.

    During a rollout the policy does not change, and a 2-layer MLP on one observation is several
    times faster in numpy than through torch's dispatcher, so acting stays off the torch path.
    Log-probabilities and values are recomputed in torch in one batch after the rollout.
    """

    def __init__(self, agent: ActorCritic) -> None:
        layers = [m for m in agent.actor_mean if isinstance(m, nn.Linear)]
        self._weights = [
            (m.weight.detach().cpu().numpy().T.copy(), m.bias.detach().cpu().numpy().copy())
            for m in layers
        ]
        self.std = np.exp(agent.actor_logstd.detach().cpu().numpy()[0]).astype(np.float32)

    def mean(self, obs: np.ndarray) -> np.ndarray:
        h = obs
        for i, (w, b) in enumerate(self._weights):
            h = h @ w + b
            if i < len(self._weights) - 1:
                h = np.tanh(h)
        return h

    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Draw an action for each row of ``obs`` (N, obs_dim) -> (N, act_dim) float32."""
        mean = self.mean(obs)
        noise = rng.standard_normal(mean.shape, dtype=np.float32)
        return (mean + self.std * noise).astype(np.float32)


@dataclass(frozen=True)
class PPOBatch:
    """Flattened, valid-only training data of one rollout, as tensors on the training device."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    values: torch.Tensor

    def __len__(self) -> int:
        return int(self.obs.shape[0])


@dataclass(frozen=True)
class UpdateStats:
    """Losses and diagnostics of one PPO update (logged under ``losses/``)."""

    policy_loss: float
    value_loss: float
    entropy: float
    old_approx_kl: float
    approx_kl: float
    clipfrac: float
    explained_variance: float
    action_std_min: float  # the smallest std over the action entries: where --min-std binds

    def metrics(self) -> dict[str, float]:
        """TensorBoard scalars under CleanRL's ``losses/`` keys."""
        return {
            "losses/value_loss": self.value_loss,
            "losses/policy_loss": self.policy_loss,
            "losses/entropy": self.entropy,
            "losses/old_approx_kl": self.old_approx_kl,
            "losses/approx_kl": self.approx_kl,
            "losses/clipfrac": self.clipfrac,
            "losses/explained_variance": self.explained_variance,
            "losses/action_std_min": self.action_std_min,
        }


def ppo_update(
    agent: ActorCritic,
    optimizer: torch.optim.Optimizer,
    batch: PPOBatch,
    cfg: PPOConfig,
    rng: np.random.Generator,
) -> UpdateStats:
    """Clipped-surrogate PPO over ``cfg.update_epochs`` epochs of shuffled minibatches."""
    n = len(batch)
    mb_size = max(1, n // cfg.num_minibatches)
    clipfracs: list[torch.Tensor] = []
    approx_kl = old_approx_kl = torch.zeros(())
    pg_loss = v_loss = entropy_loss = torch.zeros(())
    for _epoch in range(cfg.update_epochs):
        perm = torch.from_numpy(rng.permutation(n)).to(batch.obs.device)
        for start in range(0, n - mb_size + 1, mb_size):
            mb = perm[start : start + mb_size]
            newlogprob, entropy, newvalue = agent.evaluate(batch.obs[mb], batch.actions[mb])
            logratio = newlogprob - batch.logprobs[mb]
            ratio = logratio.exp()
            with torch.no_grad():
                old_approx_kl = (-logratio).mean()
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs.append(((ratio - 1.0).abs() > cfg.clip_coef).float().mean())
            adv = batch.advantages[mb]
            if cfg.norm_adv and len(mb) > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss = torch.max(
                -adv * ratio, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
            ).mean()
            v_loss = _value_loss(newvalue, batch.returns[mb], batch.values[mb], cfg)
            entropy_loss = entropy.mean()
            loss = pg_loss - cfg.ent_coef * entropy_loss + v_loss * cfg.vf_coef
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm, foreach=True)
            optimizer.step()
            agent.floor_std(cfg.min_std)
        if cfg.target_kl is not None and approx_kl.item() > cfg.target_kl:
            break
    return UpdateStats(
        policy_loss=pg_loss.item(),
        value_loss=v_loss.item(),
        entropy=entropy_loss.item(),
        old_approx_kl=old_approx_kl.item(),
        approx_kl=approx_kl.item(),
        clipfrac=float(torch.stack(clipfracs).mean()) if clipfracs else 0.0,
        explained_variance=_explained_variance(batch.values, batch.returns),
        action_std_min=float(agent.actor_logstd.detach().min().exp()),
    )


def _value_loss(
    newvalue: torch.Tensor, returns: torch.Tensor, oldvalue: torch.Tensor, cfg: PPOConfig
) -> torch.Tensor:
    if not cfg.clip_vloss:
        return 0.5 * ((newvalue - returns) ** 2).mean()
    unclipped = (newvalue - returns) ** 2
    clipped_value = oldvalue + (newvalue - oldvalue).clamp(-cfg.clip_coef, cfg.clip_coef)
    clipped = (clipped_value - returns) ** 2
    return 0.5 * torch.max(unclipped, clipped).mean()


def _explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    var_y = float(returns.var()) if len(returns) > 1 else 0.0
    return float("nan") if var_y == 0 else 1.0 - float((returns - values).var()) / var_y
