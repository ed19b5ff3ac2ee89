"""The report half of bench_rlhf.py: its rows, table, headline line and learning-curve plot.

A *task* is an env and, with ``--target``, the target behaviour measured on it; a *teacher* is one
combination of the teacher flags (labels, mistake rate, ...). One row per (task, teacher, feedback
kind): the RLHF runs of every seed beside the true-reward PPO runs of the same task and seeds (one
PPO run serves every teacher). Works on the benchmark's jobs and results by their fields only, so
it never imports the script.
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

KINDS = {"rlhf": "labels", "ratings": "ratings", "both": "pairs + ratings"}
"""Learned mode -> what its teacher gives, in a row's teacher text."""
SHORT = {
    "teacher.beta": ("beta", "b", "beta"),
    "teacher.gamma": ("myopia", "g", "myopia"),
    "teacher.mistake": ("wrong", "m", "mistake"),
    "teacher.skip_threshold": ("skip", "s", "skip_threshold"),
    "teacher.equal_threshold": ("equal", "e", "equal_threshold"),
}
"""Teacher setting -> its word in a row's teacher text, its letter in a headline ratio's key and
its key of its own in the headline (one teacher)."""


@dataclass(frozen=True)
class Task:
    env_id: str
    target: str | None = None

    @property
    def text(self) -> str:
        return self.env_id + (f" [{self.target}]" if self.target else "")

    @property
    def tag(self) -> str:
        """Its part of a headline key: ``Hopper``, ``Hopper_backflip``."""
        return self.env_id.split("-")[0] + (f"_{self.target}" if self.target else "")


@dataclass(frozen=True)
class Teacher:
    labels: int
    settings: tuple[tuple[str, Any], ...] = ()
    """teacher.* settings that differ from the perfect oracle's, as (config path, value)."""

    def text(self, mode: str = "rlhf") -> str:
        """``200 labels, 10% wrong, beta 1, myopia 0.99``."""
        parts = [f"{self.labels} {KINDS.get(mode, mode)}"]
        for path, value in self.settings:
            word = SHORT[path][0]
            parts.append(f"{value * 100:g}% wrong" if word == "wrong" else f"{word} {value:g}")
        return ", ".join(parts)

    @property
    def tag(self) -> str:
        """Its part of a headline key: ``200l``, ``200l_m0.1_b1``."""
        return "_".join([f"{self.labels}l"] + [f"{SHORT[p][1]}{v:g}" for p, v in self.settings])


@dataclass(frozen=True)
class Row:
    task: Task
    teacher: Teacher
    mode: str
    ppo: tuple[float, ...]
    """PPO's final return on each seed (the same seeds as ``rlhf``, in order)."""
    rlhf: tuple[float, ...]
    labels: tuple[int, ...]
    """Labels each RLHF run fitted its reward on (what it actually used)."""
    seconds: tuple[float, ...]
    """Each RLHF run's wall time."""
    val_acc: tuple[float, ...]
    per_step: tuple[float, float] | None = None
    """PPO's and RLHF's final return per step of the same episodes, each the mean over seeds
    (None when a result saved before episode lengths were kept has none)."""

    @property
    def ratio(self) -> float:
        """RLHF's mean over PPO's (NaN where PPO ends at or below zero: no ratio)."""
        ppo = statistics.mean(self.ppo)
        return statistics.mean(self.rlhf) / ppo if ppo > 0 else float("nan")

    @property
    def min_ratio(self) -> float:
        """The lowest of the seeds' own ratios (seeds where PPO ends at or below zero left out)."""
        ratios = [r / p for r, p in zip(self.rlhf, self.ppo, strict=True) if p > 0]
        return min(ratios, default=float("nan"))


