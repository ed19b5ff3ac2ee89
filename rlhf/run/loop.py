"""Deep RL from human preferences (Christiano et al. 2017), one stage after another.

Each PPO iteration (:func:`train`):

1. collect a rollout with the current policy;
2. with a learned reward (:func:`preference_round`): cut the rollout into segments for the pool
   (:func:`add_segments`), ask the schedule how many queries are due, select the pairs the
   ensemble disagrees on most and hand them to the feedback source (those stages are
   :mod:`rlhf.run.asking`), read the labels from the store and retrain the ensemble when they
   grew (:func:`fit_reward`); then score the rollout with it (:func:`score_rollout`);
3. update PPO on those rewards (it never learns where they come from);
4. log, and write a checkpoint when one is due.

:func:`train` and :func:`preference_round` hold the run's parts (:class:`~rlhf.run.trainer.Trainer`);
each stage they call is a verb on the parts it uses.

This is the only module that knows both the agent and the reward learner. A run's parts, and
saving and restoring them, are :mod:`rlhf.run.trainer`; a run's life around the loop (start or
resume, stop on Ctrl-C with a checkpoint, finish) is :mod:`rlhf.run.runner`.
"""

from __future__ import annotations

import time

import numpy as np

from rlhf.agent.collector import PolicyRollout
from rlhf.config import flag
from rlhf.core.status import Phase
from rlhf.core.types import Pair, RolloutBatch, Segment
from rlhf.queries.segments import SegmentPool, cut_segments
from rlhf.reward.learner import RewardLearner
from rlhf.reward.train import TrainStats
from rlhf.run import agent_view as view
from rlhf.run.asking import (
    clips_due,
    first_labels_needed,
    queries_due,
    request_feedback,
    select_queries,
    steps_are_new,
)
from rlhf.run.health import check_agent, check_rollout
from rlhf.run.logger import Logger
from rlhf.run.pacing import retire_stale_pairs
from rlhf.run.preferences import Preferences
from rlhf.run.report import log_iteration, log_labels, log_ranking, log_reward_quality
from rlhf.run.trainer import RewardFn, Trainer, publish, write_checkpoint
from rlhf.run.waits import refuse_without_segments, wait_for_labels, wait_for_schedule


# -- the algorithm ------------------------------------------------------------------------------
def train(t: Trainer) -> None:
    """Run PPO iterations until the steps (or --max-minutes) are spent or a stop is requested."""
    while t.budget_left() and not t.stop.requested:
        iteration = t.progress.iteration + 1
        restart_policy(t, (iteration - 1) / t.iterations)
        t.agent.set_progress((iteration - 1) / t.iterations)
        rollout = t.collector.collect(t.agent.actor(), t.cfg.ppo.num_steps, t.rngs["policy"])
        check_rollout(t.cfg, t.run_dir, rollout, t.collector.global_step)
        if t.prefs is not None:
            rewards = learned_rewards(t, t.prefs, rollout, iteration)
        else:
            rewards = fixed_rewards(t.reward_fn, rollout.raw)
        # None: no label to learn from yet (a person has not answered); act, learn nothing.
        stats = None
        if rewards is not None:
            reward = t.prefs.reward if t.prefs is not None else t.reward_fn
            step = t.collector.global_step
            absorbing = absorbing_reward(t.plan.absorbing, reward, t.logger, step)
            stats = t.agent.learn(rollout, rewards, t.rngs["policy"], absorbing)
        record_iteration(t, rollout, stats)
        if t.clock.due(t.progress.iteration) and not t.stop.requested:
            write_checkpoint(t)


def restart_policy(t: Trainer, fraction_done: float) -> None:
    """--restart-at: once, when that share of the run is done, the policy starts again from
    new weights and learns from the reward as the labels have made it so far."""
    share = t.cfg.ppo.restart_at
    if t.prefs is None or not share or fraction_done < share or t.agent.restarted_at is not None:
        return
    t.agent.restart(fraction_done)
    step = t.collector.global_step
    t.logger.scalar("charts/policy_restarted", 1.0, step)
    t.logger.message(
        f"step {step}: the policy starts again from new weights ({flag('ppo.restart_at')}"
        f" {share:g}); the reward and its labels go on"
    )


def learned_rewards(
    t: Trainer, p: Preferences, rollout: PolicyRollout, iteration: int
) -> np.ndarray | None:
    """The preference stages of one iteration; returns the rollout's learned rewards (T, N)."""
    segments = preference_round(t, p, rollout, iteration)
    rewards = None
    if p.reward.trained:
        rewards = score_rollout(p.reward, rollout.raw, segments, t.logger, t.collector.global_step)
    show_agent(t, p, rollout, segments, iteration)
    return rewards


