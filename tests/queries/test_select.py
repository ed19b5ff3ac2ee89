"""Query selection (uniform / disagreement / entropy) and the label schedule."""

from __future__ import annotations

import numpy as np
import pytest

from rlhf.queries.select import QuerySchedule, disagreement, mean_entropy, select_pairs
from rlhf.reward.model import RewardEnsemble
from rlhf.reward.train import train_ensemble


@pytest.fixture
def pool(toy):
    rng = np.random.default_rng(11)
    return [toy.segment(rng) for _ in range(150)]


@pytest.fixture
def ensemble(toy, small_cfg):
    # Lightly trained on a few labels: the members agree on some pairs and not on others.
    ens = RewardEnsemble(toy.obs_dim, toy.act_dim, small_cfg, seed=0)
    train_ensemble(
        ens, toy.preferences(30, np.random.default_rng(12)), small_cfg, np.random.default_rng(13)
    )
    return ens


def _score(ensemble, pairs, fn):
    return float(fn(ensemble.preference_probs(pairs)).mean())


@pytest.mark.parametrize("method, fn", [("disagreement", disagreement), ("entropy", mean_entropy)])
def test_ranked_selection_beats_uniform_on_its_own_criterion(pool, ensemble, method, fn):
    for seed in range(3):
        uniform = select_pairs(pool, 20, "uniform", ensemble, 10, np.random.default_rng(seed))
        ranked = select_pairs(pool, 20, method, ensemble, 10, np.random.default_rng(seed))
        assert len(ranked) == 20
        assert _score(ensemble, ranked, fn) > _score(ensemble, uniform, fn) + 0.02
        # The selected pairs are the top of the candidates: none left out scores higher.
        candidates = select_pairs(pool, 200, "uniform", None, 1, np.random.default_rng(seed))
        scores = fn(ensemble.preference_probs(candidates))
        assert fn(ensemble.preference_probs(ranked)).min() >= np.sort(scores)[-20] - 1e-6


def test_uniform_pairs_distinct_segments_and_reproducible(pool):
    a = select_pairs(pool, 500, "uniform", None, 10, np.random.default_rng(0))
    b = select_pairs(pool, 500, "uniform", None, 10, np.random.default_rng(0))
    assert len(a) == 500
    assert all(p.left is not p.right for p in a)
    assert [(p.left, p.right) for p in a] == [(p.left, p.right) for p in b]
    # Every pool segment is reachable on both sides.
    assert len({id(p.left) for p in a}) > 120 and len({id(p.right) for p in a}) > 120


def test_without_an_ensemble_every_method_is_uniform(pool):
    uniform = select_pairs(pool, 10, "uniform", None, 5, np.random.default_rng(3))
    for method in ("disagreement", "entropy"):
        fallback = select_pairs(pool, 10, method, None, 5, np.random.default_rng(3))
        assert [(p.left, p.right) for p in fallback] == [(p.left, p.right) for p in uniform]


def test_bad_requests(pool, ensemble):
    assert select_pairs(pool, 0, "disagreement", ensemble, 10, np.random.default_rng(0)) == []
    with pytest.raises(ValueError):
        select_pairs(pool, 3, "best", ensemble, 10, np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        select_pairs(pool[:1], 3, "uniform", None, 10, np.random.default_rng(0))


def test_scores():
    probs = np.array([[0.5, 0.9, 0.1], [0.5, 0.1, 0.1]])
    np.testing.assert_allclose(disagreement(probs), [0.0, 0.4, 0.0])
    np.testing.assert_allclose(mean_entropy(probs), [np.log(2), np.log(2), 0.325083], rtol=1e-5)


def test_schedule_start_end_and_monotone():
    s = QuerySchedule(total_labels=700, initial_fraction=0.25, total_timesteps=1_000_000)
    assert s.due(0) == 175 and s.due(-5) == 175
    assert s.due(1_000_000) == 700 and s.due(5_000_000) == 700
    steps = np.linspace(0, 1_000_000, 2001).astype(int)
    due = np.array([s.due(int(t)) for t in steps])
    assert (np.diff(due) >= 0).all()
    assert due[-2] < 700  # the last label is not requested early


def test_schedule_rate_decays():
    s = QuerySchedule(total_labels=10_000, initial_fraction=0.0, total_timesteps=100_000)
    quarters = [s.due(q * 25_000) for q in range(5)]
    per_quarter = np.diff(quarters)
    assert (np.diff(per_quarter) < 0).all(), per_quarter
    # rate ~ 1/(1 + t/t_half) with t_half = T/4: the last label comes at 1/5 of the first rate.
    first = s.due(1000) - s.due(0)
    last = s.due(100_000) - s.due(99_000)
    assert last / first == pytest.approx(0.2, rel=0.05)


def test_schedule_halves_its_rate_by_75k_steps_however_long_the_run() -> None:
    # A long run asks as many labels early as a 300k-step run does, not a share of its length.
    short = QuerySchedule(700, 0.25, 300_000)
    long = QuerySchedule(700, 0.25, 1_000_000)
    assert short.t_half == long.t_half == 75_000
    assert QuerySchedule(700, 0.25, 100_000).t_half == 25_000  # short runs: a quarter, as before
    assert long.due(100_000) > QuerySchedule(700, 0.25, 1_000_000, max_half_rate_steps=10**9).due(
        100_000
    )
    assert QuerySchedule(700, 0.25, 1_000_000, half_rate_steps=250_000).t_half == 250_000


def test_a_run_ending_early_spreads_its_labels_over_the_steps_it_will_take() -> None:
    """--max-minutes: the schedule of a run of the horizon's length, every label due there."""
    long, short = QuerySchedule(200, 0.25, 1_000_000), QuerySchedule(200, 0.25, 120_000)
    for step in (0, 1_000, 30_000, 60_000, 119_999):
        assert long.due(step, horizon=120_000) == short.due(step)
    assert long.due(120_000, horizon=120_000) == 200 > long.due(120_000)
    assert long.due(30_000, horizon=2_000_000) == long.due(30_000)  # never past its own end


@pytest.mark.parametrize(
    "total, fraction, expected_start",
    [(0, 0.25, 0), (10, 1.0, 10), (10, 0.0, 0), (3, 0.5, 2)],
)
def test_schedule_edges(total, fraction, expected_start):
    s = QuerySchedule(total, fraction, 1000)
    assert s.due(0) == expected_start
    assert s.due(1000) == total
    assert all(expected_start <= s.due(t) <= total for t in range(0, 1001, 50))