def make_rows(pairs: Sequence[tuple[Any, Any]]) -> list[Row]:
    """One row per (task, teacher, learned mode), in the order of the jobs; ``pairs`` are (job,
    its result), each PPO job once (its key has no teacher) and every learned job."""
    ppo = {(Task(j.env_id, j.target), j.seed): r for j, r in pairs if j.mode == "ppo"}
    cells: dict[tuple[Task, Teacher, str], list[tuple[Any, Any]]] = {}
    for job, result in pairs:
        if job.mode != "ppo":
            cell = (Task(job.env_id, job.target), Teacher(job.labels, job.teacher), job.mode)
            cells.setdefault(cell, []).append((job, result))
    rows = []
    for (task, teacher, mode), mine in cells.items():
        # a PPO run not there yet (bench_rlhf --arms rlhf): no baseline, no ratio (nan)
        baseline = [ppo.get((task, j.seed), _NOT_RUN) for j, _ in mine]
        rows.append(
            Row(
                task,
                teacher,
                mode,
                tuple(r.final_return for r in baseline),
                tuple(r.final_return for _, r in mine),
                tuple(r.labels for _, r in mine),
                tuple(r.seconds for _, r in mine),
                tuple(r.val_accuracy for _, r in mine if r.val_accuracy is not None),
                _per_step(baseline, [r for _, r in mine]),
            )
        )
    return rows


@dataclass(frozen=True)
class _NotRun:
    """The stand-in for a PPO result not there: no return, no length."""

    final_return: float = float("nan")
    final_length: float | None = None


_NOT_RUN = _NotRun()


def _per_step(ppo: list[Any], rlhf: list[Any]) -> tuple[float, float] | None:
    """Each arm's mean over seeds of final return / final episode length; None when a result
    has no length."""
    arms = []
    for results in (ppo, rlhf):
        lengths = [getattr(r, "final_length", None) for r in results]
        if any(n is None or n <= 0 for n in lengths):
            return None
        arms.append(
            statistics.mean(r.final_return / n for r, n in zip(results, lengths, strict=True))
        )
    return arms[0], arms[1]


def _spread(values: Sequence[float], fmt: str) -> str:
    """``median (min-max)``, or the one value when they are all the same."""
    low, high = min(values), max(values)
    mid = format(statistics.median(values), fmt)
    return mid if low == high else f"{mid} ({low:{fmt}}-{high:{fmt}})"


def _mean_std(values: Sequence[float]) -> str:
    if any(np.isnan(values)):
        return "-"  # a PPO run not there yet
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):>7.0f} ± {std:<5.0f}"


def print_table(rows: list[Row]) -> None:
    """One row per (task, teacher): final return of PPO (on the same reward) and of RLHF, mean ±
    std over seeds; the ratio of the means and the lowest seed's; RLHF's held-out accuracy
    (ratings runs have no held-out pairs: nan), the labels it used and its wall time; each
    arm's return per step of its final episodes (``-`` for results saved without lengths)."""
    tw = max([26] + [len(r.teacher.text(r.mode)) for r in rows])
    kw = max([24] + [len(r.task.text) for r in rows])
    print(
        f"\n{'task':{kw}} {'teacher':{tw}} {'PPO (same reward)':>17} {'RLHF':>15}"
        f" {'ratio':>6} {'min':>6} {'val acc':>7} {'labels used':>14}  {'RLHF wall s':<15}"
        "  per step, PPO / RLHF"
    )
    for row in rows:
        acc = statistics.mean(row.val_acc) if row.val_acc else float("nan")
        print(
            f"{row.task.text:{kw}} {row.teacher.text(row.mode):{tw}} {_mean_std(row.ppo):>17}"
            f" {_mean_std(row.rlhf):>15} {row.ratio:>6.2f} {row.min_ratio:>6.2f} {acc:>7.2f}"
            f" {_spread(row.labels, '.0f'):>14}  {_spread(row.seconds, '.0f'):<15}"
            f"  {'-' if row.per_step is None else '{:.2f} / {:.2f}'.format(*row.per_step)}"
        )


