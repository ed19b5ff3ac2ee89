"""The B-Pref synthetic teacher: oracle, measured noise rates, myopia, adaptive thresholds."""

from __future__ import annotations

import numpy as np
import pytest

from rlhf.config import TeacherConfig
from rlhf.core.types import Answer, Pair, Segment
from rlhf.feedback.teachers import SyntheticTeacher, perceived_return

N = 5000
"""Pairs per rate measurement: the standard error of a rate is at most 0.7 points."""
TOL = 0.025


def _seg(rewards) -> Segment:
    rewards = np.asarray(rewards, dtype=np.float32).reshape(-1)
    t = len(rewards)
    empty = np.zeros((t, 0))
    return Segment(
        np.zeros((t, 2), np.float32), np.zeros((t, 1), np.float32), rewards, empty, empty, "X"
    )


def _pairs(left_returns, right_returns) -> list[Pair]:
    return [Pair(_seg([a]), _seg([b])) for a, b in zip(left_returns, right_returns, strict=True)]


def _uniform_pairs(
    rng: np.random.Generator, n: int = N
) -> tuple[list[Pair], np.ndarray, np.ndarray]:
    left, right = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    left[:2], right[:2] = (0.0, 1.0), (1.0, 0.0)  # pin the seen range to exactly [0, 1]
    return _pairs(left, right), _as_stored(left), _as_stored(right)


def _as_stored(returns: np.ndarray) -> np.ndarray:
    """Returns as the teacher sees them: rounded to the segments' float32, summed in float64."""
    return returns.astype(np.float32).astype(np.float64)


def _rate(answers: list[Answer], which: Answer) -> float:
    return sum(a == which for a in answers) / len(answers)


def test_oracle_prefers_the_higher_return(rng):
    left, right = _as_stored(rng.normal(size=2000)), _as_stored(rng.normal(size=2000))
    right[:50] = left[:50]  # exact ties
    answers = SyntheticTeacher(TeacherConfig(), rng).label(_pairs(left, right))
    assert all(isinstance(a, Answer) for a in answers)
    expected = np.where(
        left > right, Answer.LEFT, np.where(left < right, Answer.RIGHT, Answer.EQUAL)
    )
    assert answers == list(expected)
    assert _rate(answers, Answer.EQUAL) == 50 / 2000


def test_oracle_uses_the_whole_segment_return(rng):
    # Same first step, the difference is in the last: the teacher must sum all steps.
    pair = Pair(_seg([5.0, 0.0, 1.0]), _seg([5.0, 0.0, 2.0]))
    assert SyntheticTeacher(TeacherConfig(), rng).label([pair]) == [Answer.RIGHT]
    assert SyntheticTeacher(TeacherConfig(), rng).label([]) == []


def test_mistake_rate(rng):
    pairs, left, right = _uniform_pairs(rng)
    answers = SyntheticTeacher(TeacherConfig(mistake=0.2), rng).label(pairs)
    oracle = np.where(left > right, Answer.LEFT, Answer.RIGHT)
    wrong = np.mean([a != o for a, o in zip(answers, oracle, strict=True)])
    assert wrong == pytest.approx(0.2, abs=TOL)
    assert set(answers) == {Answer.LEFT, Answer.RIGHT}


def test_skip_rate_and_rule(rng):
    pairs, left, right = _uniform_pairs(rng)
    answers = SyntheticTeacher(TeacherConfig(skip_threshold=0.5), rng).label(pairs)
    # Both returns below lo + 0.5 * (hi - lo) = 0.5: probability 0.5**2 for uniform returns.
    assert _rate(answers, Answer.SKIP) == pytest.approx(0.25, abs=TOL)
    skipped = np.array([a == Answer.SKIP for a in answers])
    np.testing.assert_array_equal(skipped, np.maximum(left, right) < 0.5)


