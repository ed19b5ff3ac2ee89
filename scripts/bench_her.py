"""Benchmark: success rate vs env steps with and without HER, goal-conditioned SAC, one invocation.

Trains our SAC (``rlhf.agent.sac_learner``) on a gymnasium-robotics goal env twice per seed, on
the same settings: with :class:`rlhf.agent.her.HERReplayBuffer` and the *future* strategy
(``--future-k``), and with the same buffer at ``future_k=0`` (plain replay). The policy sees the
observation and the desired goal side by side; rewards come from the env's own
``compute_reward`` at sample time (``rlhf.agent.goal_env``). Prints success per window of steps,
and as the last line the final success rates (the episodes in the last 20% of steps): mean,
median and range over seeds, the gap with HER minus without, the median final return (of the
training episodes, so of the stochastic policy), and the median env step at which the success
rate of the last 20 episodes first reached 0.95 (``never``: it did not). The headline,
``ratio_success``, is the final success rate with HER over without, each pooled over seeds as
(successes + 1) / (episodes + 2), so that it stays finite when one side never succeeds.

Envs (``--env-id``), each with its horizon, success signal and SAC settings:

- ``PointMaze_UMaze-v3``: sparse reward (0 / 1 within 0.45 of the goal), 100-step episodes, the
  goal stays put once reached; success: ``info["success"]`` on the episode's last step; SAC at
  this project's defaults.
- ``FetchReach-v4``, ``FetchPush-v4``: sparse reward (-1 / 0 within 5 cm), 50-step episodes;
  success: ``info["is_success"]`` on the last step; SAC as rl-zoo3 tunes it for FetchReach
  (gamma 0.95, lr 1e-3, batch 256, 64-wide networks, one actor step per critic step, inputs
  standardised by running mean and std; ``--no-normalize`` feeds them raw) with tau 0.05 (the
  HER paper's). They need mujoco < 3.4 (gymnasium-robotics 1.4.2's Fetch robots fail on mujoco
  4.0.0), which the goals extra pins; on mujoco 4 they are refused in one line.

    .venv/bin/python scripts/bench_her.py                            # PointMaze, 20k steps
    .venv/bin/python scripts/bench_her.py --env-id FetchReach-v4 --seeds 3
    .venv/bin/python scripts/bench_her.py --quick                    # smoke check

Needs the goals extra (gymnasium-robotics, mujoco < 3.4): scripts/setup.sh goals
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from rlhf.agent.goal_env import (
    GoalEpisodeRecorder,
    GoalInputNormalizer,
    env_reward_fn,
    goal_env_problem,
    goal_input,
    input_dim,
    make_goal_env,
)
from rlhf.agent.her import HERReplayBuffer
from rlhf.agent.replay import Transitions
from rlhf.agent.sac import RandomActor
from rlhf.agent.sac_learner import SACLearner
from rlhf.config import SACConfig

InputFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(observations, goals) -> what the networks see."""

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
    """The env step at the episode's end."""
    success: bool
    ret: float
    """The env's return (Fetch: minus the steps away from the goal)."""


@dataclass(frozen=True)
class GoalTask:
    horizon: int
    success_key: str
    """The ``info`` key that says, on an episode's last step, whether it ended at the goal."""
    sac: SACConfig
    normalize: bool = False
    """Standardise observations and goals (running mean and std) before the networks see them."""
    kwargs: dict = field(default_factory=dict)


TASKS = {
    "PointMaze_UMaze-v3": GoalTask(
        100, "success", SACConfig(learning_starts=1000), kwargs={"continuing_task": True}
    ),
    "FetchReach-v4": GoalTask(50, "is_success", _FETCH_SAC, normalize=True),
    "FetchPush-v4": GoalTask(50, "is_success", _FETCH_SAC, normalize=True),
}


def _batch(
    buf: HERReplayBuffer, size: int, rng: np.random.Generator, inputs: InputFn
) -> Transitions:
    g = buf.sample(size, rng)
    return Transitions(
        obs=inputs(g.observation, g.desired_goal),
        actions=g.actions,
        rewards=g.rewards,
        next_obs=inputs(g.next_observation, g.desired_goal),
        terminated=g.terminated,
        indices=g.rows,
    )