def preference_round(
    t: Trainer, p: Preferences, rollout: PolicyRollout, iteration: int, ask: bool = True
) -> list[Segment]:
    """Cut the rollout's segments into the pool; with ``ask``, request the labels now due,
    then retrain the reward when the labels grew. Returns the segments cut."""
    cfg, q, step = t.cfg, t.cfg.query, t.collector.global_step
    segments = add_segments(
        p.pool, rollout.raw, t.plan.segment_length, t.plan.absorbing, t.rngs["segments"]
    )
    t.longest_episode = max([t.longest_episode, *rollout.episode_lengths])
    refuse_without_segments(len(p.pool), iteration, t.plan.segment_length, t.longest_episode)
    if not ask:  # PEBBLE's pretraining: segments for the first queries, no query yet
        return segments
    human = cfg.feedback == "human"
    if human and q.retire_after:
        retire_stale_pairs(p.store, t.logger, iteration - q.retire_after, step)
    new = q.ask_when_new is not None and steps_are_new(
        p, rollout.raw, q.ask_when_new, t.logger, step
    )
    due = queries_due(p.schedule, p.store, t.progress.requested, step, new, t.label_horizon())
    if due > 0 and len(p.pool) >= 2:
        n_clips = clips_due(due, cfg.feedback_kind, t.progress.requested)
        model = p.reward if p.reward.trained else None  # no model yet: uniform queries
        replayed = replayed_pairs(t, p, due - n_clips) if model is not None else []
        n_pairs = due - n_clips - len(replayed)
        pairs, clips = select_queries(p.pool, model, q, t.rngs["query"], n_pairs, n_clips)
        asked = request_feedback(p.feedback, pairs + replayed, clips, cfg.feedback_kind, iteration)
        t.progress.requested += asked
        t.logger.scalar("labels/requested", t.progress.requested, step)
    board, say = t.status, t.logger.message
    assert board is not None  # a learned-reward run has a store, and the page's status in it
    if human and cfg.feedback_pace:
        wait_for_schedule(p.reward.trained, p.store, p.feedback, t.stop, say, board)
    elif cfg.feedback_wait and not p.reward.trained:
        needed = first_labels_needed(t.progress.requested, p.schedule, p.store)
        wait_for_labels(needed, p.store, p.feedback, t.stop, say, board)
    fit = fit_reward(p, t.rngs["train"])
    if fit is not None:
        t.logger.scalars({**fit.metrics(), "labels/used": p.reward.fitted_on}, step)
    log_labels(t.logger, p.store.counts(), step)
    return segments


# -- the stages, each a verb on the parts it uses -----------------------------------------------
def add_segments(
    pool: SegmentPool,
    raw: RolloutBatch,
    length: int,
    absorbing: bool,
    rng: np.random.Generator,
) -> list[Segment]:
    """Cut a rollout into segments at random places and add them to the pool; returns them."""
    segments = cut_segments(raw, length, rng, absorbing)
    pool.add(segments)
    return segments


def replayed_pairs(t: Trainer, p: Preferences, n: int) -> list[Pair]:
    """round(--query.replay-share x n) of the ``n`` pairs asked now, replayed from recorded
    states with the current policy (:mod:`rlhf.queries.replayed`)."""
    k = round((t.cfg.query.replay_share or 0.0) * n)  # None outside a run: no preset, none
    if t.replayer is None or k == 0 or t.cfg.algo != "ppo":
        return []
    actor, norm = t.agent.actor(), t.agent.obs_norm  # type: ignore[union-attr]  # PPO (above)
    before = t.replayer.steps
    pairs = t.replayer.pairs(
        p.pool.segments(),
        k,
        lambda obs: actor.mean(norm(obs[None].astype(np.float32)))[0],
        actor.std,
        t.rngs["query"],
    )
    # Counted in the checkpointed progress, so a resumed run's curve goes on where it stopped.
    t.progress.replay_steps += t.replayer.steps - before
    t.logger.scalar("labels/replay_steps", t.progress.replay_steps, t.collector.global_step)
    return pairs


def fit_reward(p: Preferences, rng: np.random.Generator, final: bool = False) -> TrainStats | None:
    """Train the reward on every label in the store when they grew enough (``final``: at the
    end of a run, on those that came in after the last round too); None: not trained now."""
    labelled, rated = p.labelled(), p.rated()
    if not p.reward.wants_fit(len(labelled) + len(rated), final=final):
        return None
    recent = p.pool.segments() if p.reward.cfg.self_predict > 0 else None
    return p.reward.fit(labelled, rng, rated, recent)


