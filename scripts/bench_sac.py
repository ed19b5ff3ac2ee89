"""Benchmark: our SAC against Stable-Baselines3's SAC, same hyperparameters, in one invocation.

Both train on HalfCheetah-v5's own reward with one env, one torch thread on the CPU, and the
settings they share: Adam 3e-4 for actor, critics and entropy coefficient, batch 256, tau 0.005,
gamma 0.99, one gradient step per env step, an actor step every step (``--sac.policy-frequency
1``, as SB3 does), automatic entropy tuning from 1.0, two 256-wide hidden layers, uniformly
random actions for the first ``--learning-starts`` steps. ``ours`` runs with our defaults
otherwise: ``--sac.hidden-dtype auto``, the hidden-to-hidden products in bfloat16 where the CPU
multiplies it natively (the table's heading says which it chose), else float32; ``ours-float32``
is ours with ``--sac.hidden-dtype float32`` (run only where ours is not float32 already). Speed is the
training phase's steps/s (after learning starts, where the gradient steps are), taken per seed
with the runs interleaved (their order rotates), so a busy machine slows all alike: medians, and
ratios of medians. Return: the mean true return of the last 10 training episodes, as both report it.

    .venv/bin/python scripts/bench_sac.py                   # 3 seeds x 30k steps (long)
    .venv/bin/python scripts/bench_sac.py --steps 10000 --n-seeds 1
    .venv/bin/python scripts/bench_sac.py --quick           # under a minute, smoke check
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlhf.agent.precision import choose
from rlhf.config import Config, SACConfig
from rlhf.run.runner import run

ENV_ID = "HalfCheetah-v5"
LR = 3e-4


@dataclass(frozen=True)
class Result:
    sps: float
    """Env steps per second after learning starts (each with one gradient step)."""
    ret: float
    """Mean true return of the last 10 episodes."""


def ours(
    steps: int, starts: int, seed: int, root: Path, hidden_dtype: str, iteration: int = 500
) -> Result:
    sac = SACConfig(
        policy_lr=LR, q_lr=LR, policy_frequency=1, learning_starts=starts,
        iteration_steps=iteration, hidden_dtype=hidden_dtype,
    )  # fmt: skip
    name = f"ours-{hidden_dtype}-{seed}"
    cfg = Config(
        env_id=ENV_ID, algo="sac", reward="env", total_timesteps=steps, seed=seed,
        runs_dir=str(root), run_name=name, progress=False, sac=sac, device="cpu",
    )  # fmt: skip
    summary = run(cfg)
    # Iterations with gradient steps log losses/*; their TensorBoard wall times time the phase.
    acc = EventAccumulator(str(root / name / "tb"))
    acc.Reload()
    events = acc.Scalars("charts/gradient_steps")
    first, last = events[0], events[-1]
    sps = (last.step - first.step) / (last.wall_time - first.wall_time)
    return Result(sps, float(summary.final_true_return or float("nan")))


def sb3(steps: int, starts: int, seed: int, warmup: int = 500) -> Result:
    from stable_baselines3 import SAC

    env = gym.make(ENV_ID)
    model = SAC(
        "MlpPolicy", env, learning_rate=LR, buffer_size=1_000_000, learning_starts=starts,
        batch_size=256, tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto",
        policy_kwargs={"net_arch": [256, 256]}, seed=seed, device="cpu",
    )  # fmt: skip
    model.learn(total_timesteps=starts + warmup)  # the random phase and a short warm-up
    start = time.perf_counter()
    model.learn(total_timesteps=steps - starts - warmup, reset_num_timesteps=False)
    sps = (steps - starts - warmup) / (time.perf_counter() - start)
    returns = [info["r"] for info in list(model.ep_info_buffer)[-10:]]
    env.close()
    return Result(sps, float(np.mean(returns)) if returns else float("nan"))


VARIANTS = {
    "ours": "auto",
    "ours-float32": "float32",
    "sb3": "",
}
"""Our SAC as it runs by default (--sac.hidden-dtype auto), ours in float32, and SB3's."""


def _spread(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.1f} +- {sd:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--learning-starts", type=int, default=5_000)
    parser.add_argument("--n-seeds", type=int, default=3)
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=None,
        help="default: all three; ours-float32 only where ours is not float32 already",
    )
    parser.add_argument("--quick", action="store_true", help="1200 steps (600 random), 1 seed")
    args = parser.parse_args()
    # SB3's untimed warm-up and our iteration (timed from the second): shorter in a smoke check,
    # which still ends one 1000-step episode (its return).
    warmup, iteration = 500, 500
    if args.quick:
        args.steps, args.learning_starts, args.n_seeds = 1200, 600, 1
        warmup, iteration = 200, 200
    auto = choose("cpu")
    if args.variants is None:
        # Where the CPU has no native bfloat16, ours *is* float32: the same runs twice over.
        same = auto.dtype == "float32"
        args.variants = [name for name in VARIANTS if not (same and name == "ours-float32")]
    torch.set_num_threads(1)
    results: dict[str, list[Result]] = {name: [] for name in args.variants}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, args.n_seeds + 1):
            # The order rotates from seed to seed, so a busy spell slows each variant alike.
            k = (seed - 1) % len(args.variants)
            for name in args.variants[k:] + args.variants[:k]:
                if name == "sb3":
                    r = sb3(args.steps, args.learning_starts, seed, warmup)
                else:
                    dtype = VARIANTS[name]
                    r = ours(args.steps, args.learning_starts, seed, Path(tmp), dtype, iteration)
                results[name].append(r)
                print(f"seed {seed}: {name:9} {r.sps:6.1f} steps/s return {r.ret:8.1f}", flush=True)
    print(f"{ENV_ID}, {args.steps} steps ({args.learning_starts} random), {args.n_seeds} seed(s),"
          f" 1 torch thread, CPU; ours: {auto.dtype} hidden layers ({auto.why})")  # fmt: skip
    base = statistics.median(r.sps for r in results["sb3"]) if "sb3" in results else float("nan")
    print("| | steps/s (training, median) | vs SB3 | return (last 10 episodes, mean +- std) |")
    print("| --- | --- | --- | --- |")
    for name, rs in results.items():
        sps = statistics.median(r.sps for r in rs)
        print(f"| {name} | {sps:.1f} | {sps / base:.2f}x | {_spread([r.ret for r in rs])} |")
    summary = " ".join(
        f"{name}_sps={statistics.median(r.sps for r in rs):.1f}"
        f" {name}_return={statistics.median(r.ret for r in rs):.1f}"
        for name, rs in results.items()
    )
    # The headline: our default SAC's training steps/s over SB3's, both medians (nan if one did
    # not run); then ours in float32 over SB3's.
    medians = {name: statistics.median(r.sps for r in rs) for name, rs in results.items()}
    ratios = f"ratio_sps={medians.get('ours', float('nan')) / base:.2f}"
    if "ours-float32" in medians:
        ratios += f" ratio_sps_float32={medians['ours-float32'] / base:.2f}"
    print(f"{ratios} hidden_dtype={auto.dtype} steps={args.steps} seeds={args.n_seeds} {summary}")


if __name__ == "__main__":
    main()
