"""Benchmark: rewards computed when a minibatch is sampled vs PEBBLE's relabelling, in one invocation.

Replays the reward side of a SAC run on HalfCheetah-v5-sized data with the default learned
reward (an ensemble of 3 MLPs of 64x64): every env step one transition is added and one
minibatch of 256 is sampled; every ``--refit-every`` steps the reward changes (its weights are
perturbed, standing in for a refit). Two buffers see the same calls and the same random draws:

* **sample time** (``--sac.no-relabel``, the default): the reward function scores each minibatch;
* **relabel** (``--sac.relabel``, PEBBLE's way): after each reward change the whole buffer is
  rescored in chunks, and rows added since are scored when a minibatch is next drawn.

Reports the reward seconds per env step of each (medians over repeats) and checks that both
hand SAC the same rewards. The SAC gradient step they sit beside costs ~10 ms here.

    .venv/bin/python scripts/bench_relabel.py                 # 50k steps, refit every 5k
    .venv/bin/python scripts/bench_relabel.py --quick         # under a minute, smoke check
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from rlhf.agent.replay import ReplayBuffer
from rlhf.config import RewardConfig
from rlhf.reward.learner import RewardLearner

OBS_DIM, ACT_DIM, BATCH = 17, 6, 256


def replay(steps: int, refit_every: int, relabel: bool, seed: int) -> tuple[float, np.ndarray]:
    """Seconds spent in the buffer's reward path over ``steps`` steps, and the last rewards."""
    data = np.random.default_rng(seed)
    torch.manual_seed(seed)  # the same "refits" for both buffers
    learner = RewardLearner(OBS_DIM, ACT_DIM, RewardConfig(), seed=seed)
    buf = ReplayBuffer(steps, OBS_DIM, ACT_DIM, reward_fn=learner.score, relabel=relabel)
    obs = data.normal(size=(steps, OBS_DIM)).astype(np.float32)
    act = data.uniform(-1, 1, (steps, ACT_DIM)).astype(np.float32)
    zero = np.zeros(1, np.float32)
    rng = np.random.default_rng(seed + 1)
    spent = 0.0
    rewards = np.empty(0, np.float32)
    for step in range(steps):
        buf.add(obs[step : step + 1], act[step : step + 1], obs[step : step + 1], zero, zero)
        start = time.perf_counter()
        if step and step % refit_every == 0:
            with torch.no_grad():  # a refit changes the weights in place
                for p in learner.ensemble.parameters():
                    p.add_(0.01 * torch.randn_like(p))
            buf.set_reward_fn(learner.score)
        rewards = buf.sample(BATCH, rng).rewards
        spent += time.perf_counter() - start
    return spent, rewards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--refit-every", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5k steps, refit every 1k, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.refit_every, args.repeats = 5_000, 1_000, 1
    torch.set_num_threads(1)
    times: dict[bool, list[float]] = {False: [], True: []}
    diff = 0.0
    for rep in range(args.repeats):
        last: dict[bool, np.ndarray] = {}
        for relabel in (rep % 2 == 1, rep % 2 == 0):  # alternate the order
            spent, last[relabel] = replay(args.steps, args.refit_every, relabel, seed=rep)
            times[relabel].append(spent)
        diff = max(diff, float(np.abs(last[True] - last[False]).max()))
    sample_ms = 1e3 * statistics.median(times[False]) / args.steps
    relabel_ms = 1e3 * statistics.median(times[True]) / args.steps
    print(f"{args.steps} steps, reward changed every {args.refit_every}, batch {BATCH}, "
          f"{args.repeats} repeat(s), 1 torch thread")  # fmt: skip
    print("| rewards | ms per env step |\n| --- | --- |")
    print(f"| at sample time | {sample_ms:.3f} |\n| relabel (PEBBLE) | {relabel_ms:.3f} |")
    print(
        f"sample_time_ms={sample_ms:.3f} relabel_ms={relabel_ms:.3f}"
        f" ratio_relabel_over_sample={relabel_ms / sample_ms:.2f} max_reward_diff={diff:.2e}"
    )


if __name__ == "__main__":
    main()
