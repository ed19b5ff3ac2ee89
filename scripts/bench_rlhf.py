"""Benchmark: RLHF with synthetic oracle labels vs PPO on the true reward, same seeds, one invocation.

For each seed, trains HalfCheetah-v5 twice: PPO on the env reward (the upper baseline) and RLHF
with 700 oracle labels (``--feedback synthetic``: the learned reward only, never the env's).
Runs go to a pool of worker processes (one torch thread each, ``--jobs`` at a time). Prints a
table (final true return mean +- std, steps/s, wall time) and the ratios, writes a learning-curve
plot to ``readme_images/rlhf_vs_ppo.png``, and prints the headline figures as the last line.

    .venv/bin/python scripts/bench_rlhf.py                 # 500k steps, seeds 1 2 3
    .venv/bin/python scripts/bench_rlhf.py --steps 1000000
    .venv/bin/python scripts/bench_rlhf.py --quick         # under a minute, smoke check

Needs the bench extra (matplotlib): scripts/setup.sh bench
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _bench_pool import run_jobs

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Result:
    mode: str
    seed: int
    steps: int
    seconds: float
    final_return: float
    labels: int
    val_accuracy: float | None
    curve: list[tuple[int, float]]

    @property
    def sps(self) -> float:
        return self.steps / self.seconds


def _curve(tb_dir: Path) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars("charts/episodic_return")]


def _job(args: tuple[str, int, int, str, int]) -> Result:
    mode, seed, steps, env_id, labels = args
    import torch

    from rlhf.config import Config, QueryConfig
    from rlhf.runner import run

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as runs:
        cfg = Config(
            env_id=env_id,
            total_timesteps=steps,
            seed=seed,
            reward="env" if mode == "ppo" else "learned",
            feedback="synthetic",
            runs_dir=runs,
            run_name="bench",
            progress=False,
            device="cpu",
            query=QueryConfig(total_labels=labels),
        )
        s = run(cfg)
        curve = _curve(Path(runs) / "bench" / "tb")
    return Result(
        mode,
        seed,
        s.env_steps,
        s.wall_seconds,
        s.final_true_return or float("nan"),
        s.labels_used,
        s.reward_val_accuracy,
        curve,
    )


def _plot(results: list[Result], steps: int, path: Path, env_id: str, labels: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(0, steps, 41)[1:]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for mode, name, color in (
        ("ppo", "PPO, true reward", "tab:gray"),
        ("rlhf", f"RLHF, {labels} oracle labels", "tab:blue"),
    ):
        curves = []
        for r in (r for r in results if r.mode == mode and r.curve):
            xs, ys = np.array(r.curve).T
            # smooth each seed's episodes over a window of ~5% of the run, then sample the grid
            curves.append(
                [
                    ys[(xs > g - 0.05 * steps) & (xs <= g)].mean()
                    if ((xs > g - 0.05 * steps) & (xs <= g)).any()
                    else np.nan
                    for g in grid
                ]
            )
        if not curves:
            continue
        arr = np.array(curves)
        mean, std = np.nanmean(arr, 0), np.nanstd(arr, 0)
        ax.plot(grid, mean, color=color, label=name)
        ax.fill_between(grid, mean - std, mean + std, color=color, alpha=0.2)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("true episodic return")
    ax.set_title(f"{env_id}: mean ± std over {len({r.seed for r in results})} seeds")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def _stats(results: list[Result], mode: str) -> dict[str, float]:
    mine = [r for r in results if r.mode == mode]
    rets = [r.final_return for r in mine]
    return {
        "return": statistics.mean(rets),
        "std": statistics.stdev(rets) if len(rets) > 1 else 0.0,
        "sps": statistics.median(r.sps for r in mine),
        "seconds": statistics.median(r.seconds for r in mine),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=500_000, help="env steps per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--labels", type=int, default=700, help="oracle labels per RLHF run")
    parser.add_argument("--env-id", default="HalfCheetah-v5")
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--plot", type=Path, default=ROOT / "readme_images" / "rlhf_vs_ppo.png")
    parser.add_argument("--quick", action="store_true", help="20k steps, 1 seed, 100 labels")
    args = parser.parse_args()
    steps, seeds, labels = (
        (20_480, [1], 100) if args.quick else (args.steps, args.seeds, args.labels)
    )
    jobs = [(mode, seed, steps, args.env_id, labels) for seed in seeds for mode in ("rlhf", "ppo")]
    results = run_jobs(_job, jobs, args.jobs, label="mode")
    print(
        f"{'mode':5} {'seed':>4} {'steps':>8} {'seconds':>8} {'steps/s':>8} {'return':>8} {'labels':>6} {'val acc':>7}"
    )
    for r in results:
        acc = f"{r.val_accuracy:.2f}" if r.val_accuracy is not None else "-"
        print(
            f"{r.mode:5} {r.seed:>4} {r.steps:>8} {r.seconds:>8.1f} {r.sps:>8.0f} {r.final_return:>8.0f} {r.labels:>6} {acc:>7}"
        )
    ppo, rlhf = _stats(results, "ppo"), _stats(results, "rlhf")
    ratio_ret = rlhf["return"] / ppo["return"] if ppo["return"] > 0 else float("nan")
    ratio_sps = rlhf["sps"] / ppo["sps"]
    print(
        f"\nfinal true return: RLHF {rlhf['return']:.0f} +- {rlhf['std']:.0f}, PPO {ppo['return']:.0f} +- {ppo['std']:.0f}, ratio {ratio_ret:.2f}"
    )
    print(f"median steps/s: RLHF {rlhf['sps']:.0f}, PPO {ppo['sps']:.0f}, ratio {ratio_sps:.2f}")
    if not args.quick:
        _plot(results, steps, args.plot, args.env_id, labels)
        print(f"plot: {args.plot}")
    (Path(tempfile.gettempdir()) / "bench_rlhf_results.json").write_text(
        json.dumps([r.__dict__ for r in results])
    )
    print(
        f"ratio_return={ratio_ret:.2f} ratio_sps={ratio_sps:.2f} rlhf_return={rlhf['return']:.0f} "
        f"ppo_return={ppo['return']:.0f} rlhf_sps={rlhf['sps']:.0f} ppo_sps={ppo['sps']:.0f} "
        f"steps={steps} seeds={len(seeds)} labels={labels}"
    )


if __name__ == "__main__":
    main()
