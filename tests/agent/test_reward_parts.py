"""The env's reward terms travel with a rollout, and TensorBoard shows how the learned reward
follows each one (a learned reward can match the total while missing a term)."""

from __future__ import annotations

import numpy as np
import torch

from rlhf.agent.collector import RolloutCollector
from rlhf.agent.ppo_learner import PPOLearner
from rlhf.config import PPOConfig
from rlhf.envs import make_vec_env
from rlhf.run.report import log_reward_quality


def _rollout(env_id: str, obs_dim: int, act_dim: int, steps: int):
    envs = make_vec_env(env_id, 2, 0)
    learner = PPOLearner(obs_dim, act_dim, 2, PPOConfig(num_steps=steps), torch.device("cpu"))
    collector = RolloutCollector(envs, env_id, learner.obs_norm, 0, reward_parts=True)
    rollout = collector.collect(learner.actor(), steps, np.random.default_rng(0))
    envs.close()
    return rollout.raw


def test_halfcheetah_reward_is_the_sum_of_the_terms_the_rollout_carries() -> None:
    raw = _rollout("HalfCheetah-v5", 17, 6, 64)
    assert set(raw.reward_parts) == {"forward", "ctrl"}
    total = raw.reward_parts["forward"] + raw.reward_parts["ctrl"]
    np.testing.assert_allclose(total, raw.true_rewards, atol=1e-5)
    assert (raw.reward_parts["ctrl"][raw.valid] < 0).all()  # a cost, on every real step


def test_runs_that_do_not_learn_a_reward_skip_the_terms() -> None:
    envs = make_vec_env("HalfCheetah-v5", 1, 0)
    learner = PPOLearner(17, 6, 1, PPOConfig(num_steps=16), torch.device("cpu"))
    collector = RolloutCollector(envs, "HalfCheetah-v5", learner.obs_norm, 0)
    raw = collector.collect(learner.actor(), 16, np.random.default_rng(0)).raw
    envs.close()
    assert raw.reward_parts == {}


def test_terms_are_zero_on_the_reset_steps_after_a_fall() -> None:
    raw = _rollout("Hopper-v5", 11, 3, 300)  # a random Hopper falls within ~100 steps
    assert not raw.valid.all()
    assert {"forward", "ctrl", "survive"} <= set(raw.reward_parts)
    for part in raw.reward_parts.values():
        assert part.shape == raw.true_rewards.shape
        assert (part[~raw.valid] == 0).all()
    assert (raw.reward_parts["survive"][raw.valid] > 0).any()


class _Scalars:
    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def scalars(self, values: dict[str, float], step: int) -> None:
        self.values |= values


def test_each_term_gets_its_own_correlation() -> None:
    rng = np.random.default_rng(0)
    forward, ctrl = rng.normal(size=(2, 50, 2))
    valid = np.ones((50, 2), bool)
    valid[10, 0] = False  # a reset step: left out of every correlation
    learned = forward.copy()
    learned[10, 0] = 1e6
    logger = _Scalars()
    log_reward_quality(
        logger,  # type: ignore[arg-type]
        learned,
        forward + ctrl,
        valid,
        step=1,
        parts={"forward": forward, "ctrl": ctrl},
    )
    assert np.isclose(logger.values["reward/pearson_forward"], 1.0)
    assert abs(logger.values["reward/pearson_ctrl"]) < 0.3
    assert 0.5 < logger.values["reward/pearson_true"] < 0.9


def test_a_learned_reward_run_logs_a_correlation_per_term(tmp_path) -> None:
    from rlhf.config import QueryConfig
    from rlhf.run.runner import run
    from tests.support.helpers import tb_scalars, tiny_config

    query = QueryConfig(total_labels=10, segment_length=25)
    run(tiny_config(tmp_path, "HalfCheetah-v5", total_timesteps=1024, query=query))
    for tag in ("reward/pearson_true", "reward/pearson_forward", "reward/pearson_ctrl"):
        assert tb_scalars(tmp_path / "run" / "tb", tag), tag
