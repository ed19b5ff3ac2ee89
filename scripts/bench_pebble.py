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
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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


@dataclass(frozen=True)
class Result:
    job: Job
    final_return: float
    sps: float


def _train(job: Job) -> Result:
    import torch

    from rlhf.config import Config, QueryConfig, SACConfig
    from rlhf.runner import run

    torch.set_num_threads(1)
    labels = MODES[job.mode]
    sac = SACConfig(learning_starts=500, pretrain_steps=300) if job.quick else SACConfig()
    name = f"{job.env_id}__{job.mode}__{job.seed}"
    cfg = Config(
        env_id=job.env_id, algo="ppo" if job.mode == "ppo700" else "sac", seed=job.seed,
        total_timesteps=job.steps, reward="learned" if labels else "env", feedback="synthetic",
        runs_dir=job.out, run_name=name, progress=False, sac=sac, device="cpu",
        query=QueryConfig(total_labels=max(labels, 1)),
    )  # fmt: skip
    summary = run(cfg)
    curve = read_curve(Path(job.out) / name / "tb")
    late = [value for step, value in curve if step >= 0.9 * job.steps]
    final = float(np.mean(late)) if late else float(summary.final_true_return or float("nan"))
    return Result(job, final, summary.sps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", nargs="+", default=["HalfCheetah-v5", "Walker2d-v5"])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--quick", action="store_true", help="HalfCheetah, 2k steps, 1 seed")
    args = parser.parse_args()
    if args.quick:
        args.env_id, args.steps, args.seeds = ["HalfCheetah-v5"], 2000, 1
    with tempfile.TemporaryDirectory() as out:
        jobs = [
            Job(env, mode, seed, args.steps, args.quick, out)
            for env in args.env_id
            for seed in range(1, args.seeds + 1)
            for mode in MODES
        ]
        results = run_jobs(_train, jobs, num_cpus=args.jobs, describe=lambda r: r.job.mode)
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
        f"pebble400_over_sac={head['pebble400'] / head['sac']:.2f}"
        f" pebble100_over_sac={head['pebble100'] / head['sac']:.2f}"
        f" pebble400_minus_ppo700={head['pebble400'] - head['ppo700']:.0f}"
    )


if __name__ == "__main__":
    main()
