"""Benchmark: success rate vs env steps with and without HER, goal-conditioned SAC, one invocation.

Trains a run of ``rlhf train --algo sac --reward env`` (:func:`rlhf.run.runner.run`, so the app's
SAC learner, replay buffers and loop) on a gymnasium-robotics goal env twice per seed, on the same
settings: with ``--sac.her`` (:class:`rlhf.agent.her_buffer.HindsightReplayBuffer`, the *future*
strategy at ``--sac.her-future-k``, rewards from the env's own ``compute_reward`` at sample time)
and without it (SAC's plain replay buffer and the env's stored rewards). The networks see the
flattened observation (observation, achieved goal, desired goal: :mod:`rlhf.envs.goals`), raw, as
the app's SAC does. Each run's episodes are read back from its TensorBoard curves
(``charts/episodic_return``, ``charts/success_rate``): an iteration is one horizon of steps, and
an episode takes a horizon plus the reset step, so each iteration ends at most one episode, which
is placed at the iteration's last step. Prints success per window of steps, and as the last line
the final success rates (the episodes in the last 20% of steps): mean, median and range over
seeds, the gap with HER minus without, the median final return (of the training episodes, so of
the stochastic policy), and the median env step at which the success rate of the last 20
episodes first reached 0.95 (``never``: it did not). The headline, ``ratio_success``, is the
final success rate with HER over without, each pooled over seeds as (successes + 1) / (episodes +
2), so that it stays finite when one side never succeeds.

Envs (``--env-id``), each with its horizon (``--env-kwargs``' ``max_episode_steps``) and SAC
settings:

- ``PointMaze_UMaze-v3``: sparse reward (0 / 1 within 0.45 of the goal), 100-step episodes, the
  goal stays put once reached; success: ``info["success"]`` on the episode's last step; SAC at
  this project's defaults.
- ``FetchReach-v4``, ``FetchPush-v4``: sparse reward (-1 / 0 within 5 cm), 50-step episodes;
  success: ``info["is_success"]`` on the last step; SAC as rl-zoo3 tunes it for FetchReach
  (gamma 0.95, lr 1e-3, batch 256, 64-wide networks, one actor step per critic step) with tau
  0.05 (the HER paper's), on raw inputs (rl-zoo3 standardises them; the app's SAC does not).
  They need mujoco < 3.4 (gymnasium-robotics 1.4.2's Fetch robots fail on mujoco 4.0.0), which
  the goals extra pins; on mujoco 4 they are refused in one line.

    .venv/bin/python scripts/bench_her.py                            # PointMaze, 20k steps
    .venv/bin/python scripts/bench_her.py --env-id FetchReach-v4 --n-seeds 3
    .venv/bin/python scripts/bench_her.py --quick                    # smoke check

Needs the goals extra (gymnasium-robotics, mujoco < 3.4): scripts/setup.sh goals
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import itertools
import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlhf.config import Config, SACConfig
from rlhf.envs.goals import goal_env_problem
from rlhf.run.runner import run

_FETCH_SAC = SACConfig(
    gamma=0.95,
    policy_lr=1e-3,
    q_lr=1e-3,
    batch_size=256,
    learning_starts=1000,
    tau=0.05,
    hidden_size=64,
    policy_frequency=1,
)


@dataclass(frozen=True)
class Episode:
    end: int
    """The env step at the end of the iteration the episode ended in."""
    success: bool
    ret: float
    """The env's return (Fetch: minus the steps away from the goal)."""


@dataclass(frozen=True)
class GoalTask:
    horizon: int
    sac: SACConfig
    kwargs: dict = field(default_factory=dict)
    """The env's keyword arguments besides ``max_episode_steps`` (the horizon)."""


TASKS = {
    "PointMaze_UMaze-v3": GoalTask(
        100, SACConfig(learning_starts=1000), kwargs={"continuing_task": True}
    ),
    "FetchReach-v4": GoalTask(50, _FETCH_SAC),
    "FetchPush-v4": GoalTask(50, _FETCH_SAC),
}


def config(
    env_id: str, task: GoalTask, her: bool, future_k: float, steps: int, seed: int, root: Path
) -> Config:
    """The run ``rlhf train --algo sac --reward env [--sac.her]`` would make of these settings."""
    sac = dataclasses.replace(
        task.sac, her=her, her_future_k=future_k, iteration_steps=task.horizon
    )
    kwargs = task.kwargs | {"max_episode_steps": task.horizon}
    return Config(
        env_id=env_id, algo="sac", reward="env", total_timesteps=steps, seed=seed,
        runs_dir=str(root), run_name=f"{'her' if her else 'plain'}-{seed}", progress=False,
        device="cpu", env_kwargs=json.dumps(kwargs), sac=sac,
    )  # fmt: skip