def test_equal_rate_and_rule(rng):
    pairs, left, right = _uniform_pairs(rng)
    answers = SyntheticTeacher(TeacherConfig(equal_threshold=0.1), rng).label(pairs)
    # |U1 - U2| < 0.1 for independent uniforms: 1 - 0.9**2 = 0.19.
    assert _rate(answers, Answer.EQUAL) == pytest.approx(0.19, abs=TOL)
    equal = np.array([a == Answer.EQUAL for a in answers])
    np.testing.assert_array_equal(equal, np.abs(left - right) < 0.1)
    decided = [
        (a, lv > rv) for a, lv, rv in zip(answers, left, right, strict=True) if a != Answer.EQUAL
    ]
    assert all((a == Answer.LEFT) == better for a, better in decided)


def test_skip_before_equal_and_mistakes_only_flip_decided_answers(rng):
    pairs, left, right = _uniform_pairs(rng)
    cfg = TeacherConfig(mistake=1.0, skip_threshold=0.3, equal_threshold=0.1)
    answers = SyntheticTeacher(cfg, rng).label(pairs)
    skip = np.maximum(left, right) < 0.3
    equal = ~skip & (np.abs(left - right) < 0.1)
    for a, s, e, lv, rv in zip(answers, skip, equal, left, right, strict=True):
        expected = (
            Answer.SKIP if s else Answer.EQUAL if e else Answer.RIGHT if lv > rv else Answer.LEFT
        )
        assert a == expected


@pytest.mark.parametrize("beta, diff", [(1.0, 1.0), (2.0, -0.5), (0.5, 3.0), (0.0, 2.0)])
def test_finite_beta_gives_the_boltzmann_rate(rng, beta, diff):
    base = rng.normal(size=N)
    answers = SyntheticTeacher(TeacherConfig(beta=beta), rng).label(_pairs(base + diff, base))
    assert _rate(answers, Answer.LEFT) == pytest.approx(1 / (1 + np.exp(-beta * diff)), abs=TOL)
    assert _rate(answers, Answer.LEFT) + _rate(answers, Answer.RIGHT) == 1.0


def test_myopia_discounts_early_steps(rng):
    early, late = [10.0, 0, 0, 0, 0], [0, 0, 0, 0, 3.0]
    pair = Pair(_seg(early), _seg(late))
    assert SyntheticTeacher(TeacherConfig(gamma=1.0), rng).label([pair]) == [Answer.LEFT]
    # gamma 0.5: the first step weighs 0.5**4, so 10 counts as 0.625 < 3.
    assert SyntheticTeacher(TeacherConfig(gamma=0.5), rng).label([pair]) == [Answer.RIGHT]
    assert perceived_return(_seg(early), 0.5) == pytest.approx(0.625)
    assert perceived_return(_seg(late), 0.5) == pytest.approx(3.0)


def test_thresholds_follow_the_range_seen_so_far(rng):
    teacher = SyntheticTeacher(TeacherConfig(skip_threshold=0.5), rng)
    first = teacher.label(_pairs([0.0, 0.6, 0.4], [1.0, 0.7, 0.45]))
    assert first == [Answer.RIGHT, Answer.RIGHT, Answer.SKIP]  # range [0, 1]: skip below 0.5
    teacher.label(_pairs([10.0], [0.0]))  # the range widens to [0, 10]
    assert teacher.label(_pairs([0.6], [0.7])) == [Answer.SKIP]  # now below 5


def test_deterministic_per_seed():
    pairs, _, _ = _uniform_pairs(np.random.default_rng(0), 500)
    cfg = TeacherConfig(beta=3.0, mistake=0.1, skip_threshold=0.1, equal_threshold=0.05)

    def answers(seed: int) -> list[Answer]:
        teacher = SyntheticTeacher(cfg, np.random.default_rng(seed))
        return teacher.label(pairs[:200]) + teacher.label(pairs[200:])

    assert answers(1) == answers(1)
    assert answers(1) != answers(2)
