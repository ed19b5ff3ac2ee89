"""Hindsight experience replay (Andrychowicz et al. 2017) for goal-conditioned envs, in Tianshou's shape.

Episodes are stored raw (observation, achieved goal, desired goal per step); the *future*
strategy is applied when a minibatch is sampled: a sampled transition at step t of an episode
of length L has, with probability ``future_k / (future_k + 1)``, its desired goal replaced by the
goal achieved after a step f drawn uniformly from [t, L - 1] of the same episode, and every
reward is computed then by ``compute_reward_fn(achieved_goal, desired_goal)`` (the env's own, or
a learned goal-conditioned reward). So at most ``future_k`` relabelled transitions are drawn per
original one, a relabelled goal is always reached later in the same episode, and changing the
reward function reaches all stored experience at once.

Only whole episodes are inserted; when the ring is full, the oldest episodes are dropped whole,
so a stored episode is never cut and a future goal never comes from another episode.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

GoalRewardFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(achieved goals (B, g), desired goals (B, g)) -> rewards (B,)."""


@dataclass(frozen=True, eq=False)
class GoalEpisode:
    """One finished episode of a goal-conditioned env, (L, ...) arrays.

    ``achieved_goal[t]`` / ``next_achieved_goal[t]``: the goal achieved before / after action t.
    """

    observation: np.ndarray
    achieved_goal: np.ndarray
    desired_goal: np.ndarray
    actions: np.ndarray
    next_observation: np.ndarray
    next_achieved_goal: np.ndarray
    terminated: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.actions)
        for name in ("observation", "achieved_goal", "desired_goal", "next_observation",
                     "next_achieved_goal", "terminated"):  # fmt: skip
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} must have {n} rows, got {len(getattr(self, name))}")
        if n == 0:
            raise ValueError("an episode has at least one step")

    def __len__(self) -> int:
        return len(self.actions)


@dataclass(frozen=True, eq=False)
class GoalTransitions:
    """A sampled minibatch; ``desired_goal`` and ``rewards`` are after relabelling.

    ``relabelled``: which rows got a future goal; ``future_rows``: the buffer row whose
    ``next_achieved_goal`` became the goal (the row itself where not relabelled).
    """

    observation: np.ndarray
    achieved_goal: np.ndarray
    desired_goal: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_observation: np.ndarray
    next_achieved_goal: np.ndarray
    terminated: np.ndarray
    relabelled: np.ndarray
    rows: np.ndarray
    future_rows: np.ndarray


_FIELDS = ("observation", "achieved_goal", "desired_goal", "actions", "next_observation",
           "next_achieved_goal", "terminated")  # fmt: skip


class HERReplayBuffer:
    """A ring of ``size`` steps holding whole episodes of at most ``horizon`` steps."""

    def __init__(
        self, size: int, compute_reward_fn: GoalRewardFn, horizon: int, future_k: float = 8.0
    ) -> None:
        if horizon < 1 or size < horizon:
            raise ValueError(f"need 1 <= horizon <= size, got horizon {horizon}, size {size}")
        if future_k < 0:
            raise ValueError(f"future_k must be >= 0, got {future_k}")
        self.size, self.horizon, self.future_k = size, horizon, future_k
        self.compute_reward_fn = compute_reward_fn
        self.future_p = future_k / (future_k + 1.0)
        self._data: dict[str, np.ndarray] = {}
        self.ep_start = np.zeros(size, np.int64)
        """Row of the first step of the episode each row belongs to."""
        self.ep_offset = np.zeros(size, np.int64)
        """Step index of each row within its episode."""
        self.ep_len = np.zeros(size, np.int64)
        self.live = np.zeros(size, bool)
        self.episodes: deque[tuple[int, int]] = deque()
        """(start row, length) of the stored episodes, oldest first."""
        self.pos = 0
        self._live_rows = np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self._live_rows)

    def add_episode(self, ep: GoalEpisode) -> None:
        """Store a finished episode, dropping the oldest whole episodes it would overwrite."""
        n = len(ep)
        if n > self.horizon:
            raise ValueError(f"episode of {n} steps is longer than the horizon {self.horizon}")
        if not self._data:
            self._data = {
                f: np.zeros(
                    (self.size, *np.shape(getattr(ep, f))[1:]), np.asarray(getattr(ep, f)).dtype
                )
                for f in _FIELDS
            }
        rows = (self.pos + np.arange(n)) % self.size
        while self.episodes and self.live[rows].any():  # drop whole episodes, oldest first
            start, length = self.episodes.popleft()
            self.live[(start + np.arange(length)) % self.size] = False
        for f in _FIELDS:
            self._data[f][rows] = getattr(ep, f)
        self.ep_start[rows], self.ep_offset[rows], self.ep_len[rows] = self.pos, np.arange(n), n
        self.live[rows] = True
        self.episodes.append((self.pos, n))
        self.pos = int((self.pos + n) % self.size)
        self._live_rows = np.flatnonzero(self.live)

    def sample(self, batch_size: int, rng: np.random.Generator) -> GoalTransitions:
        """``batch_size`` stored steps, uniformly, with the future strategy applied."""
        if not len(self):
            raise RuntimeError("nothing to sample: no episode stored")
        rows = self._live_rows[rng.integers(0, len(self._live_rows), batch_size)]
        offset, length = self.ep_offset[rows], self.ep_len[rows]
        relabel = rng.random(batch_size) < self.future_p
        # f uniform in [t, L - 1]: the goal achieved after step f >= t is reached later on.
        future = offset + (rng.random(batch_size) * (length - offset)).astype(np.int64)
        future = np.minimum(future, length - 1)
        future_rows = np.where(relabel, (self.ep_start[rows] + future) % self.size, rows)
        d = self._data
        goal = np.where(
            relabel[:, None], d["next_achieved_goal"][future_rows], d["desired_goal"][rows]
        )
        next_ag = d["next_achieved_goal"][rows]
        rewards = np.asarray(self.compute_reward_fn(next_ag, goal), np.float32).reshape(-1)
        return GoalTransitions(
            observation=d["observation"][rows],
            achieved_goal=d["achieved_goal"][rows],
            desired_goal=goal,
            actions=d["actions"][rows],
            rewards=rewards,
            next_observation=d["next_observation"][rows],
            next_achieved_goal=next_ag,
            terminated=d["terminated"][rows],
            relabelled=relabel,
            rows=rows,
            future_rows=future_rows,
        )
