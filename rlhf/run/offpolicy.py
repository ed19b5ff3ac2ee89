"""The loop for ``--algo sac``: SAC on a replay buffer, and PEBBLE (Lee et al. 2021) with a learned reward.

Each SAC iteration (:func:`train_offpolicy`) runs ``--sac.iteration-steps`` env steps; after each
step the transition goes into the replay buffer and, once learning has started, SAC takes one
gradient step (every ``--sac.update-every`` steps) on a minibatch whose rewards the buffer
computes from its current reward source.
Then, with a learned reward, the iteration's segments go into the same pool, query selection,
teachers and labelling page as PPO's (:func:`rlhf.run.loop.preference_round`), and a refitted reward
becomes the buffer's source: every past transition is worth the new reward from the next
minibatch on.

PEBBLE's phases, with a learned reward:

1. ``--sac.learning-starts`` steps of uniformly random actions;
2. ``--sac.pretrain-steps`` gradient steps on the k-NN state-entropy reward
   (:mod:`rlhf.agent.entropy`): segments go into the pool, no query is asked yet;
3. the critics are reset, the first queries are asked, and SAC learns from the learned reward
   (not at all while there is no label yet).
"""

from __future__ import annotations

import numpy as np

from rlhf.agent.collector import StepRecord
from rlhf.agent.entropy import StateEntropyReward
from rlhf.agent.replay import ReplayBuffer
from rlhf.agent.sac import NumpySACActor, RandomActor, SACStats
from rlhf.agent.sac_learner import SACLearner
from rlhf.config import SACConfig
from rlhf.run.health import check_rollout
from rlhf.run.loop import (
    absorbing_reward,
    preference_round,
    record_iteration,
    score_rollout,
    show_agent,
)
from rlhf.run.trainer import Trainer, write_checkpoint


class _Stepper:
    """Acts for the collector and learns after each step: the inner loop of one SAC iteration."""

    def __init__(self, t: Trainer, agent: SACLearner, buffer: ReplayBuffer) -> None:
        self.t, self.agent, self.buffer = t, agent, buffer
        self.cfg = t.cfg.sac
        self.step = t.collector.global_step
        self.random = RandomActor(t.collector.low, t.collector.high)
        self.policy: NumpySACActor = agent.actor_numpy()
        self.stats: SACStats | None = None

    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        actor = self.random if self.step < self.cfg.learning_starts else self.policy
        return actor.sample(obs, rng)

    def after_step(self, s: StepRecord) -> None:
        self.buffer.add_step(s)  # with HER (--sac.her) it waits for the episode's end
        self.step += len(s.valid)
        if self.step < self.cfg.learning_starts or not self.buffer.ready():
            return
        cfg = self.cfg
        # from the step count, not a counter of its own, so a resumed run keeps the same rhythm
        if (self.step // len(s.valid)) % cfg.update_every:
            return
        rng = self.t.rngs["policy"]
        batch = self.buffer.sample(cfg.batch_size, rng, cfg.recent_share, cfg.recent_steps)
        self.stats = self.agent.update(batch)
        if pretraining(self.t) and self.agent.gradient_steps >= self.cfg.pretrain_steps:
            end_pretraining(self.t, self.step)


def train_offpolicy(t: Trainer) -> None:
    """Run SAC iterations until the steps (or --max-minutes) are spent or a stop is requested."""
    agent, buffer = t.agent, t.buffer
    assert isinstance(agent, SACLearner) and buffer is not None
    set_reward_source(t)
    stepper = _Stepper(t, agent, buffer)
    while t.budget_left() and not t.stop.requested:
        iteration = t.progress.iteration + 1
        stepper.stats = None
        rollout = t.collector.collect(
            stepper, t.cfg.sac.iteration_steps, t.rngs["policy"], stepper.after_step
        )
        check_rollout(t.cfg, t.run_dir, rollout, t.collector.global_step)
        if t.prefs is not None:
            fitted = t.prefs.reward.fitted_on
            segments = preference_round(t, t.prefs, rollout, iteration, ask=not pretraining(t))
            if t.prefs.reward.fitted_on != fitted:
                set_reward_source(t)  # a refitted reward reaches the whole buffer
            if t.prefs.reward.trained:  # how the reward does on what SAC does now
                step = t.collector.global_step
                score_rollout(t.prefs.reward, rollout.raw, segments, t.logger, step)
            show_agent(t, t.prefs, rollout, segments, iteration)
        record_iteration(t, rollout, stepper.stats, exploring_message(t))
        if t.clock.due(t.progress.iteration) and not t.stop.requested:
            write_checkpoint(t)


def pretraining(t: Trainer) -> bool:
    """PEBBLE's unsupervised phase: a learned-reward run whose critics were not reset yet."""
    agent = t.agent
    assert isinstance(agent, SACLearner)
    return t.prefs is not None and t.cfg.sac.pretrain_steps > 0 and agent.critic_resets == 0


def exploring_message(t: Trainer) -> str | None:
    """What the page says while PEBBLE's pretraining runs (None after it): no pair comes until
    it ends, and a person should know that it is on purpose, and until when."""
    if not pretraining(t):
        return None
    sac = t.cfg.sac
    # a gradient step every --sac.update-every vector steps from learning_starts on;
    # pretraining ends after them
    first = sac.learning_starts + sac.pretrain_steps * sac.update_every * t.cfg.num_envs
    return (
        "The agent explores on its own before it asks anything (PEBBLE's pretraining): the"
        f" first pairs come at about step {first:,}."
    )


def end_pretraining(t: Trainer, step: int) -> None:
    """Reset the critics (their values are those of the intrinsic reward) and switch the buffer
    to the learned reward."""
    agent = t.agent
    assert isinstance(agent, SACLearner)
    agent.reset_critics()
    t.logger.message(f"PEBBLE: pretraining done at step {step:,}")
    set_reward_source(t)


def set_reward_source(t: Trainer) -> None:
    """Point the replay buffer at the reward SAC should learn from now."""
    agent, buffer, prefs = t.agent, t.buffer, t.prefs
    assert isinstance(agent, SACLearner) and buffer is not None
    if prefs is None:  # the env's reward or a given function: set when the run was built
        return
    if pretraining(t):
        entropy = StateEntropyReward(buffer, t.cfg.sac.entropy_k, t.rngs["policy"])
        buffer.set_reward_fn(entropy, per_sample=True)  # it changes as the buffer fills
        agent.terminal_value = 0.0
        return
    if not prefs.reward.trained:
        buffer.set_reward_fn(None)  # no label yet: act, learn nothing
        return
    buffer.set_reward_fn(prefs.reward.paying(t.collector.global_step))
    # None unless the run pads terminations with the absorbing state
    value = absorbing_reward(t.plan.absorbing, prefs.reward, t.logger, t.collector.global_step)
    agent.terminal_value = terminal_value(value, t.cfg.sac)


def terminal_value(absorbing: float | None, cfg: SACConfig) -> float:
    """What a termination is worth to SAC's critics: the learned absorbing reward, less
    --sac.end-margin (an end worth less than the labels say, so staying up pays), forever;
    0 without an absorbing state."""
    if absorbing is None:
        return 0.0
    return (absorbing - cfg.end_margin) / (1.0 - cfg.gamma)
