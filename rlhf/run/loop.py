"""Deep RL from human preferences (Christiano et al. 2017), one stage after another.

Each PPO iteration (:func:`train`):

1. collect a rollout with the current policy;
2. with a learned reward (:func:`learned_rewards`): cut the rollout into segments for the pool,
   ask the schedule how many queries are due, select the pairs the ensemble disagrees on most,
   hand them to the feedback source, read the labels from the store, retrain the ensemble when
   the labels grew, and score the rollout with it;
3. update PPO on those rewards (it never learns where they come from);
4. log, and write a checkpoint when one is due.

This is the only module that knows both the agent and the reward learner. A run's parts, and
saving and restoring them, are :mod:`rlhf.run.trainer`; a run's life around the loop (start or
resume, stop on Ctrl-C with a checkpoint, finish) is :mod:`rlhf.run.runner`.
"""

from __future__ import annotations

import time

import numpy as np

from rlhf.agent.collector import PolicyRollout
from rlhf.core.status import Phase
from rlhf.core.types import Pair, RolloutBatch, Segment
from rlhf.data.seed_labels import imported_pairs
from rlhf.queries.segments import cut_segments
from rlhf.queries.select import select_clips, select_pairs
from rlhf.run import agent_view as view
from rlhf.run.pacing import retire_stale_pairs, wait_for_schedule
from rlhf.run.preferences import Preferences
from rlhf.run.report import log_iteration, log_labels, log_ranking, log_reward_quality
from rlhf.run.trainer import Trainer, publish, write_checkpoint
from rlhf.run.waits import refuse_without_segments, wait_for_labels


# -- the algorithm ------------------------------------------------------------------------------
def train(t: Trainer) -> None:
    """Run PPO iterations until the step budget is spent or a stop is requested."""
    while t.progress.iteration < t.iterations and not t.stop.requested:
        iteration = t.progress.iteration + 1
        t.agent.set_progress((iteration - 1) / t.iterations)
        rollout = t.collector.collect(t.agent.actor(), t.cfg.ppo.num_steps, t.rngs["policy"])
        if t.prefs is not None:
            rewards = learned_rewards(t, t.prefs, rollout, iteration)
        else:
            rewards = fixed_rewards(t, rollout)
        # None: no label to learn from yet (a person has not answered); act, learn nothing.
        stats = None
        if rewards is not None:
            stats = t.agent.learn(rollout, rewards, t.rngs["policy"], absorbing_reward(t))
        record_iteration(t, rollout, stats)
        if t.clock.due(t.progress.iteration) and not t.stop.requested:
            write_checkpoint(t)


def learned_rewards(
    t: Trainer, p: Preferences, rollout: PolicyRollout, iteration: int
) -> np.ndarray | None:
    """The preference stages of one iteration; returns the rollout's learned rewards (T, N)."""
    segments = preference_round(t, p, rollout, iteration)
    rewards = score_rollout(t, p, rollout.raw, segments) if p.reward.trained else None
    show_agent(t, p, rollout, segments, iteration)
    return rewards


def show_agent(
    t: Trainer, p: Preferences, rollout: PolicyRollout, segments: list[Segment], iteration: int
) -> None:
    """The agent in view (:mod:`rlhf.run.agent_view`): the page's learning curve, a clip of the
    policy every few iterations, and the clips drawn so far in TensorBoard."""
    learned = segment_returns(p, segments) if p.reward.trained and segments else None
    point = (rollout.episode_returns, learned, p.reward.val_accuracy)
    t.clips_logged = view.show(
        t.cfg, p.store, t.logger, iteration, t.collector.global_step, segments, point,
        t.clips_logged,
    )  # fmt: skip


def segment_returns(p: Preferences, segments: list[Segment]) -> np.ndarray:
    """Each segment's return under the learned reward."""
    obs = np.concatenate([s.obs for s in segments])
    learned = p.reward.score(obs, np.concatenate([s.actions for s in segments]))
    return learned.reshape(len(segments), -1).sum(axis=1)


def preference_round(
    t: Trainer, p: Preferences, rollout: PolicyRollout, iteration: int, ask: bool = True
) -> list[Segment]:
    """Cut the rollout's segments into the pool; with ``ask``, request the labels now due,
    then retrain the reward when the labels grew. Returns the segments cut."""
    q, step, rng = t.cfg.query, t.collector.global_step, t.rngs
    segments = cut_segments(rollout.raw, t.plan.segment_length, rng["segments"], t.plan.absorbing)
    p.pool.add(segments)
    t.longest_episode = max([t.longest_episode, *rollout.episode_lengths])
    refuse_without_segments(len(p.pool), iteration, t.plan.segment_length, t.longest_episode)
    if not ask:  # PEBBLE's pretraining: segments for the first queries, no query yet
        return segments
    human = t.cfg.feedback == "human"
    if human and q.retire_after:
        retire_stale_pairs(p.store, t.logger, iteration - q.retire_after, step)
    # The schedule counts what was answered (or still can be): retired pairs are asked for
    # again, fresh. (Failed videos are not: a renderer that always fails would ask forever.)
    due = p.schedule.due(step) - (t.progress.requested - p.store.counts().retired)
    if due > 0 and len(p.pool) >= 2:
        request_queries(t, p, due, iteration)
        t.logger.scalar("labels/requested", t.progress.requested, step)
    if human and t.cfg.feedback_pace:
        wait_for_schedule(
            p, t.stop, t.logger, lambda msg, **kw: publish(t, Phase.WAITING, msg, **kw)
        )
    elif t.cfg.feedback_wait and not p.reward.trained:
        wait_for_first_labels(t, p)
    labelled, rated = p.labelled(), p.rated()
    if p.reward.wants_fit(len(labelled) + len(rated)):
        fit = p.reward.fit(labelled, rng["train"], rated)
        t.logger.scalars({**fit.metrics(), "labels/used": p.reward.fitted_on}, step)
    log_labels(t.logger, p.store.counts(), step)
    return segments


