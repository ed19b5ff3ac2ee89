"""Benchmark: what checkpoints and resume cost, against the training they protect, in one invocation.

Trains HalfCheetah-v5 with synthetic oracle labels and a checkpoint after every iteration, then
resumes it for a few more iterations. Reports the checkpoint's size, the time to write one
(median and spread over the run) as a share of an iteration's time, and the resume overhead:
seconds from ``run(resume)`` to the end of its first iteration, minus the median iteration of
the uninterrupted run (what a resume costs beyond the iteration it does anyway: process state,
envs, the checkpoint and every stored label read back).

    .venv/bin/python scripts/bench_resume.py
    .venv/bin/python scripts/bench_resume.py --quick     # under a minute, smoke check
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import torch

import rlhf.run.loop as loop
from rlhf.config import Config, PPOConfig, QueryConfig
from rlhf.run.runner import run


class Timings:
    """Wraps the loop's checkpoint writer and its first collect to time them."""

    def __init__(self) -> None:
        self.checkpoint_s: list[float] = []
        self.iteration_ends: list[float] = []
        self.started = 0.0
        self._write = loop.write_checkpoint
        self._record = loop.record_iteration

    def install(self) -> None:
        def write(t: loop.Trainer) -> None:
            start = time.perf_counter()
            self._write(t)
            self.checkpoint_s.append(time.perf_counter() - start)

        def record(t: loop.Trainer, rollout, stats) -> None:  # type: ignore[no-untyped-def]
            self._record(t, rollout, stats)
            self.iteration_ends.append(time.perf_counter())

        loop.write_checkpoint = write  # type: ignore[assignment]
        loop.record_iteration = record  # type: ignore[assignment]

    def first_iteration_s(self) -> float:
        """Seconds from run() to the end of the first iteration."""
        return self.iteration_ends[0] - self.started


def _cfg(root: Path, iterations: int, steps: int, labels: int) -> Config:
    return Config(
        env_id="HalfCheetah-v5",
        total_timesteps=iterations * steps,
        feedback="synthetic",
        runs_dir=str(root),
        run_name="bench",
        progress=False,
        checkpoint_every=1,
        ppo=PPOConfig(num_steps=steps),
        query=QueryConfig(total_labels=labels),
    )


def _timed_run(cfg: Config) -> Timings:
    timings = Timings()
    timings.install()
    try:
        timings.started = time.perf_counter()
        run(cfg)
    finally:
        loop.write_checkpoint, loop.record_iteration = timings._write, timings._record
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20, help="PPO iterations of the run")
    parser.add_argument("--quick", action="store_true", help="a smoke check under a minute")
    args = parser.parse_args()
    torch.set_num_threads(1)
    iterations, steps, labels = (4, 1024, 60) if args.quick else (args.iterations, 2048, 700)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _cfg(Path(tmp), iterations, steps, labels)
        new = _timed_run(cfg)
        size_kib = (Path(tmp) / "bench" / "checkpoints" / "last.pt").stat().st_size / 1024
        more = dataclasses.replace(
            cfg, resume=str(Path(tmp) / "bench"), total_timesteps=(iterations + 2) * steps
        )
        resumed = _timed_run(more)
    iteration_s = statistics.median(b - a for a, b in itertools.pairwise(new.iteration_ends))
    ckpt = sorted(new.checkpoint_s)
    ckpt_ms, spread = 1000 * statistics.median(ckpt), 1000 * (ckpt[-1] - ckpt[0])
    overhead = resumed.first_iteration_s() - iteration_s
    print(f"checkpoint size: {size_kib:.0f} KiB ({labels} labels, HalfCheetah-v5)")
    print(
        f"checkpoint write: median {ckpt_ms:.1f} ms (range {spread:.1f} ms) over {len(ckpt)} writes"
    )
    print(
        f"iteration ({steps} steps): median {iteration_s:.2f} s; checkpoint share {ckpt_ms / 10 / iteration_s:.2f}%"
    )
    print(
        f"run() to the end of the first iteration: new {new.first_iteration_s():.2f} s,"
        f" resumed {resumed.first_iteration_s():.2f} s"
    )
    print(
        f"checkpoint_kib={size_kib:.0f} checkpoint_ms={ckpt_ms:.1f}"
        f" ratio_checkpoint_share={ckpt_ms / 1000 / iteration_s:.4f}"
        f" resume_overhead_s={overhead:.2f}"
    )


if __name__ == "__main__":
    main()
