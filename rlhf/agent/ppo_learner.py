"""PPOLearner: the policy, its optimiser and normalisers, and one learning step per rollout."""

from __future__ import annotations

import numpy as np
import torch

from rlhf.agent.collector import PolicyRollout
from rlhf.agent.ppo import ActorCritic, NumpyActor, PPOBatch, UpdateStats, ppo_update
from rlhf.agent.rollout import ObsNormalizer, RewardScaler, compute_gae
from rlhf.config import PPOConfig


class PPOLearner:
    """Everything PPO owns. It never knows where its rewards come from: they are passed in."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        num_envs: int,
        cfg: PPOConfig,
        device: torch.device,
    ) -> None:
        self.cfg = cfg
        self.device = device
        self.sizes = (obs_dim, act_dim, num_envs)
        self._new_networks()
        self.obs_norm = ObsNormalizer(obs_dim, enabled=cfg.norm_obs)
        self.ends_seen = False  # has an episode ended early (a termination) in this run?
        self.restarted_at: float | None = None
        """The share of the run done when the policy started again (--restart-at); None:
        not yet."""

    def _new_networks(self) -> None:
        """Fresh policy and value weights, their optimiser and the reward scaler."""
        obs_dim, act_dim, num_envs = self.sizes
        cfg = self.cfg
        log_std = 0.0 if cfg.init_log_std is None else cfg.init_log_std  # None: not preset
        self.agent = ActorCritic(obs_dim, act_dim, cfg.hidden_size, log_std).to(self.device)
        self.agent.floor_std(cfg.min_std)  # --min-std above --init-log-std: the floor
        # fused: one kernel for all parameters; on these small nets the per-tensor loop dominates.
        self.optimizer = torch.optim.Adam(
            self.agent.parameters(), lr=cfg.learning_rate, eps=1e-5, fused=True
        )
        self.reward_scaler = RewardScaler(num_envs, cfg.gamma, enabled=cfg.norm_reward)

    def restart(self, fraction_done: float) -> None:
        """Start the policy and its value again from new weights (--restart-at), with a
        new optimiser and reward scale, and anneal the learning rate over what is left of the
        run. The observation statistics stay: they describe the env, not the policy, and the
        collector shares them."""
        self._new_networks()
        self.restarted_at = fraction_done

    def actor(self) -> NumpyActor:
        """A numpy snapshot of the current policy for the next rollout."""
        return NumpyActor(self.agent)

    def set_progress(self, fraction_done: float) -> None:
        """Anneal the learning rate linearly to 0 (CleanRL's schedule) if enabled; after a
        restart, from the full rate at the restart to 0 at the end."""
        if self.cfg.anneal_lr:
            start = self.restarted_at or 0.0
            lr = (1.0 - fraction_done) / (1.0 - start) * self.cfg.learning_rate
            for group in self.optimizer.param_groups:
                group["lr"] = lr

    def learn(
        self,
        rollout: PolicyRollout,
        rewards: np.ndarray,
        rng: np.random.Generator,
        absorbing_reward: float | None = None,
    ) -> UpdateStats:
        """One PPO update on ``rollout`` with per-step ``rewards`` (T, N) from any reward function.

        ``absorbing_reward``: the reward of each step after a termination, when the reward
        function defines one, less ``end_margin`` (a termination is then worth staying there
        forever; with ``end_value`` zero, every reward is first counted from it, so an end is
        worth 0); None: 0.
        """
        raw = rollout.raw
        self.ends_seen |= bool((raw.terminated & raw.valid).any())
        if absorbing_reward is not None and self.ends_seen:
            # Not before an episode has ended: on an env that never ends one (HalfCheetah),
            # no label has taught the absorbing reward, and it is an arbitrary constant.
            absorbing_reward -= self.cfg.end_margin or 0.0  # --end-margin
            if self.cfg.end_value == "zero":
                # Count from the end: the same returns up to a constant, but the reward scaler
                # and the value network see what living gains over an end (--end-value).
                rewards = rewards - np.float32(absorbing_reward)
                absorbing_reward = 0.0
        scaled = self.reward_scaler(rewards, raw.dones, raw.valid)
        terminal_value = 0.0
        if absorbing_reward is not None:
            # Forever in the absorbing state: r + gamma r + ... (gamma = 1 would be unbounded).
            horizon = 1.0 / max(1.0 - self.cfg.gamma, 1e-3)
            terminal_value = float(self.reward_scaler.scale(absorbing_reward)) * horizon
        steps, n = scaled.shape
        to = self._tensor
        obs = to(rollout.norm_obs.reshape(steps * n, -1))
        actions = to(rollout.actions.reshape(steps * n, -1))
        with torch.no_grad():
            logprobs, _, values = self.agent.evaluate(obs, actions)
            last_values = self.agent.value(to(rollout.last_norm_obs))
        values_np = values.cpu().numpy().reshape(steps, n)
        advantages, returns = compute_gae(
            scaled,
            values_np,
            last_values.cpu().numpy(),
            raw.terminated,
            raw.truncated,
            raw.valid,
            self.cfg.gamma,
            self.cfg.gae_lambda,
            terminal_value,
        )
        keep = torch.from_numpy(np.flatnonzero(raw.valid.reshape(-1))).to(self.device)
        batch = PPOBatch(
            obs=obs[keep],
            actions=actions[keep],
            logprobs=logprobs[keep],
            advantages=to(advantages.reshape(-1))[keep],
            returns=to(returns.reshape(-1))[keep],
            values=values[keep],
        )
        return ppo_update(self.agent, self.optimizer, batch, self.cfg, rng)

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(array), dtype=torch.float32, device=self.device)

    def state_dict(self) -> dict:
        """Networks, optimiser and both normalisers, as tensors and plain values.

        The reward scaler's per-env running returns are not kept: a resumed run starts new
        episodes, for which they restart at zero anyway.
        """
        return {
            "agent": self.agent.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "obs_rms": self.obs_norm.rms.state_dict(),
            "reward_rms": self.reward_scaler.rms.state_dict(),
            "ends_seen": self.ends_seen,
            "restarted_at": self.restarted_at,
        }

    def load_state_dict(self, state: dict) -> None:
        self.agent.load_state_dict(state["agent"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.obs_norm.load_state_dict(state["obs_rms"])
        self.reward_scaler.rms.load_state_dict(state["reward_rms"])
        self.ends_seen = bool(state.get("ends_seen", False))  # older checkpoints: not kept
        self.restarted_at = state.get("restarted_at")  # older checkpoints: never restarted