def request_queries(t: Trainer, p: Preferences, due: int, iteration: int) -> None:
    """Request ``due`` queries: pairs to compare, clips to grade, or (both) one of each in turn,
    so a person sees them mixed."""
    q, rng = t.cfg.query, t.rngs["query"]
    kind = t.cfg.feedback_kind
    n_clips = {"pairs": 0, "ratings": due}.get(kind, (due + t.progress.requested % 2) // 2)
    model = p.reward if p.reward.trained else None  # no model yet: uniform queries
    replayed = replayed_pairs(t, p, due - n_clips) if model is not None else []
    pairs = select_pairs(
        p.pool.segments(), due - n_clips - len(replayed), q.selection, model, q.oversample, rng
    )
    pairs += replayed
    clips = select_clips(p.pool.segments(), n_clips, q.selection, model, q.oversample, rng)
    step = 1 if kind == "both" else max(len(pairs), len(clips))
    for i in range(0, max(len(pairs), len(clips)), step):
        if pairs[i : i + step]:
            p.feedback.request(pairs[i : i + step], iteration)
        if clips[i : i + step]:
            p.feedback.request_ratings(clips[i : i + step], iteration)
    t.progress.requested += len(pairs) + len(clips)


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


def score_rollout(
    t: Trainer, p: Preferences, raw: RolloutBatch, segments: list[Segment]
) -> np.ndarray:
    """The learned reward of every step of a rollout (T, N), logged against the true one."""
    step = t.collector.global_step
    steps, n, obs_dim = raw.obs.shape
    rewards = p.reward.score(raw.obs.reshape(-1, obs_dim), raw.actions.reshape(steps * n, -1))
    log_reward_quality(t.logger, rewards, raw.true_rewards, raw.valid, step, raw.reward_parts)
    if segments:  # how well the reward ranks what the policy does now
        learned = segment_returns(p, segments)
        log_ranking(t.logger, learned, [s.true_return for s in segments], step)
    return rewards.reshape(steps, n)


def absorbing_reward(t: Trainer) -> float | None:
    """What a step after a termination is worth to PPO: the learned absorbing reward (None:
    nothing, as with the env's own reward)."""
    if not t.plan.absorbing:
        return None
    if t.prefs is None:  # a saved reward (--reward-model) knows its value; the env's has none
        return getattr(t.reward_fn, "absorbing", None)
    value = t.prefs.reward.absorbing_reward()
    t.logger.scalar("reward/absorbing", value, t.collector.global_step)
    return value


def fixed_rewards(t: Trainer, rollout: PolicyRollout) -> np.ndarray:
    """The env's own reward (the baseline), or a given reward function's."""
    raw = rollout.raw
    if t.reward_fn is None:
        return raw.true_rewards
    steps, n, obs_dim = raw.obs.shape
    flat = t.reward_fn(raw.obs.reshape(-1, obs_dim), raw.actions.reshape(steps * n, -1))
    return np.asarray(flat, np.float32).reshape(steps, n)


def wait_for_first_labels(t: Trainer, p: Preferences) -> None:
    """``--feedback-wait``: hold PPO until the initial share of the requested labels is answered.

    Every answer counts, skips included: a person who skips the first pairs must not leave the
    trainer waiting for pairs it will never ask for (with no usable label yet, PPO waits another
    iteration and the next pairs are requested then). Nothing requested yet: nothing to wait for.
    """
    needed = min(t.progress.requested, p.schedule.due(0)) + imported_pairs(p.store)

    def tell(message: str, missing: int) -> None:
        publish(t, Phase.WAITING, message, labels_needed=missing)

    wait_for_labels(needed, p.store, p.feedback, t.stop, t.logger.message, tell)


def record_iteration(t: Trainer, rollout: PolicyRollout, stats: object) -> None:
    """Advance the counters, log the iteration and tell the page."""
    p = t.progress
    p.iteration += 1
    p.env_steps = step = t.collector.global_step
    p.episodes += len(rollout.episode_returns)
    p.recent_returns.extend(rollout.episode_returns)
    p.recent_successes.extend(rollout.episode_successes)
    sps = (step - t.start_step) / max(time.monotonic() - t.started, 1e-9)
    lr = t.agent.optimizer.param_groups[0]["lr"]
    log_iteration(t.logger, rollout, stats, lr, step, sps)  # type: ignore[arg-type]
    publish(t, Phase.TRAINING, f"iteration {p.iteration} of {t.iterations}")
    ret = p.mean_return
    t.logger.progress(t.cfg.batch_size, ret=float("nan") if ret is None else ret, sps=int(sps))


def final_reward_round(t: Trainer) -> None:
    """Train the reward once more on every label, those that came in after the last round too."""
    if t.prefs is not None:
        labelled, rated = t.prefs.labelled(), t.prefs.rated()
        if t.prefs.reward.wants_fit(len(labelled) + len(rated), final=True):
            t.prefs.reward.fit(labelled, t.rngs["train"], rated)