def train(
    env_id: str, task: GoalTask, her: bool, future_k: float, steps: int, seed: int, root: Path
) -> list[Episode]:
    """Every episode of one training run, from its TensorBoard curves."""
    cfg = config(env_id, task, her, future_k, steps, seed, root)
    with contextlib.redirect_stdout(io.StringIO()):  # its "run finished" line: not the table's
        run(cfg)
    acc = EventAccumulator(str(root / str(cfg.run_name) / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    returns = [(e.step, e.value) for e in acc.Scalars("charts/episodic_return")]
    success = {e.step: e.value for e in acc.Scalars("charts/success_rate")}
    ends = [step for step, _ in returns]
    if len(set(ends)) != len(ends) or set(ends) != set(success):
        raise RuntimeError(f"{env_id}: not one episode per iteration of {task.horizon} steps")
    return [Episode(step, success[step] == 1.0, ret) for step, ret in returns]


def _rate(episodes: list[Episode], lo: float, hi: float, what: str = "success") -> float:
    """Mean success (or ``what``) of the episodes that ended in (lo, hi]."""
    values = [getattr(e, what) for e in episodes if lo < e.end <= hi]
    return float(np.mean(values)) if values else float("nan")


def _steps_to(episodes: list[Episode], level: float, last: int = 20) -> float:
    """The env step at which the success rate of the last ``last`` episodes first reaches
    ``level`` (inf if it never does)."""
    ok = np.array([e.success for e in episodes], float)
    for i in range(last, len(ok) + 1):
        if ok[i - last : i].mean() >= level:
            return float(episodes[i - 1].end)
    return float("inf")


def _summary(name: str, runs: list[tuple[float, float, float]]) -> str:
    """Over seeds, of (final success, final return, steps to a 0.95 success rate) per run."""
    success, ret, reach = (list(column) for column in zip(*runs, strict=True))
    return (
        f"{name}_success_mean={statistics.fmean(success):.2f} "
        f"{name}_median={statistics.median(success):.2f} "
        f"{name}_range=[{min(success):.2f},{max(success):.2f}] "
        f"{name}_return_median={statistics.median(ret):.1f} "
        f"{name}_steps_to_0.95_median={_steps(statistics.median(reach))}"
    )


def _steps(value: float) -> str:
    """An env step count, or ``never`` (a key=value line has no infinite numbers)."""
    return f"{value:g}" if np.isfinite(value) else "never"


def _smoothed_rate(episodes: list[list[Episode]], lo: float, hi: float) -> float:
    """(successes + 1) / (episodes + 2) of the episodes that ended in (lo, hi], pooled over
    runs: the success rate pulled towards 1/2, finite and above zero even with no success."""
    ended = [e.success for run in episodes for e in run if lo < e.end <= hi]
    return (sum(ended) + 1) / (len(ended) + 2)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", choices=sorted(TASKS), default="PointMaze_UMaze-v3")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--learning-starts", type=int, help="default: the env's (1000)")
    parser.add_argument("--batch-size", type=int, help="default: the env's (256)")
    parser.add_argument("--tau", type=float, help="default: the env's")
    parser.add_argument("--future-k", type=float, default=4.0, help="--sac.her-future-k")
    parser.add_argument("--n-seeds", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="1.5k steps, learning from 500")
    args = parser.parse_args()
    problem = goal_env_problem(args.env_id)
    if problem:
        parser.exit(2, problem + "\n")
    if args.quick:
        args.steps, args.learning_starts = 1500, 500
    return args


def main() -> None:
    args = _parse()
    task = TASKS[args.env_id]
    given = {
        "learning_starts": args.learning_starts,
        "batch_size": args.batch_size,
        "tau": args.tau,
    }
    overrides = {k: v for k, v in given.items() if v is not None}
    task = dataclasses.replace(task, sac=dataclasses.replace(task.sac, **overrides))
    runs: dict[str, list[tuple[float, float, float]]] = {"her": [], "plain": []}
    every: dict[str, list[list[Episode]]] = {"her": [], "plain": []}
    windows = np.linspace(0, args.steps, 6)
    print(f"{args.env_id}, {args.steps} steps, success rate per window of steps")
    header = " | ".join(f"<= {w / 1000:g}k" for w in windows[1:])
    print(f"| seed | buffer | {header} | final return | s |")
    with tempfile.TemporaryDirectory(prefix="bench_her-") as tmp:  # the runs
        for seed in range(1, args.n_seeds + 1):
            for name, her in (("her", True), ("plain", False)):
                start = time.perf_counter()
                episodes = train(args.env_id, task, her, args.future_k, args.steps, seed, Path(tmp))
                every[name].append(episodes)
                rates = [_rate(episodes, lo, hi) for lo, hi in itertools.pairwise(windows)]
                last = (0.8 * args.steps, args.steps)  # the final rates: the last 20% of steps
                runs[name].append(
                    (
                        _rate(episodes, *last),
                        _rate(episodes, *last, "ret"),
                        _steps_to(episodes, 0.95),
                    )
                )
                cells = " | ".join(f"{r:.2f}" for r in rates)
                took = time.perf_counter() - start
                print(
                    f"| {seed} | {name} | {cells} | {runs[name][-1][1]:.1f} | {took:.0f} |",
                    flush=True,
                )
    gap = statistics.fmean(r[0] for r in runs["her"]) - statistics.fmean(
        r[0] for r in runs["plain"]
    )
    last = (0.8 * args.steps, args.steps)
    ratio = _smoothed_rate(every["her"], *last) / _smoothed_rate(every["plain"], *last)
    print(
        f"ratio_success={ratio:.2f} "
        f"env={args.env_id} steps={args.steps} seeds={args.n_seeds} future_k={args.future_k} "
        f"{_summary('her', runs['her'])} {_summary('plain', runs['plain'])} gap={gap:.2f}"
    )


if __name__ == "__main__":
    main()
