"""A ring buffer of transitions whose rewards are computed when a minibatch is sampled.

Rewards come from a reward function injected into the buffer, never from whoever inserts
transitions, so when the learned reward is refitted (:meth:`ReplayBuffer.set_reward_fn`) every
past transition is worth the new reward from the next minibatch on, with no relabelling pass by
the caller. Two ways to honour that, with the same rewards:

* ``relabel=False``: score each sampled minibatch (imitation's ``ReplayBufferRewardWrapper`` does
  this for SB3);
* ``relabel=True`` (what SAC uses): keep a reward per row, rescore the whole buffer when the
  source changes (PEBBLE's relabelling), and score new rows when a minibatch first draws one.
  With refits every 5k steps of a 50k-step buffer this costs a sixth of the per-minibatch way
  (``scripts/bench_relabel.py``): a refit rescores (buffer / refit interval) rows per step in
  large, cheap batches, a minibatch scores 256 rows every step in a small, dear one.

The env's own reward is stored too: it is the :data:`ENV_REWARD` source (the true-reward
baseline) and what the synthetic teacher and the logs see, never what a learned-reward agent
trains on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from rlhf.agent.collector import StepRecord

RewardFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(raw obs (B, obs_dim), applied actions (B, act_dim)) -> rewards (B,)."""


