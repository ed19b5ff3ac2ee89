"""Benchmark: rlhf's PPO vs Stable-Baselines3 PPO, same hyperparameters, same invocation.

Both train on HalfCheetah-v5's true reward with CleanRL/SB3-zoo settings: 1 env, 2048 steps per
rollout, minibatch 64, 10 epochs, lr 3e-4 annealed linearly, observation and reward
normalisation (VecNormalize for SB3). Runs are Ray tasks (rlhf.sweep.run_jobs: one CPU and one
torch thread each, --jobs at a time on a local Ray, or on the cluster $RAY_ADDRESS names), so
both sides see the same machine load. Prints a table and, as its last line, the headline figures
as key=value pairs.

    .venv/bin/python scripts/bench_ppo.py                # 300k steps, seeds 1 2 3
    .venv/bin/python scripts/bench_ppo.py --steps 1000000
    .venv/bin/python scripts/bench_ppo.py --quick        # under a minute, smoke check

Needs the bench extra: scripts/setup.sh bench
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass

from rlhf.sweep import run_jobs

ENV_ID = "HalfCheetah-v5"


@dataclass(frozen=True)
class Result:
    impl: str
    seed: int
    steps: int
    seconds: float
    final_return: float

    @property
    def sps(self) -> float:
        return self.steps / self.seconds


def run_ours(seed: int, steps: int) -> Result:
    import torch

    from rlhf.config import Config
    from rlhf.run.runner import run

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as runs:
        cfg = Config(
            env_id=ENV_ID,
            total_timesteps=steps,
            seed=seed,
            reward="env",
            runs_dir=runs,
            run_name="bench",
            progress=False,
            device="cpu",
        )
        summary = run(cfg)
    return Result("rlhf", seed, summary.env_steps, summary.wall_seconds, summary.final_true_return)


def run_sb3(seed: int, steps: int) -> Result:
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import rlhf.envs  # noqa: F401  (quiets MuJoCo 4's deprecation warnings the same way)

    torch.set_num_threads(1)
    env = VecNormalize(DummyVecEnv([lambda: Monitor(gym.make(ENV_ID))]), gamma=0.99)
    model = PPO(
        "MlpPolicy",
        env,
        learning_rate=lambda progress: 3e-4 * progress,
        n_steps=2048,
        batch_size=64,
        n_epochs=10,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        seed=seed,
        device="cpu",
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    returns = [info["r"] for info in list(model.ep_info_buffer)[-10:]]
    done_steps = int(model.num_timesteps)
    env.close()
    return Result(
        "sb3", seed, done_steps, seconds, float(np.mean(returns)) if returns else float("nan")
    )


def _job(args: tuple[str, int, int]) -> Result:
    impl, seed, steps = args
    return run_ours(seed, steps) if impl == "rlhf" else run_sb3(seed, steps)


def _describe(r: Result) -> str:
    return f"{r.impl} seed {r.seed}: {r.sps:.0f} steps/s"


def _summarise(results: list[Result], impl: str) -> tuple[float, float, float]:
    mine = [r for r in results if r.impl == impl]
    sps = statistics.median(r.sps for r in mine)
    rets = [r.final_return for r in mine]
    std = statistics.stdev(rets) if len(rets) > 1 else 0.0
    return sps, statistics.mean(rets), std


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=300_000, help="env steps per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--quick", action="store_true", help="10k steps, one seed")
    args = parser.parse_args()
    steps, seeds = (10_240, [1]) if args.quick else (args.steps, args.seeds)
    jobs = [(impl, seed, steps) for seed in seeds for impl in ("rlhf", "sb3")]
    results = run_jobs(_job, jobs, args.jobs, describe=_describe, after_stop="nothing is kept")
    print(f"{'impl':6} {'seed':>4} {'steps':>8} {'seconds':>8} {'steps/s':>8} {'final return':>13}")
    for r in results:
        print(
            f"{r.impl:6} {r.seed:>4} {r.steps:>8} {r.seconds:>8.1f} {r.sps:>8.0f} {r.final_return:>13.1f}"
        )
    ours_sps, ours_ret, ours_std = _summarise(results, "rlhf")
    sb3_sps, sb3_ret, sb3_std = _summarise(results, "sb3")
    print(
        f"\nmedian steps/s: rlhf {ours_sps:.0f}, sb3 {sb3_sps:.0f}, ratio {ours_sps / sb3_sps:.2f}"
    )
    print(
        f"final return (mean +- std over {len(seeds)} seeds): rlhf {ours_ret:.0f} +- {ours_std:.0f}, sb3 {sb3_ret:.0f} +- {sb3_std:.0f}"
    )
    print(
        f"ratio_sps={ours_sps / sb3_sps:.2f} ours_sps={ours_sps:.0f} sb3_sps={sb3_sps:.0f} "
        f"ours_return={ours_ret:.0f} sb3_return={sb3_ret:.0f} steps={steps} seeds={len(seeds)}"
    )


if __name__ == "__main__":
    main()
