"""Learning a reward from graded clips (White et al. 2024), and weighted sampling of labels."""

from __future__ import annotations

import math

import numpy as np
import torch

from rlhf.config import RewardConfig, TeacherConfig
from rlhf.config.ratings import DataConfig
from rlhf.core.types import LabelMeta, Preference, Rating
from rlhf.feedback.rating_teacher import RatingTeacher
from rlhf.reward import sampling
from rlhf.reward.bradley_terry import preference_accuracy
from rlhf.reward.model import RewardEnsemble
from rlhf.reward.ratings import class_logits
from rlhf.reward.train import train_ensemble


def test_class_logits_put_each_clip_in_the_interval_of_its_rank() -> None:
    returns = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    grade = torch.tensor([0, 0, 1, 1, 2, 2])
    logits = class_logits(returns, grade, levels=3, k=30.0)
    # Boundaries from the grade counts: x = 0, .2 | .4, .6 | .8, 1: each clip's most likely
    # class is the grade its rank earns.
    assert logits.argmax(dim=1).tolist() == [0, 0, 1, 1, 2, 2]


def test_ratings_alone_teach_a_reward_that_ranks_held_out_segments(toy, rng) -> None:
    """Acceptance: >= 0.85 pairwise accuracy against the true reward on held-out segments."""
    teacher = RatingTeacher(TeacherConfig(), levels=7, rng=rng)
    segments = [toy.segment(rng) for _ in range(400)]
    grades = teacher.grade(segments)
    ratings = [Rating(s, g, 7) for s, g in zip(segments, grades, strict=True) if g is not None]
    cfg = RewardConfig(hidden_sizes=(64, 64), max_epochs=60, patience=6)
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, cfg, seed=0)
    stats = train_ensemble(ens, [], cfg, rng, ratings)
    held_out = toy.preferences(500, rng)
    accuracy = preference_accuracy(ens, held_out)
    assert accuracy >= 0.85, accuracy
    assert stats.n_ratings == 400 and stats.rating_val_pair_accuracy > 0.8
    assert "reward/rating_val_accuracy" in stats.metrics()


def test_pairs_and_ratings_train_together(toy, small_cfg, rng) -> None:
    teacher = RatingTeacher(TeacherConfig(), levels=4, rng=rng)
    segments = [toy.segment(rng) for _ in range(60)]
    ratings = [Rating(s, g, 4) for s, g in zip(segments, teacher.grade(segments), strict=True)]
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg)
    stats = train_ensemble(ens, toy.preferences(60, rng), small_cfg, rng, ratings)
    assert stats.n_train + stats.n_val == 120 and math.isfinite(stats.val_loss)
    assert preference_accuracy(ens, toy.preferences(300, rng)) > 0.6  # ~0.7 on 3 seeds


def test_rating_teacher_noise_models(toy, rng) -> None:
    segments = [toy.segment(rng) for _ in range(300)]
    perfect = RatingTeacher(TeacherConfig(), 5, np.random.default_rng(0)).grade(segments)
    returns = np.array([s.true_return for s in segments])
    # The oracle's grades are the return quintiles: monotone in the return, about equally common.
    order = np.argsort(returns)
    assert np.all(np.diff(np.array(perfect)[order]) >= 0)
    assert np.bincount(perfect).tolist() == [60] * 5
    noisy = RatingTeacher(TeacherConfig(mistake=1.0), 5, np.random.default_rng(0)).grade(segments)
    assert np.mean(np.array(noisy) == np.array(perfect)) < 0.4  # random grades
    skips = RatingTeacher(TeacherConfig(skip_threshold=0.5), 5, np.random.default_rng(0))
    graded = skips.grade(segments)
    lo, hi = returns.min(), returns.max()
    assert [g is None for g in graded] == (returns < lo + 0.5 * (hi - lo)).tolist()
    soft = RatingTeacher(TeacherConfig(beta=1.0), 5, np.random.default_rng(0)).grade(segments)
    off = np.abs(np.array(soft) - np.array(perfect))
    assert 0 < np.mean(off > 0) < 0.8 and np.corrcoef(soft, perfect)[0, 1] > 0.5


