"""run(cfg): the one place that knows every stage of the loop.

collect rollout -> reward (env or learned) -> PPO update, and with a learned reward:
rollout -> segments -> pool -> query selection -> feedback -> reward ensemble training.
"""

from __future__ import annotations

import json
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlhf.agent.collector import PolicyRollout, RolloutCollector
from rlhf.agent.learner import PPOLearner
from rlhf.config import Config
from rlhf.envs import make_vec_env
from rlhf.logger import Logger
from rlhf.run_dir import RunDir, create_run_dir

RewardFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(raw obs (B, obs_dim), applied actions (B, act_dim)) -> rewards (B,)."""


@dataclass(frozen=True)
class Summary:
    """What ``summary.json`` holds at the end of a run."""

    env_id: str
    seed: int
    run_name: str
    reward: str
    feedback: str | None
    env_steps: int
    wall_seconds: float
    sps: float
    final_true_return: float | None
    episodes: int
    labels_used: int
    reward_val_accuracy: float | None


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        from rlhf.config import ConfigError

        raise ConfigError("--device cuda was asked for but torch sees no CUDA device")
    return torch.device(name)


def num_iterations(cfg: Config) -> int:
    """PPO iterations: enough rollouts to cover at least ``total_timesteps`` env steps."""
    return -(-cfg.total_timesteps // cfg.batch_size)


def seed_everything(seed: int) -> np.random.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def run(cfg: Config, reward_fn: RewardFn | None = None) -> Summary:
    """Train according to ``cfg``; returns (and writes) the run summary.

    Args:
        cfg: the run configuration.
        reward_fn: optional ``(obs, actions) -> rewards`` on raw observations (B, obs_dim) and
            applied actions (B, act_dim); when given, PPO trains on it instead of ``cfg.reward``.
    """
    cfg.validate()
    torch.set_num_threads(cfg.torch_threads)
    device = resolve_device(cfg.device)
    envs = make_vec_env(cfg.env_id, cfg.num_envs, cfg.seed)
    run_dir = create_run_dir(cfg)
    rng = seed_everything(cfg.seed)
    logger = Logger(run_dir.tb, num_iterations(cfg) * cfg.batch_size, cfg.progress)
    logger.hparams_text(cfg.to_dict())
    try:
        return _train(cfg, envs, run_dir, rng, logger, device, reward_fn)
    finally:
        logger.close()
        envs.close()


def _train(cfg, envs, run_dir: RunDir, rng, logger: Logger, device, reward_fn) -> Summary:
    obs_dim = envs.single_observation_space.shape[0]
    act_dim = envs.single_action_space.shape[0]
    learner = PPOLearner(obs_dim, act_dim, cfg.num_envs, cfg.ppo, device)
    collector = RolloutCollector(envs, cfg.env_id, learner.obs_norm, cfg.seed)
    if reward_fn is not None:
        rewards = FunctionReward(reward_fn)
    else:
        rewards = _make_reward_source(cfg, run_dir, obs_dim, act_dim, device, logger, rng)
    recent_returns: deque[float] = deque(maxlen=10)
    episodes = 0
    start = time.perf_counter()
    try:
        iterations = num_iterations(cfg)
        for iteration in range(1, iterations + 1):
            learner.set_progress((iteration - 1) / iterations)
            rollout = collector.collect(learner.actor(), cfg.ppo.num_steps, rng)
            step = collector.global_step
            step_rewards = rewards(rollout, iteration, step)
            # None: no labels yet (a human has not answered); keep acting, learn nothing.
            stats = learner.learn(rollout, step_rewards, rng) if step_rewards is not None else None
            episodes += len(rollout.episode_returns)
            recent_returns.extend(rollout.episode_returns)
            sps = step / (time.perf_counter() - start)
            _log_iteration(logger, rollout, stats, learner, step, sps)
            mean_return = float(np.mean(recent_returns)) if recent_returns else float("nan")
            rewards.report(iteration, step, mean_return)
            logger.progress(cfg.batch_size, ret=mean_return, sps=int(sps))
    finally:
        rewards.close()
    learner.save(run_dir.checkpoints / "agent.pt")
    wall = time.perf_counter() - start
    summary = Summary(
        env_id=cfg.env_id,
        seed=cfg.seed,
        run_name=run_dir.name,
        reward=cfg.reward,
        feedback=cfg.feedback if cfg.reward == "learned" else None,
        env_steps=collector.global_step,
        wall_seconds=round(wall, 2),
        sps=round(collector.global_step / wall, 1),
        final_true_return=float(np.mean(recent_returns)) if recent_returns else None,
        episodes=episodes,
        labels_used=rewards.labels_used,
        reward_val_accuracy=rewards.val_accuracy,
    )
    run_dir.summary.write_text(json.dumps(summary.__dict__, indent=2) + "\n")
    logger.message(f"run finished: {run_dir.root} (summary.json)")
    return summary


def _log_iteration(
    logger: Logger, rollout: PolicyRollout, stats, learner: PPOLearner, step: int, sps: float
) -> None:
    for ret, length in zip(rollout.episode_returns, rollout.episode_lengths, strict=True):
        logger.scalar("charts/episodic_return", ret, step)
        logger.scalar("charts/episodic_length", length, step)
    logger.scalar("charts/sps", sps, step)
    if stats is None:  # no PPO update this iteration (no labels yet)
        return
    logger.scalars(
        {
            "charts/learning_rate": learner.optimizer.param_groups[0]["lr"],
            "losses/value_loss": stats.value_loss,
            "losses/policy_loss": stats.policy_loss,
            "losses/entropy": stats.entropy,
            "losses/old_approx_kl": stats.old_approx_kl,
            "losses/approx_kl": stats.approx_kl,
            "losses/clipfrac": stats.clipfrac,
            "losses/explained_variance": stats.explained_variance,
        },
        step,
    )


class EnvReward:
    """The true-reward baseline: PPO trains on the environment's own reward."""

    labels_used = 0
    val_accuracy: float | None = None

    def __call__(self, rollout: PolicyRollout, iteration: int, step: int) -> np.ndarray:
        return rollout.raw.true_rewards

    def report(self, iteration: int, step: int, mean_return: float) -> None:
        pass

    def close(self) -> None:
        pass


class FunctionReward(EnvReward):
    """PPO trains on a given ``(obs, actions) -> rewards`` function, scored once per rollout."""

    def __init__(self, fn: RewardFn) -> None:
        self.fn = fn

    def __call__(self, rollout: PolicyRollout, iteration: int, step: int) -> np.ndarray:
        raw = rollout.raw
        steps, n, obs_dim = raw.obs.shape
        flat = self.fn(raw.obs.reshape(steps * n, obs_dim), raw.actions.reshape(steps * n, -1))
        return np.asarray(flat, np.float32).reshape(steps, n)


def _make_reward_source(cfg: Config, run_dir: RunDir, obs_dim, act_dim, device, logger, rng):
    if cfg.reward == "env":
        return EnvReward()
    from rlhf.preference import PreferenceReward

    return PreferenceReward(cfg, run_dir, obs_dim, act_dim, device, logger, rng)
