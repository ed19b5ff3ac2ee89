"""The report of bench_pebble.py: one table row per (task, arm), its verdict against the
off-policy issue's bar, the headline figures, and the learning curves. Works on the jobs' Results
(_bench_pebble_jobs.py); never imports the script.
"""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import numpy as np
from _bench_pebble_jobs import ARMS, Result, Task

from rlhf.sweep.spec import key_name

PASS_RATIO = 0.9
"""PEBBLE's final return over SAC's on the true reward that the off-policy issue asks for (a
bar, not a behaviour: "target" is --target's word here)."""


def plot(results: list[Result], tasks: list[Task], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), dpi=110, squeeze=False)
    for ax, task in zip(axes.flat, tasks, strict=True):
        edges = np.linspace(0, task.steps, 21)
        for arm, color in zip(ARMS, ("tab:gray", "tab:red", "tab:blue"), strict=True):
            mine = [r for r in results if task.has(r.job) and r.job.arm == arm]
            if not mine:
                continue
            # Mean return of the episodes that end in each twentieth of the run, per seed.
            arr = np.array([_binned(r.curve, edges) for r in mine])
            mean, std = np.nanmean(arr, 0), np.nanstd(arr, 0)
            ax.plot(edges[1:], mean, color=color, label=_arm_label(arm, task.labels))
            ax.fill_between(edges[1:], mean - std, mean + std, color=color, alpha=0.2)
        seeds = len({r.job.seed for r in results if task.has(r.job)})
        ax.set(
            title=f"{task.name} ({seeds} seed{'s' if seeds != 1 else ''})",
            xlabel="environment steps",
        )
        ax.set(ylabel="true return")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("mean ± std over seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def _arm_label(arm: str, labels: int) -> str:
    return {"sac": "SAC, true reward", "pebble": f"PEBBLE, {labels} labels"}.get(
        arm, f"PPO-RLHF, {labels} labels"
    )


def _binned(curve: list[tuple[int, float]], edges: np.ndarray) -> list[float]:
    xs = np.array([step for step, _ in curve])
    ys = np.array([value for _, value in curve])
    inside = [(xs > lo) & (xs <= hi) for lo, hi in itertools.pairwise(edges)]
    return [float(ys[m].mean()) if m.any() else np.nan for m in inside]


def table(tasks: list[Task], results: list[Result]) -> dict[str, float]:
    """Print one row per (task, arm); return the headline figures."""
    print("| task | arm | per seed | mean +- std | / SAC true reward | target | steps/s | CPU |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    head: dict[str, float] = {}
    for task in tasks:
        means: dict[str, float] = {}
        for arm in task.arms:
            mine = sorted(
                (r for r in results if task.has(r.job) and r.job.arm == arm),
                key=lambda r: r.job.seed,
            )
            if not mine:
                continue
            rets = [r.final_return for r in mine]
            means[arm] = statistics.fmean(rets)
            std = statistics.pstdev(rets)
            sps = statistics.median(r.sps for r in mine)
            sac = means.get("sac")
            ratio = means[arm] / sac if sac else float("nan")
            shown_ratio = f"{ratio:.2f}" if sac else "-"  # no SAC run to divide by
            verdict = ""
            if arm == "pebble":
                verdict = "no SAC run" if not sac else "met" if ratio >= PASS_RATIO else "not met"
            elif arm == "ppo" and "pebble" in means:
                verdict = "pebble above" if means["pebble"] > means[arm] else "pebble below"
            seeds = ", ".join(f"{v:.0f}" for v in rets)
            name = f"{task.name}, {task.steps // 1000}k, {task.labels} labels"
            shown = " ".join(f"{key_name(k)}={v}" for k, v in mine[0].job.settings)
            cpus = "; ".join(dict.fromkeys(r.cpu or "not recorded" for r in mine))
            print(f"| {name} | {arm}{f' ({shown})' if shown else ''} | {seeds} | {means[arm]:.0f} +- {std:.0f} | {shown_ratio} |"
                  f" {verdict} | {sps:.0f} | {cpus} |")  # fmt: skip
        short = task.env_id.split("/")[-1].split("-v")[0].replace("-", "_").lower()
        short += f"_{task.target}" if task.target else ""
        if means.get("sac") and "pebble" in means:
            head[f"ratio_pebble_over_sac_{short}"] = means["pebble"] / means["sac"]
        if "ppo" in means and "pebble" in means:
            head[f"pebble_minus_ppo_{short}"] = means["pebble"] - means["ppo"]
    return head
