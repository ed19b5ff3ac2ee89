"""PEBBLE's first reward round: what SAC trains on once its exploration ends must already follow
the true reward on segments it was not fitted on (issue: "PEBBLE that learns from its first
labels")."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlhf.config import Config
from rlhf.config.presets import with_preset
from rlhf.reward.learner import RewardLearner

SCRIPTS = str(Path(__file__).resolve().parents[2] / "scripts")
if SCRIPTS not in sys.path:  # the offline first-round bench's segments and scores
    sys.path.insert(0, SCRIPTS)
import bench_first_round as bench  # noqa: E402

ENV = "HalfCheetah-v5"


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a hang guard: see tests/agent/test_sac.py's learning test
def test_sacs_first_round_follows_the_true_reward_on_held_out_segments(
    learning_seed, record_property
) -> None:
    # A SAC run asks its first labels when exploration ends (step 14k with the defaults): about
    # 130 perfect answers on segments that differ mostly in control cost. Measured over label
    # draws 0-5 on 100 held-out random-policy segments: every label for up to 100 epochs of one
    # pass (SAC's default until it made 32 steps an epoch) 0.78-0.84 of pairs ordered right and
    # a per-step correlation with the true reward of 0.28-0.35; with PPO's fit (a fifth held
    # out, early stopping), which SAC ran before that, 0.62-0.73 and 0.08-0.21. Today's default
    # (32 steps an epoch), draws 0-2: 0.898 and 0.533 in the mean. The bars sit between it and
    # one pass an epoch, on the mean of three draws.
    cfg, _ = with_preset(Config(env_id=ENV, algo="sac", feedback="synthetic"))
    act_dim = gym.make(ENV).action_space.shape[0]
    noise = np.random.default_rng(0)
    pool = bench.rollout(ENV, lambda t: noise.normal(size=act_dim), 10_000, seed=0)
    fit_on, held_out = pool[: len(pool) // 2], pool[len(pool) // 2 :]
    first = learning_seed(0)
    accuracy, correlation = [], []
    for seed in range(first, first + 3):
        prefs = bench.labels(fit_on, 130, 0.0, np.random.default_rng(100 + seed))
        learner = RewardLearner(pool[0].obs.shape[1], act_dim, cfg.reward_model, seed=seed)
        learner.fit(prefs, np.random.default_rng(seed))
        accuracy.append(bench.pair_accuracy(learner, held_out, np.random.default_rng(seed)))
        correlation.append(bench.step_correlation(learner, held_out))
    record_property("measured", f"{np.mean(accuracy):.3f} {np.mean(correlation):.3f}")
    assert np.mean(accuracy) >= 0.85
    assert np.mean(correlation) >= 0.42