def test_weighted_draws_match_the_weights() -> None:
    """Empirical frequencies of 100k draws match exp(beta*grade)*exp(-lambda*age), the bounds
    and the demonstration share (chi-square test)."""
    grades = np.array([np.nan, np.nan, 0, 1, 2, 3, 3, 1], dtype=float)
    metas = [
        LabelMeta(iteration=10, source="synthetic"),
        LabelMeta(iteration=4, source="synthetic"),
        LabelMeta(iteration=10, source="human"),
        LabelMeta(iteration=9, source="human"),
        LabelMeta(iteration=8, source="human"),
        LabelMeta(iteration=0, source="human"),  # older than max_age: never drawn
        LabelMeta(iteration=7, source="import"),
        LabelMeta(iteration=10, source="import"),
    ]
    cfg = DataConfig(grade_beta=0.5, age_lambda=0.2, min_grade=1, max_age=8, demo_fraction=0.3)
    p = sampling.probabilities(grades, metas, cfg)
    age = 10 - np.array([m.iteration for m in metas], float)
    w = np.exp(0.5 * np.nan_to_num(grades) - 0.2 * age)
    w[2] = 0.0  # grade 0 < min_grade
    w[5] = 0.0  # age 10 > max_age
    demo = np.array([m.source == "import" for m in metas])
    expected = np.where(demo, 0.3 * w / w[demo].sum(), 0.7 * w / w[~demo].sum())
    np.testing.assert_allclose(p, expected)
    draws = sampling.draw(p, 100_000, np.random.default_rng(0))
    counts = np.bincount(draws, minlength=len(p))
    assert counts[2] == counts[5] == 0
    live = expected > 0
    e = 100_000 * expected[live]
    chi2 = float(((counts[live] - e) ** 2 / e).sum())
    assert live.sum() == 6 and chi2 < 20.52, (chi2, counts)  # chi-square, 5 dof, p = 0.001
    assert abs(counts[demo].sum() / 100_000 - 0.3) < 0.01


def test_default_data_settings_keep_plain_bagging(toy, small_cfg) -> None:
    """The --data.* defaults draw exactly what bagging drew before they existed."""
    prefs = toy.preferences(40, np.random.default_rng(3))
    weighted = [Preference(p.pair, p.mu, LabelMeta(iteration=i)) for i, p in enumerate(prefs)]
    a = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg, seed=0)
    b = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg, seed=0)
    train_ensemble(a, prefs, small_cfg, np.random.default_rng(5))
    train_ensemble(b, weighted, small_cfg, np.random.default_rng(5), data=DataConfig())
    obs, act = toy.steps(np.random.default_rng(1))
    np.testing.assert_array_equal(a.predict(obs, act), b.predict(obs, act))


def test_best_recent_holdout_keeps_the_newest_best_clips() -> None:
    grades = np.array([6, 0, 3, 5, 6, 1, 2, 4, 0, 6], float)
    its = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3, 1], float)
    train, val = sampling.best_recent_holdout(grades, its, 0.3)
    assert val.tolist() == [6, 7, 8] or sorted(val.tolist()) == [6, 7, 8]
    assert sorted([*train.tolist(), *val.tolist()]) == list(range(10))


def test_member_sample_follows_the_data_settings(toy) -> None:
    from rlhf.reward.split import member_sample

    rng = np.random.default_rng(0)
    prefs = [
        Preference(p.pair, p.mu, LabelMeta(iteration=9, source="import"))
        for p in toy.preferences(10, rng)
    ]
    clips = [Rating(toy.segment(rng), g % 5, 5, LabelMeta(iteration=9)) for g in range(40)]
    cfg = DataConfig(min_grade=3, demo_fraction=0.5)
    pairs, drawn = member_sample(
        prefs, clips, np.arange(10), np.arange(40), 3, cfg, np.random.default_rng(1)
    )
    assert len(pairs) + len(drawn) == 50
    assert all(clips[i].grade >= 3 for i in drawn)  # below --data.min-grade: never drawn
    assert abs(len(pairs) / 50 - 0.5) < 0.2  # the imported pairs: half of every draw
