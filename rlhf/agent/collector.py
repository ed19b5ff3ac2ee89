"""Steps a vector env with the current policy and records everything later stages need."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import gymnasium as gym
import numpy as np

from rlhf.agent.rollout import ObsNormalizer
from rlhf.core.types import RolloutBatch
from rlhf.envs import ENDED, ENV_REWARD, StateRecorder
from rlhf.envs.goals import SUCCESS


@dataclass(frozen=True, eq=False)
class PolicyRollout:
    """The policy-side view of a rollout: what PPO needs besides the raw :class:`RolloutBatch`.

    Attributes:
        raw: the raw rollout (obs, applied actions, true rewards, dones, physics states).
        norm_obs: observations as the policy saw them, (T, N, obs_dim).
        actions: sampled (unclipped) actions whose log-probabilities PPO uses, (T, N, act_dim).
        last_norm_obs: normalised observation after the last row, for the value bootstrap, (N, obs_dim).
        episode_returns: true undiscounted returns of the episodes that ended in this rollout,
            as the standard env counts them: on a fixed-horizon env (see
            :class:`rlhf.envs.FixedHorizon`) the steps after the env would have ended the episode
            are not counted, so the figure compares with a run on the standard env.
        episode_lengths: their lengths, counted the same way.
        horizon_returns: their returns over every step of the episode (the same figures on a
            standard env); what a teacher judging whole episodes would see.
        episode_successes: for envs that report ``info["is_success"]`` (goal envs), 1.0 or 0.0
            per episode that ended: whether its last step reached the goal; empty otherwise.
        env_returns: with a target behaviour (the true reward is the target's, the env's own is
            in ``info["env_reward"]``, :class:`rlhf.envs.TargetReward`), the env's own return of
            each episode that ended, counted as ``episode_returns``; empty otherwise.
    """

    raw: RolloutBatch
    norm_obs: np.ndarray
    actions: np.ndarray
    last_norm_obs: np.ndarray
    episode_returns: list[float]
    episode_lengths: list[int]
    horizon_returns: list[float]
    episode_successes: list[float] = field(default_factory=list)
    env_returns: list[float] = field(default_factory=list)


class Actor(Protocol):
    """What acts in the env: PPO's :class:`rlhf.agent.ppo.NumpyActor`, SAC's actors."""

    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions (N, act_dim) float32 for observations (N, obs_dim) as the policy sees them."""
        ...


@dataclass(frozen=True, eq=False)
class StepRecord:
    """One env step of every env, handed to an off-policy learner as it happens: (N, ...) rows.

    ``next_obs`` is what the env returned (an episode's final observation where it ended);
    rows with ``valid`` False are reset steps, not transitions; ``truncated``: the time limit
    ended the episode (a hindsight buffer stores an episode when it ends).
    """

    obs: np.ndarray
    actions: np.ndarray
    next_obs: np.ndarray
    true_rewards: np.ndarray
    terminated: np.ndarray
    valid: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    truncated: np.ndarray


AfterStep = Callable[[StepRecord], None]
"""Called after every env step of a rollout (SAC stores the step and takes a gradient step)."""


_STATS_EVERY = 32
"""Steps between merges of new observations into the policy's normaliser. Merging a block costs
what merging one row does, and the statistics of a million steps barely move in 32."""


