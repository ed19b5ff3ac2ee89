"""A sweep's statistics, tables and progress line, on made-up results (no Ray, no training)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from rlhf.sweep.plot import plot_curves
from rlhf.sweep.progress import ProgressView, duration
from rlhf.sweep.results import cell_table, format_table, group_table, write_groups_csv
from rlhf.sweep.stats import bootstrap_ci, group_stats, iqm
from rlhf.sweep.worker import CellResult


def test_iqm_drops_a_quarter_of_runs_at_each_end_like_rliable() -> None:
    assert iqm([1, 2, 3, 4, 5, 6, 7, 1000]) == pytest.approx(4.5)  # keeps 3..6
    assert iqm([5.0, 1.0, 3.0]) == pytest.approx(3.0)  # fewer than 4 runs: the mean
    x = np.arange(20.0)
    assert iqm(x) == pytest.approx(x[5:15].mean())


def test_bootstrap_interval_is_reproducible_and_narrows_with_agreeing_seeds() -> None:
    rng = np.random.default_rng(1)
    spread, tight = rng.normal(0, 10, 8), rng.normal(0, 1, 8)
    lo, hi = bootstrap_ci(spread)
    assert lo <= iqm(spread) <= hi and lo < hi
    assert bootstrap_ci(spread) == (lo, hi)  # fixed seed: the same table twice
    t_lo, t_hi = bootstrap_ci(tight)
    assert t_hi - t_lo < (hi - lo) / 3
    assert bootstrap_ci([2.0]) == (2.0, 2.0)


def test_group_stats_skip_missing_returns() -> None:
    s = group_stats([1.0, None, 3.0, float("nan")])  # type: ignore[list-item]
    assert s is not None and s.n == 2 and s.mean == 2.0 and s.std == pytest.approx(np.sqrt(2))
    assert group_stats([]) is None


def _result(labels: int, seed: int, ret: float | None, **kw) -> CellResult:
    fields = dict(
        status="finished",
        final_true_return=ret,
        labels_used=labels,
        reward_val_accuracy=0.9,
        sps=1000.0 + seed,
        wall_seconds=10.0,
        env_steps=2048,
        sessions=1,
        curve=((256, -60.0 + seed), (512, -50.0 + seed)),
    )
    return CellResult(
        name=f"labels={labels}__seed={seed}",
        params=(("query.total-labels", labels), ("seed", seed)),
        **(fields | kw),  # type: ignore[arg-type]
    )


RESULTS = [
    _result(20, 1, -50.0),
    _result(20, 2, -40.0),
    _result(40, 1, -30.0),
    _result(40, 2, None, status="crashed", error="RuntimeError: boom", curve=()),
]


def test_tables_show_every_cell_and_group_with_failures_counted(tmp_path: Path) -> None:
    header, rows = cell_table(RESULTS)
    assert header[:3] == ["query.total-labels", "seed", "status"] and header[-1] == "error"
    assert rows[3][:3] == ["40", "2", "crashed"] and rows[3][-1] == "RuntimeError: boom"
    text = format_table(header, rows)
    assert len(text.splitlines()) == 5 and "-50.0" in text
    header, rows = group_table(RESULTS)
    assert header[:2] == ["query.total-labels", "n"]
    assert rows[0][:3] == ["20", "2/2", "-45.0 ± 7.1"]
    assert rows[0][3].startswith("-45.0 [-50.0, -40.0]")
    assert rows[1][:3] == ["40", "1/2", "-30.0 ± 0.0"]  # the crashed seed is not averaged in
    write_groups_csv(tmp_path / "groups.csv", RESULTS)
    table = list(csv.DictReader((tmp_path / "groups.csv").open()))
    assert [row["finished"] for row in table] == ["2", "1"]
    assert float(table[0]["return_iqm"]) == pytest.approx(-45.0)


def test_the_plot_draws_each_group_or_says_why_not(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    assert plot_curves(RESULTS, tmp_path / "c.png") == f"plot: {tmp_path / 'c.png'}"
    assert (tmp_path / "c.png").stat().st_size > 10_000
    assert "no cell has finished an episode" in plot_curves(RESULTS[3:], tmp_path / "d.png")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_line_counts_cells_and_estimates_the_time_left() -> None:
    clock, out = _Clock(), io.StringIO()
    view = ProgressView(total=6, skipped=1, stream=out, clock=clock)
    view.update(running=2)
    assert view.line() == (
        "sweep: 1/6 done (1 already), 2 running, 0 failed, 3 waiting | 0s elapsed, ETA ?"
    )
    clock.now = 60.0
    view.finished("a: return 1", ok=True)
    view.finished("b: RuntimeError: boom", ok=False)
    view.update(running=2)
    # Two cells in 60 s, three left: 90 s at this pace.
    assert view.line().endswith("2/6 done (1 already), 2 running, 1 failed, 1 waiting"
                                " | 1m00s elapsed, ETA 1m30s")  # fmt: skip
    view.update(running=2)  # no terminal: an unchanged status is not written again
    lines = out.getvalue().splitlines()
    assert lines == [
        "sweep: 1/6 done (1 already), 2 running, 0 failed, 3 waiting | 0s elapsed, ETA ?",
        "done: a: return 1",
        "FAILED: b: RuntimeError: boom",
        "sweep: 2/6 done (1 already), 2 running, 1 failed, 1 waiting | 1m00s elapsed, ETA 1m30s",
    ]
    assert duration(3725) == "1h02m" and duration(42.4) == "42s"