def score_rollout(
    reward: RewardLearner, raw: RolloutBatch, segments: list[Segment], logger: Logger, step: int
) -> np.ndarray:
    """What PPO is paid for every step of a rollout (T, N): the learned reward, plus the
    members' disagreement with --reward-model.explore-bonus; the learned reward alone is what is
    logged against the true one."""
    steps, n, obs_dim = raw.obs.shape
    weight = reward.explore_weight(step)
    obs, actions = raw.obs.reshape(-1, obs_dim), raw.actions.reshape(steps * n, -1)
    rewards, learned = reward.score_exploring(obs, actions, weight)
    log_reward_quality(logger, learned, raw.true_rewards, raw.valid, step, raw.reward_parts)
    if weight:
        logger.scalar("reward/explore_bonus", float((rewards - learned).mean()), step)
    if segments:  # how well the reward ranks what the policy does now
        learned = segment_returns(reward, segments)
        log_ranking(logger, learned, [s.true_return for s in segments], step)
    return rewards.reshape(steps, n)


def segment_returns(reward: RewardLearner, segments: list[Segment]) -> np.ndarray:
    """Each segment's return under the learned reward."""
    obs = np.concatenate([s.obs for s in segments])
    learned = reward.score(obs, np.concatenate([s.actions for s in segments]))
    return learned.reshape(len(segments), -1).sum(axis=1)


def absorbing_reward(
    absorbing: bool, reward: RewardLearner | RewardFn | None, logger: Logger, step: int
) -> float | None:
    """What a step after a termination is worth to the agent: the learned absorbing reward
    (None: nothing, as with the env's own reward, or a run without the absorbing state)."""
    if not absorbing:
        return None
    if not isinstance(reward, RewardLearner):  # a saved reward (--reward-model) knows its value
        return getattr(reward, "absorbing", None)
    value = reward.absorbing_reward()
    logger.scalar("reward/absorbing", value, step)
    return value


def fixed_rewards(reward_fn: RewardFn | None, raw: RolloutBatch) -> np.ndarray:
    """The env's own reward (the baseline), or a given reward function's."""
    if reward_fn is None:
        return raw.true_rewards
    steps, n, obs_dim = raw.obs.shape
    flat = reward_fn(raw.obs.reshape(-1, obs_dim), raw.actions.reshape(steps * n, -1))
    return np.asarray(flat, np.float32).reshape(steps, n)


# -- what the run shows and records -------------------------------------------------------------
def show_agent(
    t: Trainer, p: Preferences, rollout: PolicyRollout, segments: list[Segment], iteration: int
) -> None:
    """The agent in view (:mod:`rlhf.run.agent_view`): the page's learning curve, a clip of the
    policy every few iterations, and the clips drawn so far in TensorBoard."""
    learned = segment_returns(p.reward, segments) if p.reward.trained and segments else None
    point = (rollout.episode_returns, learned, p.reward.held_out_accuracy)
    t.clips_logged = view.show(
        t.cfg, p.store, t.logger, iteration, t.collector.global_step, segments, point,
        t.clips_logged,
    )  # fmt: skip


def record_iteration(
    t: Trainer, rollout: PolicyRollout, stats: object, exploring: str | None = None
) -> None:
    """Advance the counters, log the iteration and tell the page (``exploring``: what SAC's
    unsupervised start says instead of the iteration count)."""
    check_agent(t.cfg, t.run_dir, t.agent.state_dict(), t.collector.global_step)
    p = t.progress
    p.iteration += 1
    p.env_steps = step = t.collector.global_step
    p.episodes += len(rollout.episode_returns)
    p.recent_returns.extend(rollout.episode_returns)
    p.recent_successes.extend(rollout.episode_successes)
    p.recent_env_returns.extend(rollout.env_returns)
    sps = (step - t.start_step) / max(time.monotonic() - t.started, 1e-9)
    lr = t.agent.optimizer.param_groups[0]["lr"]
    log_iteration(t.logger, rollout, stats, lr, step, sps)  # type: ignore[arg-type]
    if exploring is None:
        publish(t, Phase.TRAINING, f"iteration {p.iteration} of {t.iterations}")
    else:
        publish(t, Phase.EXPLORING, exploring)
    ret = p.mean_return
    t.logger.progress(t.cfg.batch_size, ret=float("nan") if ret is None else ret, sps=int(sps))