@dataclass
class _Episodes:
    """The episodes that ended during one rollout, as :class:`PolicyRollout` reports them."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    horizon_returns: list[float] = field(default_factory=list)
    successes: list[float] = field(default_factory=list)
    env_returns: list[float] = field(default_factory=list)


class RolloutCollector:
    """Owns the vector env's running state between rollouts (current obs, episode tallies)."""

    def __init__(
        self,
        envs: gym.vector.SyncVectorEnv,
        env_id: str,
        obs_norm: ObsNormalizer,
        seed: int,
        start_step: int = 0,
        reward_parts: bool = False,
    ) -> None:
        """``seed`` seeds the first reset; ``start_step`` > 0 continues a resumed run's count;
        ``reward_parts``: keep the env's reward terms with each rollout (a learned-reward run
        compares its reward with them; nobody else reads them, so others skip the work)."""
        self.envs = envs
        self.reward_parts = reward_parts
        self.env_id = env_id
        self.obs_norm = obs_norm
        self.num_envs = envs.num_envs
        space = envs.single_action_space
        self.low = space.low.astype(np.float32)
        self.high = space.high.astype(np.float32)
        self.obs, _ = envs.reset(seed=seed)
        # After the reset: a classic-control env has no state before its first one.
        self.physics = StateRecorder(envs)
        self.prev_done = np.zeros(self.num_envs, bool)
        self.ep_return = np.zeros(self.num_envs, np.float64)
        self.ep_length = np.zeros(self.num_envs, np.int64)
        self.ep_horizon_return = np.zeros(self.num_envs, np.float64)
        self.ep_env_return = np.zeros(self.num_envs, np.float64)
        self.ep_alive = np.ones(self.num_envs, bool)
        """Not yet past the step where the env itself would have ended the episode."""
        self.global_step = start_step

    def collect(
        self,
        actor: Actor,
        num_steps: int,
        rng: np.random.Generator,
        after_step: AfterStep | None = None,
    ) -> PolicyRollout:
        """Run ``num_steps`` steps in every env with ``actor``; ``after_step`` sees each step."""
        n, obs_dim = self.num_envs, self.obs.shape[1]
        act_dim = self.low.shape[0]
        raw_obs = np.empty((num_steps, n, obs_dim), np.float32)
        norm_obs = np.empty_like(raw_obs)
        actions = np.empty((num_steps, n, act_dim), np.float32)
        applied = np.empty_like(actions)
        rewards = np.empty((num_steps, n), np.float32)
        terminated = np.empty((num_steps, n), bool)
        truncated = np.empty((num_steps, n), bool)
        valid = np.empty((num_steps, n), bool)
        qpos = np.empty((num_steps, n, self.physics.nq))
        qvel = np.empty((num_steps, n, self.physics.nv))
        parts: dict[str, np.ndarray] = {}
        episodes = _Episodes()
        start_step = self.global_step
        for t in range(num_steps):
            raw_obs[t] = self.obs
            if (t + 1) % _STATS_EVERY == 0:
                self.obs_norm.update(raw_obs[t + 1 - _STATS_EVERY : t + 1].reshape(-1, obs_dim))
            norm_obs[t] = self.obs_norm(self.obs)
            actions[t] = actor.sample(norm_obs[t], rng)
            applied[t] = np.clip(actions[t], self.low, self.high)
            self.physics.read(qpos[t], qvel[t])
            # After an episode ends, gymnasium's next step is a reset step: the action is ignored.
            valid[t] = ~self.prev_done
            self.obs, rewards[t], terminated[t], truncated[t], info = self.envs.step(applied[t])
            done = terminated[t] | truncated[t]
            if after_step is not None:
                after_step(
                    StepRecord(raw_obs[t], applied[t], self.obs, rewards[t], terminated[t],
                               valid[t], qpos[t], qvel[t], truncated[t])
                )  # fmt: skip
            if self.reward_parts:
                _record_reward_parts(parts, info, t, num_steps, n)
            self._tally(rewards[t], valid[t], _ended(info, n), _env_rewards(info, n))
            self._close_episodes(done, info, episodes)
            self.prev_done = done
        self.global_step += num_steps * n
        raw = RolloutBatch(
            obs=raw_obs,
            actions=applied,
            true_rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            valid=valid,
            qpos=qpos,
            qvel=qvel,
            env_id=self.env_id,
            start_step=start_step,
            reward_parts={
                key[len(_PART_PREFIX) :]: np.where(valid, part, 0.0) for key, part in parts.items()
            },
        )
        tail = num_steps % _STATS_EVERY
        if tail:
            self.obs_norm.update(raw_obs[num_steps - tail :].reshape(-1, obs_dim))
        last = self.obs_norm(self.obs)
        return PolicyRollout(
            raw, norm_obs, actions, last, episodes.returns, episodes.lengths,
            episodes.horizon_returns, episodes.successes, episodes.env_returns,
        )  # fmt: skip

    def _close_episodes(self, done: np.ndarray, info: dict, episodes: _Episodes) -> None:
        """Log the episodes that ended this step and start their tallies afresh."""
        for i in np.flatnonzero(done):
            episodes.returns.append(float(self.ep_return[i]))
            if ENV_REWARD in info:
                episodes.env_returns.append(float(self.ep_env_return[i]))
            episodes.lengths.append(int(self.ep_length[i]))
            episodes.horizon_returns.append(float(self.ep_horizon_return[i]))
            if SUCCESS in info and info[f"_{SUCCESS}"][i]:  # the episode's last step
                episodes.successes.append(float(info[SUCCESS][i]))
        self.ep_return[done] = self.ep_horizon_return[done] = self.ep_env_return[done] = 0.0
        self.ep_length[done] = 0
        self.ep_alive[done] = True

    def _tally(
        self, rewards: np.ndarray, valid: np.ndarray, ended: np.ndarray, env_rewards: np.ndarray
    ) -> None:
        """Add one step to the episode tallies; the step on which the env ends still counts."""
        counted = valid & self.ep_alive
        self.ep_return += np.where(counted, rewards, 0.0)
        self.ep_env_return += np.where(counted, env_rewards, 0.0)
        self.ep_length += counted
        self.ep_horizon_return += np.where(valid, rewards, 0.0)
        self.ep_alive &= ~(valid & ended)


_PART_PREFIX = "reward_"


def _record_reward_parts(
    parts: dict[str, np.ndarray], info: dict, t: int, num_steps: int, n: int
) -> None:
    """Row ``t`` of each reward term the vector env's ``info`` reports (``reward_ctrl`` ->
    ``ctrl``; with a target, the env's own reward -> ``env``); an env that did not report a term
    this step (its mask is False) gets 0."""
    for key, value in info.items():
        wanted = key.startswith(_PART_PREFIX) or key == ENV_REWARD
        if not wanted or not isinstance(value, np.ndarray):
            continue
        if value.shape != (n,) or value.dtype.kind not in "fiu":
            continue
        name = _PART_PREFIX + "env" if key == ENV_REWARD else key
        part = parts.get(name)
        if part is None:
            part = parts[name] = np.zeros((num_steps, n), np.float32)
        part[t] = value
        mask = info.get("_" + key)
        if mask is not None and not mask.all():
            part[t, ~mask] = 0.0


def _env_rewards(info: dict, n: int) -> np.ndarray:
    """The env's own reward of each env this step, where a target replaced it (0 elsewhere)."""
    if ENV_REWARD not in info:
        return np.zeros(n)
    return np.where(info[f"_{ENV_REWARD}"], np.asarray(info[ENV_REWARD], np.float64), 0.0)


def _ended(info: dict, n: int) -> np.ndarray:
    """Which envs report that they would have ended their episode (:data:`rlhf.envs.ENDED`)."""
    if ENDED not in info:
        return np.zeros(n, bool)
    return np.asarray(info[ENDED], bool) & np.asarray(info[f"_{ENDED}"], bool)