def train(env_id: str, task: GoalTask, future_k: float, steps: int, seed: int) -> list[Episode]:
    """Every episode of one training run."""
    env = make_goal_env(env_id, task.horizon, **task.kwargs)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    low, high, cfg = env.action_space.low, env.action_space.high, task.sac
    learner = SACLearner(input_dim(env), len(low), low, high, cfg, torch.device("cpu"))
    buf = HERReplayBuffer(steps, env_reward_fn(env), task.horizon, future_k)
    actor, explore = learner.actor_numpy(), RandomActor(low, high)
    recorder = GoalEpisodeRecorder()
    space = env.observation_space
    norm = GoalInputNormalizer(space["observation"].shape[0], space["desired_goal"].shape[0])
    inputs: InputFn = norm if task.normalize else goal_input
    obs, _ = env.reset(seed=seed)
    episodes: list[Episode] = []
    ret = 0.0
    for step in range(steps):
        x = inputs(obs["observation"], obs["desired_goal"])[None]
        action = (explore if step < cfg.learning_starts else actor).sample(x, rng)[0]
        nxt, reward, terminated, truncated, info = env.step(action)
        ret += float(reward)
        recorder.add(obs, action, nxt, terminated)
        obs = nxt
        if terminated or truncated:
            episode = recorder.finish()
            buf.add_episode(episode)
            norm.update(episode.observation, episode.desired_goal)
            norm.update(episode.next_observation, episode.next_achieved_goal)
            episodes.append(Episode(step + 1, bool(info.get(task.success_key, False)), ret))
            ret = 0.0
            obs, _ = env.reset()
        if step >= cfg.learning_starts and len(buf):
            learner.update(_batch(buf, cfg.batch_size, rng, inputs))
    env.close()
    return episodes


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
    parser.add_argument(
        "--normalize", action=argparse.BooleanOptionalAction, help="default: the env's"
    )
    parser.add_argument("--future-k", type=float, default=4.0)
    parser.add_argument("--seeds", type=int, default=1)
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
    if args.normalize is not None:
        task = dataclasses.replace(task, normalize=args.normalize)
    torch.set_num_threads(1)
    runs: dict[str, list[tuple[float, float, float]]] = {"her": [], "plain": []}
    every: dict[str, list[list[Episode]]] = {"her": [], "plain": []}
    windows = np.linspace(0, args.steps, 6)
    print(f"{args.env_id}, {args.steps} steps, success rate per window of steps")
    header = " | ".join(f"<= {w / 1000:g}k" for w in windows[1:])
    print(f"| seed | buffer | {header} | final return | s |")
    for seed in range(1, args.seeds + 1):
        for name, k in (("her", args.future_k), ("plain", 0.0)):
            start = time.perf_counter()
            episodes = train(args.env_id, task, k, args.steps, seed)
            every[name].append(episodes)
            rates = [_rate(episodes, lo, hi) for lo, hi in itertools.pairwise(windows)]
            last = (0.8 * args.steps, args.steps)  # the final rates: the last 20% of steps
            runs[name].append(
                (_rate(episodes, *last), _rate(episodes, *last, "ret"), _steps_to(episodes, 0.95))
            )
            cells = " | ".join(f"{r:.2f}" for r in rates)
            took = time.perf_counter() - start
            print(
                f"| {seed} | {name} | {cells} | {runs[name][-1][1]:.1f} | {took:.0f} |", flush=True
            )
    gap = statistics.fmean(r[0] for r in runs["her"]) - statistics.fmean(
        r[0] for r in runs["plain"]
    )
    last = (0.8 * args.steps, args.steps)
    ratio = _smoothed_rate(every["her"], *last) / _smoothed_rate(every["plain"], *last)
    print(
        f"ratio_success={ratio:.2f} "
        f"env={args.env_id} steps={args.steps} seeds={args.seeds} future_k={args.future_k} "
        f"{_summary('her', runs['her'])} {_summary('plain', runs['plain'])} gap={gap:.2f}"
    )


if __name__ == "__main__":
    main()
