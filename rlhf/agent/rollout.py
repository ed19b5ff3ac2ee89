"""Rollout storage maths: GAE with truncation bootstrap, running statistics, reward scaling.

Everything here is a pure function or a small numpy class, so it can be checked against a hand
computation without an environment.
"""

from __future__ import annotations

import numpy as np


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    last_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    valid: np.ndarray,
    gamma: float,
    gae_lambda: float,
    terminal_value: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over a time-major rollout of shape (T, N).

    Row t is the transition taken from observation t; ``values[t]`` is V(obs_t) and ``last_values``
    is V of the observation after the last row. Gymnasium 1.x vector envs reset on the step
    *after* an episode ends, so:

    * a row with ``valid == False`` is a reset step, not a transition: its advantage is 0 and
      nothing flows through it;
    * the observation of that reset step is the finished episode's final observation, so for a
      truncated row t the bootstrap V(final obs) is simply ``values[t + 1]`` (or ``last_values``);
    * a terminated row bootstraps from ``terminal_value``: 0 for the env's own reward (nothing
      follows the end), or the value of staying in the absorbing state forever for a learned
      reward that knows that state (see :mod:`rlhf.queries.segments`).

    Both kinds of episode end cut the lambda-return chain.

    Returns:
        (advantages, returns), each (T, N) float32; returns = advantages + values.
    """
    steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    next_values = np.concatenate([values[1:], last_values[None]], axis=0)
    not_done = 1.0 - (terminated | truncated).astype(np.float32)
    next_values = np.where(terminated, np.float32(terminal_value), next_values)
    deltas = rewards + gamma * next_values - values
    running = np.zeros_like(last_values, dtype=np.float32)
    for t in reversed(range(steps)):
        running = deltas[t] + gamma * gae_lambda * not_done[t] * running
        running = np.where(valid[t], running, 0.0).astype(np.float32)
        advantages[t] = running
    returns = advantages + values
    return advantages, returns.astype(np.float32)


class RunningMeanStd:
    """Running mean and variance over a stream of batches (parallel Welford merge)."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, batch: np.ndarray) -> None:
        """Merge a batch of samples (first axis = samples)."""
        if batch.shape[0] == 0:
            return
        b_mean = batch.mean(axis=0)
        # written out: np.var's generic path costs more than the maths for one row per step
        b_var = ((batch - b_mean) ** 2).mean(axis=0)
        b_count = batch.shape[0]
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, list[float] | float]:
        # Plain lists so checkpoints load with torch.load(weights_only=True).
        return {"mean": self.mean.tolist(), "var": self.var.tolist(), "count": float(self.count)}

    def load_state_dict(self, state: dict) -> None:
        self.mean = np.asarray(state["mean"], np.float64)
        self.var = np.asarray(state["var"], np.float64)
        self.count = float(state["count"])


class ObsNormalizer:
    """Normalises the policy's observations with running statistics, clipped to +-clip."""

    def __init__(self, obs_dim: int, enabled: bool = True, clip: float = 10.0) -> None:
        self.rms = RunningMeanStd((obs_dim,))
        self.enabled = enabled
        self.clip = clip
        self._refresh()

    def _refresh(self) -> None:
        # float32 copies: the per-step hot path should not up-cast to float64.
        self._mean = self.rms.mean.astype(np.float32)
        self._std = np.sqrt(self.rms.var + 1e-8).astype(np.float32)

    def update(self, batch: np.ndarray) -> None:
        """Merge observations (B, obs_dim) into the statistics."""
        if self.enabled:
            self.rms.update(batch)
            self._refresh()

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Normalise ``obs`` (N, obs_dim) with the current statistics."""
        if not self.enabled:
            return obs.astype(np.float32)
        return np.clip((obs - self._mean) / self._std, -self.clip, self.clip).astype(np.float32)

    def load_state_dict(self, state: dict) -> None:
        self.rms.load_state_dict(state)
        self._refresh()


class RewardScaler:
    """Scales rewards by the running std of the discounted return (CleanRL's NormalizeReward).

    Only the scale changes, never the sign or the offset: a learned reward that is positive for
    staying alive keeps meaning that. Applied per rollout after the reward function has scored it
    in one batch; the statistics include the whole rollout.
    """

    def __init__(
        self, num_envs: int, gamma: float, enabled: bool = True, clip: float = 10.0
    ) -> None:
        self.rms = RunningMeanStd(())
        self.returns = np.zeros(num_envs, np.float64)
        self.gamma = gamma
        self.enabled = enabled
        self.clip = clip

    def __call__(self, rewards: np.ndarray, dones: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Scale a (T, N) rollout of rewards; ``dones``/``valid`` as in :func:`compute_gae`."""
        if not self.enabled:
            return rewards.astype(np.float32)
        seen = np.empty_like(rewards, dtype=np.float64)
        for t in range(rewards.shape[0]):
            self.returns = np.where(valid[t], self.returns * self.gamma + rewards[t], 0.0)
            seen[t] = self.returns
            self.returns = np.where(dones[t], 0.0, self.returns)
        self.rms.update(seen[valid])
        return self.scale(rewards)

    def scale(self, rewards: np.ndarray | float) -> np.ndarray:
        """Scale (and clip) rewards with the current statistics, without updating them."""
        if not self.enabled:
            return np.asarray(rewards, np.float32)
        scaled = np.asarray(rewards) / np.sqrt(self.rms.var + 1e-8)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)
