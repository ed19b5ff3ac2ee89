"""A run's parts while it trains: building them, publishing their status, saving and
restoring them.

:class:`Trainer` holds the envs, the agent and (with a learned reward) the preference side;
:func:`build_trainer` makes them for a run, :func:`write_checkpoint` and :func:`restore` carry
them across sessions. :mod:`rlhf.run.loop` drives them, one stage after another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch

from rlhf.agent.collector import RolloutCollector
from rlhf.agent.her_buffer import HindsightReplayBuffer
from rlhf.agent.ppo_learner import PPOLearner
from rlhf.agent.replay import ENV_REWARD, ReplayBuffer
from rlhf.agent.rollout import ObsNormalizer
from rlhf.agent.sac_learner import SACLearner
from rlhf.config import Config, ConfigError
from rlhf.config.presets import general_queries
from rlhf.core.signed import save_signed
from rlhf.core.status import Phase
from rlhf.data.seed_labels import LabelsSource, imported_pairs
from rlhf.envs import make_env, make_vec_env, with_target
from rlhf.envs.goals import goal_reward_fn
from rlhf.queries.replayed import Replayer
from rlhf.run.checkpoint import rng_state, save_checkpoint, set_rng_state
from rlhf.run.health import check_agent
from rlhf.run.lifecycle import CheckpointClock, Progress, StopSignals
from rlhf.run.logger import Logger
from rlhf.run.preferences import Preferences, open_preferences
from rlhf.run.preflight import RunPlan
from rlhf.run.report import StatusBoard
from rlhf.run.run_dir import RunDir

RewardFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(raw obs (B, obs_dim), applied actions (B, act_dim)) -> rewards (B,)."""

LAST_CHECKPOINT = "last.pt"
"""The run's latest checkpoint, in ``checkpoints/``."""