def ENV_REWARD(obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """The reward source that reads the env's stored reward (never called)."""
    raise AssertionError("ENV_REWARD is a marker: the buffer reads the stored env reward")


_RELABEL_ROWS = 65_536
"""Rows scored per call when the whole buffer is relabelled (bounds the memory of one call)."""


@dataclass(frozen=True, eq=False)
class Transitions:
    """A sampled minibatch, (B, ...) float32 arrays.

    Attributes:
        obs: raw observations.
        actions: actions as applied.
        rewards: rewards of the buffer's reward source for these transitions.
        next_obs: the observation after each action (an episode's final one at its end).
        terminated: 1.0 where the action ended the episode in a terminal state (no bootstrap).
        indices: the rows sampled (for tests and diagnostics).
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    indices: np.ndarray

    def __post_init__(self) -> None:
        n = self.obs.shape[0]
        for name in ("actions", "next_obs"):
            if getattr(self, name).shape[0] != n:
                raise ValueError(f"{name} must have {n} rows")
        for name in ("rewards", "terminated", "indices"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"{name} must be ({n},), got {getattr(self, name).shape}")


class ReplayBuffer:
    """Fixed-capacity FIFO of transitions, inserted in batches with wrap-around.

    Args:
        capacity: rows kept; the oldest are overwritten first.
        obs_dim, act_dim: sizes of an observation and an action.
        nq, nv: sizes of the physics state kept per row (for videos; 0 for none).
        reward_fn: the reward source: a function of (obs, actions), :data:`ENV_REWARD`, or None
            (no reward yet: sampling is refused).
        relabel: store rewards and rescore the whole buffer when the source changes (PEBBLE),
            instead of scoring each sampled minibatch.
    """

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        act_dim: int,
        nq: int = 0,
        nv: int = 0,
        reward_fn: RewardFn | None = ENV_REWARD,
        relabel: bool = False,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros((capacity, act_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.terminated = np.zeros(capacity, np.float32)
        self.true_rewards = np.zeros(capacity, np.float32)
        self.qpos = np.zeros((capacity, nq))
        self.qvel = np.zeros((capacity, nv))
        self.relabel = relabel
        self._rewards = np.zeros(capacity, np.float32)  # used with relabel only
        self._scored = (
            0  # relabel: the value of ``added`` when the rewards were last brought up to date
        )
        self.pos = 0
        """The row the next insert writes first."""
        self.size = 0
        self.added = 0
        """Rows ever inserted (for a relabelling buffer: which rows still need a reward)."""
        self.reward_fn: RewardFn | None = None
        self._per_sample = False
        self.set_reward_fn(reward_fn)

    def __len__(self) -> int:
        return self.size

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        true_rewards: np.ndarray,
        qpos: np.ndarray | None = None,
        qvel: np.ndarray | None = None,
    ) -> None:
        """Insert a batch of n transitions (n may exceed the free space: the oldest go)."""
        n = obs.shape[0]
        if n == 0:
            return
        if n > self.capacity:  # only the newest rows of an oversized batch survive anyway
            cut = slice(n - self.capacity, n)
            obs, actions, next_obs = obs[cut], actions[cut], next_obs[cut]
            terminated, true_rewards = terminated[cut], true_rewards[cut]
            qpos = None if qpos is None else qpos[cut]
            qvel = None if qvel is None else qvel[cut]
            self.added += n - self.capacity
            n = self.capacity
        rows = (self.pos + np.arange(n)) % self.capacity
        self.obs[rows] = obs
        self.actions[rows] = actions
        self.next_obs[rows] = next_obs
        self.terminated[rows] = terminated
        self.true_rewards[rows] = true_rewards
        if qpos is not None and self.qpos.shape[1]:
            self.qpos[rows] = qpos
            self.qvel[rows] = qvel
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        self.added += n

    def add_step(self, s: StepRecord) -> None:
        """One env step of every env as it happens (a reset step is not a transition)."""
        v = s.valid
        self.add(
            s.obs[v], s.actions[v], s.next_obs[v], s.terminated[v], s.true_rewards[v],
            s.qpos[v], s.qvel[v],
        )  # fmt: skip

    def set_reward_fn(self, reward_fn: RewardFn | None, per_sample: bool = False) -> None:
        """Change the reward source; every stored transition follows it from the next sample.

        ``per_sample``: score each minibatch even in a relabelling buffer, for a reward that
        changes with every call (PEBBLE's state entropy depends on what the buffer holds).
        """
        self.reward_fn = reward_fn
        self._per_sample = per_sample
        self._scored = 0
        if self._caching():
            self._score_new()

    def _caching(self) -> bool:
        """Whether rewards are read from the relabelled store rather than computed per sample."""
        fn = self.reward_fn
        return self.relabel and not self._per_sample and fn is not None and fn is not ENV_REWARD

    def ready(self) -> bool:
        """Whether a minibatch can be sampled (rows stored and a reward source set)."""
        return self.size > 0 and self.reward_fn is not None

    def sample(
        self, batch_size: int, rng: np.random.Generator, recent_share: float = 0.0, recent: int = 0
    ) -> Transitions:
        """``batch_size`` rows drawn with replacement, rewards from the current source:
        round(``recent_share`` x ``batch_size``) of them uniformly from the ``recent`` newest
        rows, the rest uniformly from all."""
        if not self.ready():
            raise RuntimeError("nothing to sample: the buffer is empty or has no reward source")
        n_recent = round(recent_share * batch_size) if recent > 0 else 0
        idx = rng.integers(0, self.size, batch_size - n_recent)
        if n_recent:  # counted back from the newest row, across the ring's wrap
            back = rng.integers(0, min(recent, self.size), n_recent)
            idx = np.concatenate([idx, (self.pos - 1 - back) % self.capacity])
        return self.transitions(idx)

    def transitions(self, idx: np.ndarray) -> Transitions:
        """The rows ``idx`` as a minibatch, rewards from the current source."""
        obs, actions = self.obs[idx], self.actions[idx]
        if self.reward_fn is None:
            raise RuntimeError("the buffer has no reward source yet")
        if self.reward_fn is ENV_REWARD:
            rewards = self.true_rewards[idx]
        elif self._caching():
            # Rows added since the last scoring are scored only when a minibatch draws one, all
            # together: scoring the one new row of every step costs more than the minibatch.
            todo = min(self.added - self._scored, self.size)
            if todo and (((self.pos - 1 - idx) % self.capacity) < todo).any():
                self._score_new()
            rewards = self._rewards[idx]
        else:
            rewards = np.asarray(self.reward_fn(obs, actions), np.float32).reshape(-1)
        return Transitions(obs, actions, rewards, self.next_obs[idx], self.terminated[idx], idx)

    def _score_new(self) -> None:
        """Relabelling buffer: score the rows inserted since the last scoring (all after a change
        of source), in chunks, oldest first."""
        if not self._caching():
            return
        todo = min(self.added - self._scored, self.size)
        if todo <= 0:
            return
        rows = (self.pos - todo + np.arange(todo)) % self.capacity
        for start in range(0, todo, _RELABEL_ROWS):
            chunk = rows[start : start + _RELABEL_ROWS]
            self._rewards[chunk] = self.reward_fn(self.obs[chunk], self.actions[chunk])
        self._scored = self.added

    # -- state (a checkpoint holds the filled rows) -----------------------------------------------
    def state_dict(self) -> dict[str, object]:
        """The stored rows in insertion order, oldest first, as tensors (a checkpoint loads with
        ``weights_only=True``), plus the insert count. Rewards are not state: they are computed."""
        order = self._order()
        names = ("obs", "actions", "next_obs", "terminated", "true_rewards", "qpos", "qvel")
        return {name: torch.from_numpy(getattr(self, name)[order]) for name in names} | {
            "added": self.added
        }

    def load_state_dict(self, state: dict) -> None:
        """Refill from :meth:`state_dict` (the capacity may differ: the newest rows are kept)."""
        self.pos = self.size = self.added = 0
        names = ("obs", "actions", "next_obs", "terminated", "true_rewards", "qpos", "qvel")
        self.add(**{name: np.asarray(state[name]) for name in names})
        self.added = int(state["added"])
        self.set_reward_fn(self.reward_fn, self._per_sample)

    def _order(self) -> np.ndarray:
        """Indices of the stored rows, oldest first."""
        if self.size < self.capacity:
            return np.arange(self.size)
        return (self.pos + np.arange(self.capacity)) % self.capacity
