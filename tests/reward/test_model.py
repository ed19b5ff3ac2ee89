"""RewardEnsemble: shapes, eval-mode prediction, normalisers, preference probabilities, checkpoints."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from rlhf.core.types import Pair
from rlhf.reward.bradley_terry import preference_accuracy
from rlhf.reward.learner import FRESH_POOL, MIN_FRESH, RewardLearner
from rlhf.reward.model import RewardEnsemble


def test_shapes_and_dtype(small_cfg, toy, rng):
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg)
    obs, act = toy.steps(rng)
    assert ens.member_rewards(obs, act).shape == (small_cfg.ensemble_size, 300)
    out = ens.predict(obs, act)
    assert out.shape == (300,) and out.dtype == np.float32
    assert ens.predict(obs[:0], act[:0]).shape == (0,)
    with pytest.raises(ValueError):
        ens.predict(obs[:, :-1], act)


def test_predict_runs_in_eval_mode_with_dropout(small_cfg, toy, rng):
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, replace(small_cfg, dropout=0.5))
    obs, act = toy.steps(rng)
    ens.train()  # even when left in train mode, prediction must switch dropout off
    first, second = ens.predict(obs, act), ens.predict(obs, act)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(ens.member_rewards(obs, act), ens.member_rewards(obs, act))
    assert ens.training, "prediction should restore the caller's mode"
    # In train mode the same members are noisy: the test above is not vacuous.
    with torch.no_grad():
        x = ens.inputs(obs, act)
        assert not torch.equal(ens(x), ens(x))


def test_predict_is_mean_of_standardised_members(small_cfg, toy, rng):
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg)
    obs, act = toy.steps(rng)
    ens.fit_output_normaliser(obs, act)
    raw = ens.member_rewards(obs, act)
    standardised = (raw - raw.mean(axis=1, keepdims=True)) / raw.std(axis=1, keepdims=True)
    np.testing.assert_allclose(standardised.mean(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(ens.predict(obs, act), standardised.mean(axis=0), atol=1e-4)


def test_exploring_score_adds_the_members_spread_and_halves_with_the_half_life(small_cfg, toy, rng):
    cfg = replace(small_cfg, explore_bonus=0.5, explore_half_life=1000)
    learner = RewardLearner(toy.obs_dim, toy.act_dim, cfg)
    obs, act = toy.steps(rng)
    learner.ensemble.fit_output_normaliser(obs, act)
    raw = learner.ensemble.member_rewards(obs, act)
    standardised = (raw - raw.mean(axis=1, keepdims=True)) / raw.std(axis=1, keepdims=True)
    assert learner.explore_weight(0) == 0.5 and learner.explore_weight(2000) == 0.125
    paid, learned = learner.score_exploring(obs, act, 0.5)
    np.testing.assert_allclose(learned, learner.score(obs, act), atol=1e-6)
    np.testing.assert_allclose(paid - learned, 0.5 * standardised.std(axis=0), atol=1e-4)
    assert (paid - learned).min() > 0  # random members disagree everywhere
    np.testing.assert_allclose(
        learner.paying(2000)(obs, act), learned + 0.125 * (paid - learned) / 0.5, atol=1e-5
    )
    off = RewardLearner(toy.obs_dim, toy.act_dim, replace(small_cfg, explore_bonus=0.0))
    assert off.explore_weight(0) == 0.0 and off.paying(0) == off.score


def test_output_normaliser_gives_zero_mean_unit_std_on_fit_data(small_cfg, toy, rng):
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, replace(small_cfg, ensemble_size=1))
    obs, act = toy.steps(rng, scale=5.0)
    before = ens.predict(obs, act)
    assert abs(before.mean()) > 1e-2 or abs(before.std() - 1) > 1e-2  # not already standard
    ens.fit_output_normaliser(obs, act)
    after = ens.predict(obs, act)
    assert abs(after.mean()) < 1e-4
    assert after.std() == pytest.approx(1.0, abs=1e-4)


def test_input_refit_keeps_the_function(small_cfg, toy, rng):
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg)
    obs, act = toy.steps(rng, scale=10.0)
    before = ens.member_rewards(obs, act)
    ens.fit_input_normaliser(obs, act)
    np.testing.assert_allclose(ens.member_rewards(obs, act), before, rtol=1e-4, atol=1e-4)
    # A second refit on different data composes correctly too.
    ens.fit_input_normaliser(*toy.steps(rng, scale=0.1))
    np.testing.assert_allclose(ens.member_rewards(obs, act), before, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(ens.members[0].in_mean, torch.zeros(ens.in_dim))


def test_preference_probs_match_summed_member_rewards(small_cfg, toy, rng):
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg)
    pairs = [*toy.pairs(4, rng), Pair(toy.segment(rng, 3), toy.segment(rng, 3))]  # mixed lengths
    probs = ens.preference_probs(pairs)
    assert probs.shape == (small_cfg.ensemble_size, 5)
    for k, pair in enumerate(pairs):
        left = ens.member_rewards(pair.left.obs, pair.left.actions).sum(axis=1)
        right = ens.member_rewards(pair.right.obs, pair.right.actions).sum(axis=1)
        np.testing.assert_allclose(probs[:, k], 1 / (1 + np.exp(right - left)), rtol=1e-4)
    swapped = ens.preference_probs([Pair(p.right, p.left) for p in pairs])
    np.testing.assert_allclose(swapped, 1 - probs, atol=1e-5)
    assert ens.preference_probs([]).shape == (small_cfg.ensemble_size, 0)


def test_seed_fixes_weights_without_touching_global_rng(small_cfg, toy, rng):
    obs, act = toy.steps(rng)
    torch.manual_seed(42)
    expected = torch.rand(1)
    torch.manual_seed(42)
    a = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg, seed=3)
    assert torch.equal(torch.rand(1), expected)
    b = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg, seed=3)
    c = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg, seed=4)
    np.testing.assert_array_equal(a.member_rewards(obs, act), b.member_rewards(obs, act))
    assert not np.allclose(a.member_rewards(obs, act), c.member_rewards(obs, act))
    members = a.member_rewards(obs, act)
    assert not np.allclose(members[0], members[1]), "members must start different"


def test_an_untrained_member_with_a_zero_output_predicts_nothing(small_cfg, toy, rng):
    # Every step 0 and every pair a tie (Bradley-Terry loss ln 2): a round that stops early
    # leaves a flat reward, not a random function the agent would chase.
    zero = RewardEnsemble(toy.obs_dim, toy.act_dim, replace(small_cfg, output_init="zero"), seed=3)
    obs, act = toy.steps(rng)
    assert not zero.member_rewards(obs, act).any()
    np.testing.assert_array_equal(zero.preference_probs(toy.pairs(5, rng)), 0.5)
    assert all(net.untrained() for net in zero.members)
    # The same hidden layers as the default's: only the output layer differs.
    random = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg, seed=3)
    assert not any(net.untrained() for net in random.members)
    assert random.member_rewards(obs, act).std() > 0
    for a, b in zip(zero.members, random.members, strict=True):
        assert torch.equal(a.body[0].weight, b.body[0].weight)


def test_a_tanh_bound_caps_every_step_however_far_the_input(small_cfg, toy, rng):
    # Far outside what any label showed, a linear output keeps growing with the input; the
    # bounded member's reward stays inside (-1, 1) and is the linear one squashed.
    obs, act = toy.steps(rng)
    far_obs, far_act = 1e3 * obs, 1e3 * act
    linear = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg, seed=5)
    bounded = RewardEnsemble(
        toy.obs_dim, toy.act_dim, replace(small_cfg, output_bound="tanh"), seed=5
    )
    assert np.abs(linear.member_rewards(far_obs, far_act)).max() > 10
    capped = bounded.member_rewards(far_obs, far_act)
    assert np.abs(capped).max() <= 1.0
    np.testing.assert_allclose(
        bounded.member_rewards(obs, act), np.tanh(linear.member_rewards(obs, act)), atol=1e-5
    )
    # A saved bounded reward loads bounded.
    learner = RewardLearner(toy.obs_dim, toy.act_dim, replace(small_cfg, output_bound="tanh"))
    again = RewardLearner.from_state_dict(learner.state_dict())
    assert np.abs(again.ensemble.member_rewards(far_obs, far_act)).max() <= 1.0


def test_state_round_trip_through_a_weights_only_file(small_cfg, toy, rng, tmp_path):
    learner = RewardLearner(toy.obs_dim, toy.act_dim, small_cfg, seed=5)
    obs, act = toy.steps(rng)
    learner.ensemble.fit_input_normaliser(obs, act)
    learner.ensemble.fit_output_normaliser(obs, act)
    torch.save(learner.state_dict(), tmp_path / "reward.pt")
    loaded = RewardLearner.from_state_dict(torch.load(tmp_path / "reward.pt", weights_only=True))
    assert loaded.ensemble.seed == 5 and loaded.cfg == small_cfg
    np.testing.assert_array_equal(loaded.score(obs, act), learner.score(obs, act))
    fresh = RewardLearner(toy.obs_dim, toy.act_dim, small_cfg, seed=5)
    fresh.load_state_dict(learner.state_dict())
    np.testing.assert_array_equal(fresh.score(obs, act), learner.score(obs, act))


def test_fit_is_wanted_on_first_labels_then_on_growth(small_cfg, toy):
    learner = RewardLearner(toy.obs_dim, toy.act_dim, replace(small_cfg, retrain_growth=0.5))
    assert not learner.wants_fit(0)
    assert learner.wants_fit(1)
    learner.fitted_on = 10
    assert not learner.wants_fit(10, final=True)
    assert not learner.wants_fit(14)
    assert learner.wants_fit(14, final=True)
    assert learner.wants_fit(15)


def test_new_labels_the_reward_misorders_restart_the_members(small_cfg, toy, rng):
    # The teacher turns round after the first round: its new answers are the opposite of what
    # the reward learned, as when an agent runs where the first labels pointed and the teacher
    # prefers the other way.
    first = toy.preferences(400, rng)  # enough for the reward to learn the toy task
    flipped = [replace(p, mu=1.0 - p.mu) for p in toy.preferences(20, rng)]
    obs, act = toy.steps(rng)

    def second_round(restart_below: float, new: list) -> RewardLearner:
        learner = RewardLearner(
            toy.obs_dim, toy.act_dim, replace(small_cfg, restart_below=restart_below), seed=3
        )
        learner.fit(first, np.random.default_rng(0))
        assert math.isnan(learner.stats.fresh_accuracy)  # the first round has nothing new
        expected = preference_accuracy(learner.ensemble, new)
        learner.fit(first + new, np.random.default_rng(1))
        assert learner.stats.fresh_accuracy == expected
        return learner

    on, off = second_round(0.5, flipped), second_round(0.0, flipped)
    assert on.stats.fresh_accuracy < 0.3
    assert on.stats.restarted and not off.stats.restarted
    assert on.stats.metrics()["reward/restarted"] == 1.0
    assert not np.allclose(on.score(obs, act), off.score(obs, act))
    again = second_round(0.5, flipped)  # one seed, one run
    np.testing.assert_array_equal(again.score(obs, act), on.score(obs, act))
    # Fewer than MIN_FRESH new labels are too few to judge the reward by.
    assert not second_round(0.5, flipped[: MIN_FRESH - 1]).stats.restarted


def test_without_a_validation_split_the_held_out_figure_is_the_newest_labels_before_training(
    small_cfg, toy, rng
):
    # Every label trains (--reward-model.val-fraction 0), so there is no validation accuracy;
    # what a person reads instead is how the reward ordered the newest labels before any round
    # trained on them: pooled from the latest rounds back until FRESH_POOL are decided.
    cfg = replace(small_cfg, val_fraction=0.0, max_epochs=5)
    learner = RewardLearner(toy.obs_dim, toy.act_dim, cfg, seed=2)
    labels = toy.preferences(100, rng)
    learner.fit(labels[:40], np.random.default_rng(0))
    assert learner.held_out_accuracy is None  # nothing was ever judged before training on it
    expected = []
    for end in (52, 64, 76, 100):
        new = labels[learner.fitted_prefs : end]
        expected.append((len(new), round(preference_accuracy(learner.ensemble, new) * len(new))))
        learner.fit(labels[:end], np.random.default_rng(end))
    assert learner.val_accuracy is None and learner.fresh_hits == expected
    # The newest rounds back to FRESH_POOL (30): 24 + 12 = 36 labels.
    assert FRESH_POOL == 30
    assert learner.held_out_accuracy == pytest.approx((expected[-1][1] + expected[-2][1]) / 36)
    assert learner.held_out_figure("pairs") == learner.held_out_accuracy
    again = RewardLearner.from_state_dict(learner.state_dict())  # a resume keeps it
    assert again.held_out_accuracy == learner.held_out_accuracy
    # With a split, the figure is the validation accuracy, as before.
    split = RewardLearner(toy.obs_dim, toy.act_dim, replace(cfg, val_fraction=0.2), seed=2)
    split.fit(labels[:40], np.random.default_rng(0))
    split.fit(labels[:60], np.random.default_rng(1))
    assert split.held_out_accuracy == split.val_accuracy is not None
