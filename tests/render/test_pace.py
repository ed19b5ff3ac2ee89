"""Render ahead in proportion to the labeller's pace and the render time (issue 34, finding 5):
a fast labeller on a loaded machine gets more pairs ready than ``--video.ready-ahead``; an idle
one, or one whose pace is not measured yet, gets the floor."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from rlhf.config import ConfigError, VideoConfig
from rlhf.core.types import Answer, Pair
from rlhf.render.pace import RenderPace, answer_rate, ready_target
from rlhf.render.worker import render_round
from rlhf.store import VIDEO_PENDING, LabelStore
from tests.support.labelling import mark_ready
from tests.support.segments import random_segment


def test_target_rises_with_answer_rate_and_render_time() -> None:
    slow_labeller = ready_target(6, 40, answers_per_s=0.2, render_s=1.0, processes=2)
    fast_labeller = ready_target(6, 40, answers_per_s=2.5, render_s=1.0, processes=2)
    fast_on_loaded_cores = ready_target(6, 40, answers_per_s=2.5, render_s=3.0, processes=2)
    assert slow_labeller == 6  # 0.2 * 3 s + 2 renders: the floor is more
    assert fast_labeller == 10  # 2.5 * 3 s (more than 1.0 * 2) + 2
    assert fast_on_loaded_cores == 17  # 2.5 * 3.0 * 2 + 2
    assert ready_target(6, 12, answers_per_s=2.5, render_s=3.0, processes=2) == 12  # the ceiling
    assert ready_target(6, 3, answers_per_s=9.0, render_s=9.0, processes=2) == 6  # never < floor


@pytest.mark.parametrize("answers_per_s, render_s", [(0.0, 2.0), (3.0, None)])
def test_target_is_the_floor_until_both_are_measured(answers_per_s, render_s) -> None:
    assert ready_target(6, 40, answers_per_s, render_s, processes=2) == 6


def test_answer_rate_decays_while_no_one_answers() -> None:
    times = [100.0 + 0.5 * i for i in range(10)]  # 10 answers, one every 0.5 s
    assert answer_rate(times, now=105.0) == pytest.approx(2.0)
    assert answer_rate(times, now=100.0 + 600) < 0.02  # ten minutes away: idle
    assert answer_rate(times[:1], now=105.0) == 0.0  # one answer is no pace


def test_render_time_is_a_running_estimate() -> None:
    pace = RenderPace(floor=6, ceiling=40, processes=2)
    pace.observe(1.0)
    assert pace.render_s == 1.0
    for _ in range(20):
        pace.observe(3.0)  # the cores got busy
    assert pace.render_s == pytest.approx(3.0, abs=0.01)


def _store(tmp_path: Path, n: int) -> tuple[LabelStore, list[int]]:
    store = LabelStore(tmp_path / "labels.sqlite")
    rng = np.random.default_rng(0)
    ids = store.add_pairs([Pair(random_segment(rng), random_segment(rng)) for _ in range(n)])
    return store, ids


def test_answer_times_are_peoples_answers_newest_first(tmp_path: Path) -> None:
    store, ids = _store(tmp_path, 5)
    mark_ready(store, ids)
    store.add_label(ids[0], Answer.LEFT, source="synthetic")  # a teacher's: not a pace
    for pair_id in ids[1:]:
        store.add_label(pair_id, Answer.RIGHT)
    [query] = store.add_rating_queries([random_segment(np.random.default_rng(1))])
    mark_ready(store, [query])
    store.add_rating(query, 2, levels=5)
    times = store.answer_times(10)
    assert len(times) == 5 and times == sorted(times, reverse=True)
    assert len(store.answer_times(3)) == 3


def _claimed(store: LabelStore, tmp_path: Path, pace: RenderPace) -> int:
    """Pairs one round claims (returned to pending at once: nothing is rendered)."""
    cfg = VideoConfig(ready_ahead=4, ready_ahead_max=30)
    claimed = render_round(store, tmp_path, cfg, {}, should_stop=lambda: True, pace=pace)
    assert store.counts().pending_video == 60 - 10  # all back in the queue
    return claimed


def test_a_fast_labeller_gets_more_pairs_ahead_an_idle_one_the_floor(tmp_path: Path) -> None:
    store, ids = _store(tmp_path, 60)
    mark_ready(store, ids[:10])
    for pair_id in ids[:10]:  # ten answers in a moment: a very fast labeller
        store.add_label(pair_id, Answer.LEFT)
    pace = RenderPace(floor=4, ceiling=30, processes=2)
    assert _claimed(store, tmp_path, pace) == 4  # no render measured yet: the floor
    pace.observe(1.5)
    assert _claimed(store, tmp_path, pace) == 30  # the ceiling
    with sqlite3.connect(store.path) as con:  # the same answers, an hour ago
        con.execute("UPDATE labels SET created_at = created_at - 3600")
    assert _claimed(store, tmp_path, pace) == 4
    assert store.get_pair_record(ids[10]).video_status == VIDEO_PENDING


def test_a_ceiling_below_one_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"--video\.ready-ahead-max must be >= 1"):
        VideoConfig(ready_ahead_max=0).validate()