@dataclass
class Trainer:
    """Everything a run holds while it trains."""

    cfg: Config
    plan: RunPlan
    run_dir: RunDir
    logger: Logger
    stop: StopSignals
    agent: PPOLearner | SACLearner
    collector: RolloutCollector
    rngs: dict[str, np.random.Generator]
    """policy (actions, minibatches), segments, query, train (reward fits), feedback."""
    progress: Progress
    clock: CheckpointClock
    prefs: Preferences | None = None
    """None: PPO trains on ``reward_fn`` or, without one, on the env's reward."""
    reward_fn: RewardFn | None = None
    started: float = field(default_factory=time.monotonic)
    """When this session began (for steps/s and the run's total training time)."""
    start_step: int = 0
    longest_episode: int = 0
    buffer: ReplayBuffer | None = None
    """SAC's replay buffer (None with PPO); see :mod:`rlhf.run.offpolicy`."""
    replayer: Replayer | None = None
    """Rolls out replayed pairs (``--query.replay-share``); None when not asked for."""
    clips_logged: int = 0
    """The newest policy clip put in TensorBoard (see :mod:`rlhf.run.agent_view`)."""
    status: StatusBoard | None = None
    """The page's status, in the store (runs with a store only)."""

    @property
    def iterations(self) -> int:
        """Iterations in the run: enough rollouts (PPO) or SAC iterations to cover
        ``total_timesteps``."""
        return -(-self.cfg.total_timesteps // self.cfg.batch_size)

    def train_seconds(self) -> float:
        """Wall time spent training over every session of the run, this one included."""
        return self.progress.train_seconds + time.monotonic() - self.started

    def out_of_time(self) -> bool:
        """Has the run trained for its --max-minutes (never, without one)?"""
        return self._seconds_left() == 0.0

    def budget_left(self) -> bool:
        """Steps to take and time to take them in (checked between iterations)."""
        return self.progress.iteration < self.iterations and not self.out_of_time()

    def ended_on_time(self) -> bool:
        """Did --max-minutes end the run before its steps were spent?"""
        return self.progress.iteration < self.iterations and self.out_of_time()

    def _pace(self) -> float | None:
        """Seconds a step at this session's pace so far (waits for labels included); None
        before the session's first step."""
        done = self.collector.global_step - self.start_step
        return (time.monotonic() - self.started) / done if done > 0 else None

    def _seconds_left(self) -> float:
        """Time left before --max-minutes (infinite without one)."""
        if not self.cfg.max_minutes:
            return float("inf")
        return max(self.cfg.max_minutes * 60.0 - self.train_seconds(), 0.0)

    def eta_seconds(self) -> float | None:
        """Wall time left at this session's pace so far, or to --max-minutes when that comes
        first; None before the first step of the session."""
        pace = self._pace()
        if pace is None:
            return None
        left = max(self.cfg.total_timesteps - self.collector.global_step, 0)
        return min(pace * left, self._seconds_left())

    def horizon(self) -> int:
        """The step the run is expected to end at: --total-timesteps, or, where --max-minutes
        comes first at this session's pace, the step it reaches by then. The label schedule
        spreads its labels over these steps, so every label is asked whichever budget ends it
        (a run with a time limit asks by the clock: not repeatable step for step)."""
        total, pace = self.cfg.total_timesteps, self._pace()
        if not self.cfg.max_minutes or pace is None or pace <= 0:
            return total
        return min(total, self.collector.global_step + int(self._seconds_left() / pace))

    def label_horizon(self) -> int:
        """The step by which every label is asked: :meth:`horizon`, or the --query.ask-until
        share of --total-timesteps where that comes first."""
        until = max(1, round(self.cfg.query.ask_until * self.cfg.total_timesteps))
        return min(self.horizon(), until)


def publish(t: Trainer, phase: Phase, message: str, **extra: object) -> None:
    """Write the trainer status where the labelling page reads it (runs with a store only)."""
    if t.status is not None:
        t.status.publish(phase, message, **extra)


def build_trainer(
    cfg: Config,
    plan: RunPlan,
    run_dir: RunDir,
    logger: Logger,
    stop: StopSignals,
    progress: Progress,
    reward_fn: RewardFn | None,
    cleanup: contextlib.ExitStack,
    labels: LabelsSource | None = None,
) -> Trainer:
    """Make the envs, the agent and (with a learned reward) the preference side of a run.

    Whatever needs closing is registered on ``cleanup``. With human feedback this starts the
    labelling session. ``labels``: what ``--labels-from`` holds (read by the runner), copied
    into a new run's store.
    """
    cfg = dataclasses.replace(cfg, query=general_queries(cfg.query))  # with_preset filled a run's
    device = _device(cfg.device)
    envs = make_vec_env(
        cfg.env_id, cfg.num_envs, cfg.seed, cfg.env_kwargs_dict(), plan.fixed_horizon, plan.target
    )
    cleanup.callback(envs.close)
    rngs = _rngs(cfg.seed)  # seeds torch too: before the agent's weights are drawn
    agent, buffer, obs_norm = _agent(cfg, plan, envs, device, reward_fn)
    # A resumed run starts new episodes, from a seed of its own (the envs' state is not saved).
    reset_seed = cfg.seed
    if progress.env_steps:
        reset_seed = int(
            np.random.SeedSequence([cfg.seed, progress.env_steps]).generate_state(1)[0]
        )
    learns_reward = reward_fn is None and cfg.reward == "learned"
    collector = RolloutCollector(
        envs, cfg.env_id, obs_norm, reset_seed, progress.env_steps, reward_parts=learns_reward
    )
    clock = CheckpointClock(cfg.checkpoint_every, cfg.checkpoint_minutes)
    t = Trainer(cfg, plan, run_dir, logger, stop, agent, collector, rngs, progress, clock)
    t.start_step = progress.env_steps
    t.buffer = buffer
    if not learns_reward:
        t.reward_fn = reward_fn
        if buffer is not None:
            buffer.set_reward_fn(ENV_REWARD if reward_fn is None else reward_fn)
        return t
    t.prefs = open_preferences(cfg, run_dir, plan, device, rngs["feedback"], logger.message, labels)
    t.status = StatusBoard(t.prefs.store, cfg, progress, t.prefs.reward, t.eta_seconds)
    if cfg.query.replay_share:
        kwargs = cfg.env_kwargs_dict()
        t.replayer = Replayer(lambda: with_target(make_env(cfg.env_id, kwargs), plan.target))
        cleanup.callback(t.replayer.close)
    cleanup.callback(t.prefs.store.close)
    cleanup.callback(t.prefs.feedback.close)  # a safety net: the runner closes it with a grace
    publish(t, Phase.STARTING, "starting")
    return t


def _agent(
    cfg: Config,
    plan: RunPlan,
    envs: gym.vector.SyncVectorEnv,
    device: torch.device,
    reward_fn: RewardFn | None,
) -> tuple[PPOLearner | SACLearner, ReplayBuffer | None, ObsNormalizer]:
    """The learner, SAC's replay buffer (None with PPO) and the observation normaliser the
    collector uses."""
    obs_dim, act_dim = plan.env.obs_dim, plan.env.act_dim
    agent: PPOLearner | SACLearner
    buffer: ReplayBuffer | None = None
    if cfg.algo == "sac":
        space = envs.single_action_space
        agent = SACLearner(obs_dim, act_dim, space.low, space.high, cfg.sac, device)
        nq, nv = plan.env.nq, plan.env.nv
        capacity = min(cfg.sac.buffer_size, cfg.total_timesteps)  # never more than the run fills
        if cfg.sac.her:  # goal envs only (preflight): relabels goals per minibatch
            buffer = HindsightReplayBuffer(
                capacity, obs_dim, act_dim, nq, nv, goal_size=plan.env.goal_size,
                num_envs=cfg.num_envs, future_k=cfg.sac.her_future_k,
                goal_reward=goal_reward_fn(envs.envs[0]),
            )  # fmt: skip
        else:
            buffer = ReplayBuffer(capacity, obs_dim, act_dim, nq, nv, relabel=cfg.sac.relabel)
        if cfg.reward == "learned" and reward_fn is None:
            buffer.set_reward_fn(None)  # no reward until pretraining or the first labels
        obs_norm = ObsNormalizer(obs_dim, enabled=False)  # SAC acts on raw observations
    else:
        agent = PPOLearner(obs_dim, act_dim, cfg.num_envs, cfg.ppo, device)
        obs_norm = agent.obs_norm
    return agent, buffer, obs_norm


def _rngs(seed: int) -> dict[str, np.random.Generator]:
    """One seed, five independent streams (a new consumer of one never shifts the others)."""
    torch.manual_seed(seed)
    streams = np.random.SeedSequence(seed).spawn(4)
    names = ("segments", "query", "train", "feedback")
    return {"policy": np.random.default_rng(seed)} | {
        name: np.random.default_rng(s) for name, s in zip(names, streams, strict=True)
    }


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for but torch sees no CUDA device")
    return torch.device(name)


def write_checkpoint(t: Trainer) -> None:
    """Save everything the run needs to continue (see :func:`restore`) to ``checkpoints/last.pt``."""
    p = t.progress
    agent = t.agent.state_dict()
    check_agent(t.cfg, t.run_dir, agent, p.env_steps)  # never over a good one with a broken one
    state = {
        "progress": {**p.state_dict(), "train_seconds": t.train_seconds()},
        "agent": agent,
        "preferences": None if t.prefs is None else t.prefs.state_dict(),
        "rngs": {name: rng_state(rng) for name, rng in t.rngs.items()},
        "torch_rng": torch.get_rng_state(),
    }
    if t.buffer is not None:  # SAC learns from all of it: a resumed run must have it back
        state["replay"] = t.buffer.state_dict()
    save_checkpoint(state, t.run_dir.checkpoints / LAST_CHECKPOINT)
    t.clock.reset()


def restore(t: Trainer, state: dict) -> None:
    """Load a checkpoint written by :func:`write_checkpoint` into freshly built parts."""
    t.agent.load_state_dict(state["agent"])
    for name, rng in t.rngs.items():
        set_rng_state(rng, state["rngs"][name])
    torch.set_rng_state(state["torch_rng"])
    if t.buffer is not None:
        t.buffer.load_state_dict(state["replay"])
    if t.prefs is not None:
        t.prefs.load_state_dict(state["preferences"])
    restore_from_labels(t)


def restore_from_labels(t: Trainer) -> None:
    """What a resumed run takes from its store (alone, for a run that left no checkpoint: a
    fresh agent and reward, which fits on every label at the first iteration): no pair is asked
    twice. Pairs asked for after the checkpoint (before a crash) are in the store; pairs seeded
    from --labels-from were never asked in this run."""
    if t.prefs is not None:
        asked = t.prefs.store.counts().pairs - imported_pairs(t.prefs.store)
        t.progress.requested = max(t.progress.requested, asked)


def save_models(t: Trainer) -> None:
    """``checkpoints/agent.pt`` and, with a learned reward, ``checkpoints/reward_model.pt``."""
    save_signed(t.agent.state_dict(), t.run_dir.checkpoints / "agent.pt")
    if t.prefs is not None:
        state = t.prefs.reward.state_dict() | {"env_id": t.cfg.env_id}  # for --reward-model
        save_signed(state, t.run_dir.checkpoints / "reward_model.pt")
