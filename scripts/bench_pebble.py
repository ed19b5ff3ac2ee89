"""Benchmark: PEBBLE (SAC + oracle labels) vs SAC on the true reward vs PPO-RLHF, one invocation.

For each env and seed, at the same env-step budget: SAC on the env's reward (the upper baseline),
PEBBLE with 100 and with 400 oracle labels (``--algo sac --feedback synthetic``: unsupervised
pretraining, then the learned reward only), and PPO-RLHF with 700 oracle labels (``rlhf train``'s
default algorithm). Runs are Ray tasks through :func:`rlhf.sweep.run_jobs` (one CPU and one torch
thread each). "Final" return: the mean true return of the episodes that end in the last 10% of a
run's steps. Prints one row per env and mode (mean +- std over seeds, ratio to true-reward SAC),
and the headline ratios of the first env as the last line.

    .venv/bin/python scripts/bench_pebble.py                    # HalfCheetah + Walker2d, 1M, 3 seeds
    .venv/bin/python scripts/bench_pebble.py --steps 300000 --env-id HalfCheetah-v5 --seeds 1
    .venv/bin/python scripts/bench_pebble.py --quick            # smoke check (figures mean nothing)

``--out DIR`` keeps one JSON file per finished run (its curve included) and skips those runs on
the next invocation, so a grid can be stopped and continued (a run stopped before its end starts
again); ``--plot`` draws the curves.
SAC's hidden layers run in what ``rlhf train`` picks (``--hidden-dtype auto``: bfloat16 where the
CPU multiplies it natively, about twice as fast: scripts/bench_sac.py; else float32); a run's
result names the dtype it used, so results from machines of either kind never mix.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rlhf.agent.precision import choose
from rlhf.sweep import run_jobs
from rlhf.sweep.worker import read_curve

MODES = {"sac": 0, "pebble100": 100, "pebble400": 400, "ppo700": 700}
"""Mode -> oracle labels (0: the env's reward)."""


@dataclass(frozen=True)
class Job:
    env_id: str
    mode: str
    seed: int
    steps: int
    quick: bool
    out: str
    hidden_dtype: str = "float32"

    @property
    def key(self) -> str:
        key = f"{self.env_id}__{self.mode}__{self.seed}__{self.steps}"
        if self.hidden_dtype == "float32" or self.mode == "ppo700":  # PPO has no such setting
            return key
        return f"{key}__{self.hidden_dtype}"


@dataclass(frozen=True)
class Result:
    job: Job
    final_return: float
    sps: float
    curve: list[tuple[int, float]]


def _train(job: Job) -> Result:
    import torch

    from rlhf.config import Config, QueryConfig, SACConfig
    from rlhf.run.runner import run

    torch.set_num_threads(1)
    labels = MODES[job.mode]
    sac = SACConfig(hidden_dtype=job.hidden_dtype)  # type: ignore[arg-type]
    if job.quick:
        sac = SACConfig(learning_starts=600, pretrain_steps=200, hidden_dtype=job.hidden_dtype)  # type: ignore[arg-type]
    name = job.key
    # A run stopped before its result was written starts again from scratch.
    shutil.rmtree(Path(job.out) / name, ignore_errors=True)
    cfg = Config(
        env_id=job.env_id, algo="ppo" if job.mode == "ppo700" else "sac", seed=job.seed,
        total_timesteps=job.steps, reward="learned" if labels else "env", feedback="synthetic",
        runs_dir=job.out, run_name=name, progress=False, sac=sac, device="cpu",
        query=QueryConfig(total_labels=max(labels, 1)),
    )  # fmt: skip
    summary = run(cfg)
    curve = [(int(step), float(value)) for step, value in read_curve(Path(job.out) / name / "tb")]
    late = [value for step, value in curve if step >= 0.9 * job.steps]
    final = float(np.mean(late)) if late else float(summary.final_true_return or float("nan"))
    result = Result(job, final, summary.sps, curve)
    # Saved by the run itself, so a stopped grid keeps every finished run.
    results = Path(job.out) / "results"
    results.mkdir(exist_ok=True)
    tmp = results / f".{job.key}.tmp"
    tmp.write_text(json.dumps(asdict(result)))
    tmp.replace(results / f"{job.key}.json")
    return result


def _load(out: Path) -> dict[str, Result]:
    done: dict[str, Result] = {}
    for path in sorted((out / "results").glob("*.json")):
        data = json.loads(path.read_text())
        result = Result(**{**data, "job": Job(**data["job"])})
        done[result.job.key] = result
    return done


def _plot(results: list[Result], envs: list[str], steps: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.6), dpi=110, squeeze=False)
    edges = np.linspace(0, steps, 21)
    for ax, env_id in zip(axes.flat, envs, strict=True):
        for mode, color in zip(
            MODES, ("tab:gray", "tab:orange", "tab:red", "tab:blue"), strict=True
        ):
            mine = [r for r in results if r.job.env_id == env_id and r.job.mode == mode]
            if not mine:
                continue
            # Mean return of the episodes that end in each twentieth of the run, per seed.
            arr = np.array([_binned(r.curve, edges) for r in mine])
            mean, std = np.nanmean(arr, 0), np.nanstd(arr, 0)
            label = "SAC, true reward" if mode == "sac" else f"{mode} oracle labels"
            ax.plot(edges[1:], mean, color=color, label=label)
            ax.fill_between(edges[1:], mean - std, mean + std, color=color, alpha=0.2)
        seeds = len({r.job.seed for r in results if r.job.env_id == env_id})
        ax.set(title=f"{env_id} ({seeds} seeds)", xlabel="environment steps", ylabel="true return")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(loc="upper left", fontsize=8)
    fig.suptitle("mean ± std over seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def _binned(curve: list[tuple[int, float]], edges: np.ndarray) -> list[float]:
    xs = np.array([step for step, _ in curve])
    ys = np.array([value for _, value in curve])
    inside = [(xs > lo) & (xs <= hi) for lo, hi in itertools.pairwise(edges)]
    return [float(ys[m].mean()) if m.any() else np.nan for m in inside]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", nargs="+", default=["HalfCheetah-v5", "Walker2d-v5"])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument(
        "--hidden-dtype",
        choices=["auto", "float32", "bfloat16"],
        default="auto",
        help="SAC's hidden layers (auto: as rlhf train picks on this machine)",
    )
    parser.add_argument("--out", type=Path, default=None, help="results directory (kept)")
    parser.add_argument("--plot", type=Path, default=None, help="learning curves (PNG)")
    parser.add_argument("--quick", action="store_true", help="HalfCheetah, 1k steps, 1 seed")
    args = parser.parse_args()
    if args.quick:
        args.env_id, args.steps, args.seeds = ["HalfCheetah-v5"], 1000, 1
    if args.hidden_dtype == "auto":  # resolved here, so each result's key names the dtype used
        precision = choose("cpu")
        args.hidden_dtype = precision.dtype
        print(f"SAC hidden layers: {precision.dtype} ({precision.why})")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        jobs = [
            Job(env, mode, seed, args.steps, args.quick, str(out), args.hidden_dtype)
            for env in args.env_id
            for seed in range(1, args.seeds + 1)
            for mode in MODES
        ]
        done = _load(out)
        todo = [job for job in jobs if job.key not in done]
        print(f"{len(jobs) - len(todo)} of {len(jobs)} runs already in {out}", flush=True)
        ran = (
            run_jobs(_train, todo, num_cpus=args.jobs, describe=lambda r: r.job.mode)
            if todo
            else []
        )
        results = [done[job.key] for job in jobs if job.key in done] + list(ran)
    if args.plot:
        _plot(results, args.env_id, args.steps, args.plot)
        print(f"plot: {args.plot}")
    print(f"{args.steps} env steps, {args.seeds} seed(s); final true return (last 10% of steps)")
    print("| env | mode | return | / SAC true reward | steps/s |\n| --- | --- | --- | --- | --- |")
    head: dict[str, float] = {}
    for env in args.env_id:
        means = {}
        for mode in MODES:
            rets = [r.final_return for r in results if r.job.env_id == env and r.job.mode == mode]
            sps = statistics.median(
                r.sps for r in results if r.job.env_id == env and r.job.mode == mode
            )
            means[mode] = statistics.fmean(rets)
            std = statistics.pstdev(rets)
            print(f"| {env} | {mode} | {means[mode]:.0f} +- {std:.0f} | "
                  f"{means[mode] / means['sac']:.2f} | {sps:.0f} |")  # fmt: skip
        if not head:
            head = means
    print(
        f"ratio_pebble400_over_sac={head['pebble400'] / head['sac']:.2f}"
        f" ratio_pebble100_over_sac={head['pebble100'] / head['sac']:.2f}"
        f" pebble400_minus_ppo700={head['pebble400'] - head['ppo700']:.0f}"
    )


if __name__ == "__main__":
    main()