def headline(rows: list[Row], steps: int, seeds: list[int], seed_set: str) -> str:
    """The last line: a ratio per row (``ratio_Hopper``; ``ratio_ratings_Hopper`` for ratings;
    with more than one teacher each key ends with its teacher's tag, ``ratio_Hopper_200l_m0.1``),
    the lowest pairs ratio and what was run."""
    teachers = list(dict.fromkeys(r.teacher for r in rows))
    figures = []
    for row in rows:
        key = "ratio" + ("" if row.mode == "rlhf" else f"_{row.mode}") + f"_{row.task.tag}"
        key += f"_{row.teacher.tag}" if len(teachers) > 1 else ""
        figures.append(f"{key}={row.ratio:.2f}")
    # A task where PPO itself ends below zero has no ratio (nan); it is left out of the minimum.
    finite = [r.ratio for r in rows if r.mode == "rlhf" and np.isfinite(r.ratio)]
    figures.append(f"ratio_min={min(finite, default=float('nan')):.2f}")
    figures += [f"steps={steps}", f"seeds={len(seeds)}", f"seed_set={seed_set}"]
    if len(teachers) > 1:
        return " ".join([*figures, f"teachers={len(teachers)}"])
    (teacher,) = teachers
    figures.append(f"labels={teacher.labels}")
    return " ".join(figures + [f"{SHORT[p][2]}={v:g}" for p, v in teacher.settings])


def _smoothed(curve: list[tuple[int, float]], grid: np.ndarray, window: float) -> list[float]:
    if not curve:
        return [np.nan] * len(grid)
    xs, ys = np.array(curve).T
    out = []
    for g in grid:
        inside = (xs > g - window) & (xs <= g)
        out.append(ys[inside].mean() if inside.any() else np.nan)
    return out


def _curves(ax: Any, lines: list[tuple[str, list[Any]]], grid: np.ndarray, steps: int) -> None:
    """One mean ± std curve per (name, results) on ``ax``, PPO first in grey."""
    colors = iter(["tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"] * 9)
    for name, results in lines:
        color = next(colors)  # PPO stays grey when its runs are not there yet (--arms)
        if not results:
            continue
        arr = np.array([_smoothed(r.curve, grid, 0.05 * steps) for r in results])
        with warnings.catch_warnings():  # no episode has ended yet at the first points: nan
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, std = np.nanmean(arr, 0), np.nanstd(arr, 0)
        ok = np.isfinite(mean)  # joined across points no episode ended near
        ax.plot(grid[ok], mean[ok], color=color, label=name)
        ax.fill_between(grid[ok], (mean - std)[ok], (mean + std)[ok], color=color, alpha=0.2)


def plot(pairs: Sequence[tuple[Any, Any]], rows: list[Row], steps: int, path: Path) -> None:
    """One panel per task: PPO on the same reward and one curve per teacher (mean ± std)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r.task for r in rows))
    cols = min(3, len(tasks))
    nrows = -(-len(tasks) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), dpi=110, squeeze=False)
    grid = np.linspace(0, steps, 41)[1:]
    for ax, task in zip(axes.flat, tasks, strict=False):
        mine = [(j, r) for j, r in pairs if Task(j.env_id, j.target) == task]
        lines = [("PPO, same reward", [r for j, r in mine if j.mode == "ppo"])]
        for row in (row for row in rows if row.task == task):
            teacher = (row.teacher.labels, row.teacher.settings, row.mode)
            learned = [r for j, r in mine if (j.labels, j.teacher, j.mode) == teacher]
            lines.append((f"RLHF, {row.teacher.text(row.mode)}", learned))
        _curves(ax, lines, grid, steps)
        seeds = len({j.seed for j, _ in mine})
        ax.set_title(f"{task.text} ({seeds} seed{'s' if seeds > 1 else ''})")
        ax.set_xlabel("environment steps")
        ax.set_ylabel("true episodic return")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=7)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.axis("off")
    fig.suptitle("mean ± std over seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
