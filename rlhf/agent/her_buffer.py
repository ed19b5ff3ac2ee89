"""Hindsight relabelling (HER, Andrychowicz et al. 2017) in SAC's flat replay buffer, for ``rlhf train``.

A goal env reaches the buffer as one vector per step, ``observation``, ``achieved_goal``,
``desired_goal`` in that order (:class:`rlhf.envs.goals.FlatGoalObservation`), so the desired
goal is the last ``goal_size`` entries and the achieved goal the ``goal_size`` before them.
:class:`HindsightReplayBuffer` keeps :class:`~rlhf.agent.replay.ReplayBuffer`'s rows and adds
Tianshou's ``HERReplayBuffer`` behaviour on top:

* each env's steps wait until its episode ends and are then stored as one block of rows, so the
  steps of an episode are contiguous in the ring, and each row knows how many steps of its
  episode follow it (``steps_left``). The ring overwrites its oldest rows first, so the steps
  after a stored row are always still there: a future goal never comes from another episode;
* the *future* strategy is applied when a minibatch is sampled: with probability
  ``future_k / (future_k + 1)`` a row's desired goal becomes the goal achieved after a step
  drawn uniformly from the rest of its episode (itself included), written into the desired-goal
  slice of both ``obs`` and ``next_obs``; so at most ``future_k`` relabelled transitions per
  original one.

Every minibatch is scored when it is sampled, whatever the reward source: the env's reward is
the env's own ``compute_reward(achieved goal after the step, desired goal)``, a learned (or
given) reward is the model on the relabelled ``(obs, action)`` (the goal is part of its input,
which makes it goal-conditioned). Stored rewards cannot be reused, as ``--sac.relabel`` does
without HER: a relabelled goal differs from draw to draw, so the same row is worth a different
reward each time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from rlhf.agent.replay import ENV_REWARD, ReplayBuffer, RewardFn, Transitions
from rlhf.envs.goals import GoalRewardFn

if TYPE_CHECKING:
    from rlhf.agent.collector import StepRecord

_STEP_FIELDS = ("obs", "actions", "next_obs", "terminated", "true_rewards", "qpos", "qvel")
"""What a stored row holds (the base buffer's fields, in its ``add`` order)."""


class HindsightReplayBuffer(ReplayBuffer):
    """SAC's replay buffer for a flattened goal env, with the future strategy at sample time.

    Args:
        capacity, obs_dim, act_dim, nq, nv, reward_fn: as :class:`ReplayBuffer`.
        goal_size: size of the desired (and achieved) goal at the end of each observation.
        num_envs: envs stepped together (each has its own episode in progress).
        future_k: relabelled transitions per original one, at most (0: plain replay).
        goal_reward: ``(achieved goals, desired goals) -> rewards``, the env's own reward
            function; needed when the source is :data:`ENV_REWARD`.
    """

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        act_dim: int,
        nq: int = 0,
        nv: int = 0,
        reward_fn: RewardFn | None = ENV_REWARD,
        *,
        goal_size: int,
        num_envs: int = 1,
        future_k: float = 4.0,
        goal_reward: GoalRewardFn | None = None,
    ) -> None:
        if goal_size < 1 or 2 * goal_size > obs_dim:
            raise ValueError(f"need 1 <= 2 * goal_size <= obs_dim, got {goal_size}, {obs_dim}")
        if future_k < 0:
            raise ValueError(f"future_k must be >= 0, got {future_k}")
        self.goal_size, self.future_k = goal_size, future_k
        self.future_p = future_k / (future_k + 1.0)
        self.goal_reward = goal_reward
        self.steps_left = np.zeros(capacity, np.int64)
        """Steps of the same episode stored after each row."""
        self._pending: list[list[tuple[np.ndarray, ...]]] = [[] for _ in range(num_envs)]
        """Each env's steps of the episode in progress, not yet stored."""
        super().__init__(capacity, obs_dim, act_dim, nq, nv, reward_fn, relabel=False)

    @property
    def desired(self) -> slice:
        """The desired goal's columns of an observation."""
        return slice(self.obs.shape[1] - self.goal_size, self.obs.shape[1])

    @property
    def achieved(self) -> slice:
        """The achieved goal's columns of an observation."""
        end = self.obs.shape[1] - self.goal_size
        return slice(end - self.goal_size, end)

    def add_step(self, s: StepRecord) -> None:
        """One step of every env: kept with its episode, stored when the episode ends."""
        done = s.terminated | s.truncated
        for i in np.flatnonzero(s.valid):  # a reset step is not a transition
            # Copies: the rows outlive the step, whose arrays their producer may reuse.
            row = tuple(
                np.array(x[i])
                for x in (
                    s.obs,
                    s.actions,
                    s.next_obs,
                    s.terminated,
                    s.true_rewards,
                    s.qpos,
                    s.qvel,
                )
            )
            self._pending[i].append(row)
            if done[i]:
                self._store_episode(self._pending[i])
                self._pending[i] = []

    def _store_episode(self, steps: list[tuple[np.ndarray, ...]]) -> None:
        """Insert one episode (or the part of one that a checkpoint cut) as a block of rows."""
        if not steps:
            return
        fields = [np.stack(column) for column in zip(*steps, strict=True)]
        self._add_block(fields, np.arange(len(steps) - 1, -1, -1))

    def _add_block(self, fields: list[np.ndarray], steps_left: np.ndarray) -> None:
        n = min(len(steps_left), self.capacity)  # an oversized block keeps its newest rows
        rows = (self.pos + np.arange(n)) % self.capacity
        self.add(*fields)
        self.steps_left[rows] = steps_left[len(steps_left) - n :]

    def _caching(self) -> bool:
        return False  # a relabelled goal differs per draw: every minibatch is scored anew

    def sample(
        self, batch_size: int, rng: np.random.Generator, recent_share: float = 0.0, recent: int = 0
    ) -> Transitions:
        """``batch_size`` stored steps drawn uniformly, the future strategy applied, then scored
        (no recent share: the config refuses --sac.recent-share with --sac.her)."""
        if recent_share:
            raise ValueError("the hindsight buffer draws uniformly: no recent share")
        if not self.ready():
            raise RuntimeError("nothing to sample: no episode stored or no reward source")
        idx = rng.integers(0, self.size, batch_size)
        relabel = rng.random(batch_size) < self.future_p
        ahead = (rng.random(batch_size) * (self.steps_left[idx] + 1)).astype(np.int64)
        future = (idx + np.minimum(ahead, self.steps_left[idx])) % self.capacity
        return self.relabelled(idx, future, relabel)

    def relabelled(self, idx: np.ndarray, future: np.ndarray, relabel: np.ndarray) -> Transitions:
        """Rows ``idx``; where ``relabel``, their desired goal becomes the goal achieved after
        row ``future`` (a later step of the same episode, or the row itself). Rewards from the
        current source."""
        if self.reward_fn is None:
            raise RuntimeError("the buffer has no reward source yet")
        goal = np.where(
            relabel[:, None],
            self.next_obs[future][:, self.achieved],
            self.obs[idx][:, self.desired],
        )
        obs, next_obs, actions = self.obs[idx], self.next_obs[idx], self.actions[idx]
        obs[:, self.desired] = next_obs[:, self.desired] = goal
        if self.reward_fn is ENV_REWARD:
            if self.goal_reward is None:
                raise RuntimeError("the env's reward needs the env's compute_reward")
            rewards = self.goal_reward(next_obs[:, self.achieved], goal)
        else:
            rewards = self.reward_fn(obs, actions)
        rewards = np.asarray(rewards, np.float32).reshape(-1)
        return Transitions(obs, actions, rewards, next_obs, self.terminated[idx], idx)

    # -- state: a checkpoint holds the stored rows, and the episodes in progress as cut ones ------
    def state_dict(self) -> dict[str, object]:
        """The base buffer's state, with each env's episode in progress appended (a resumed run
        starts new episodes, so they end here), and ``steps_left`` of every row."""
        state = super().state_dict()
        left = [self.steps_left[self._order()]]
        extra = 0
        for steps in self._pending:
            if not steps:
                continue
            for name, column in zip(_STEP_FIELDS, zip(*steps, strict=True), strict=True):
                part = torch.from_numpy(np.stack(column).astype(state[name].numpy().dtype))
                state[name] = torch.cat([state[name], part])
            left.append(np.arange(len(steps) - 1, -1, -1))
            extra += len(steps)
        return state | {
            "added": self.added + extra,
            "steps_left": torch.from_numpy(np.concatenate(left)),
        }

    def load_state_dict(self, state: dict) -> None:
        """Refill from :meth:`state_dict`; a checkpoint of a plain buffer (no ``steps_left``)
        restores its rows as one-step episodes (relabelled only with their own achieved goal)."""
        self.pos = self.size = self.added = 0
        self._pending = [[] for _ in self._pending]
        fields = [np.asarray(state[name]) for name in _STEP_FIELDS]
        n = len(fields[0])
        left = np.asarray(state["steps_left"]) if "steps_left" in state else np.zeros(n, np.int64)
        self._add_block(fields, left.astype(np.int64))
        self.added = int(state["added"])
        self.set_reward_fn(self.reward_fn, self._per_sample)
