"""Benchmark: success rate vs env steps with and without HER, goal-conditioned SAC, one invocation.

Trains our SAC (``rlhf.agent.sac_learner``) on gymnasium-robotics' ``PointMaze_UMaze-v3`` (sparse
reward: 1 within 0.45 of the goal, else 0; 100-step episodes; the goal stays put once reached)
twice per seed, on the same settings: with :class:`rlhf.agent.her.HERReplayBuffer` and the
*future* strategy (``--future-k``), and with the same buffer at ``future_k=0`` (plain replay).
The policy sees the observation and the desired goal side by side; rewards come from the env's
own ``compute_reward`` at sample time. Success: the episode ends at the goal (``info["success"]``
on its last step). Prints success per window of steps, and the final success rates (the episodes
in the last 20% of steps) as the last line.

FetchReach-v4 / FetchPush-v4 need mujoco < 4 (they fail on mujoco 4.0.0), which this project's
environment does not pin; they are not run here.

    .venv/bin/python scripts/bench_her.py                 # 20k steps, 1 seed
    .venv/bin/python scripts/bench_her.py --quick         # smoke check

Needs the goals extra (gymnasium-robotics): pip install -e '.[goals]'
"""

from __future__ import annotations

import argparse
import itertools
import statistics

import gymnasium as gym
import numpy as np
import torch

from rlhf.agent.her import GoalEpisode, HERReplayBuffer
from rlhf.agent.replay import Transitions
from rlhf.agent.sac import RandomActor
from rlhf.agent.sac_learner import SACLearner
from rlhf.config import SACConfig

ENV_ID = "PointMaze_UMaze-v3"
HORIZON = 100


def _x(obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
    return np.concatenate([obs, goal], axis=-1).astype(np.float32)


def _batch(buf: HERReplayBuffer, size: int, rng: np.random.Generator) -> Transitions:
    g = buf.sample(size, rng)
    return Transitions(
        obs=_x(g.observation, g.desired_goal),
        actions=g.actions,
        rewards=g.rewards,
        next_obs=_x(g.next_observation, g.desired_goal),
        terminated=g.terminated,
        indices=g.rows,
    )


def train(future_k: float, steps: int, starts: int, seed: int) -> list[tuple[int, bool]]:
    """(env step at the episode's end, success) for every episode."""
    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    env = gym.make(ENV_ID, max_episode_steps=HORIZON, continuing_task=True)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    space = env.observation_space
    obs_dim, goal_dim = space["observation"].shape[0], space["desired_goal"].shape[0]
    low, high = env.action_space.low, env.action_space.high
    learner = SACLearner(obs_dim + goal_dim, len(low), low, high, SACConfig(), torch.device("cpu"))
    reward = env.unwrapped.compute_reward  # type: ignore[attr-defined]
    buf = HERReplayBuffer(steps, lambda a, d: reward(a, d, {}), HORIZON, future_k)
    actor, explore = learner.actor_numpy(), RandomActor(low, high)
    obs, _ = env.reset(seed=seed)
    ep: dict[str, list] = {k: [] for k in GoalEpisode.__dataclass_fields__}
    episodes: list[tuple[int, bool]] = []
    for step in range(steps):
        x = _x(obs["observation"], obs["desired_goal"])[None]
        action = (explore if step < starts else actor).sample(x, rng)[0]
        nxt, _, terminated, truncated, info = env.step(action)
        for key, value in (("observation", obs["observation"]), ("achieved_goal", obs["achieved_goal"]),
                           ("desired_goal", obs["desired_goal"]), ("actions", action),
                           ("next_observation", nxt["observation"]),
                           ("next_achieved_goal", nxt["achieved_goal"]),
                           ("terminated", float(terminated))):  # fmt: skip
            ep[key].append(value)
        obs = nxt
        if terminated or truncated:
            buf.add_episode(GoalEpisode(**{k: np.asarray(v) for k, v in ep.items()}))
            ep = {k: [] for k in ep}
            episodes.append((step + 1, bool(info.get("success", False))))
            obs, _ = env.reset()
        if step >= starts and len(buf):
            learner.update(_batch(buf, 256, rng))
    env.close()
    return episodes


def _rate(episodes: list[tuple[int, bool]], lo: float, hi: float) -> float:
    hits = [ok for end, ok in episodes if lo < end <= hi]
    return float(np.mean(hits)) if hits else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--learning-starts", type=int, default=1_000)
    parser.add_argument("--future-k", type=float, default=4.0)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2k steps")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.learning_starts = 2000, 500
    torch.set_num_threads(1)
    finals: dict[str, list[float]] = {"her": [], "plain": []}
    windows = np.linspace(0, args.steps, 6)
    print(f"{ENV_ID}, {args.steps} steps, success rate per window of steps")
    print("| seed | buffer | " + " | ".join(f"<= {w / 1000:g}k" for w in windows[1:]) + " |")
    for seed in range(1, args.seeds + 1):
        for name, k in (("her", args.future_k), ("plain", 0.0)):
            episodes = train(k, args.steps, args.learning_starts, seed)
            rates = [_rate(episodes, lo, hi) for lo, hi in itertools.pairwise(windows)]
            print(
                f"| {seed} | {name} | " + " | ".join(f"{r:.2f}" for r in rates) + " |", flush=True
            )
            finals[name].append(_rate(episodes, 0.8 * args.steps, args.steps))
    her, plain = statistics.fmean(finals["her"]), statistics.fmean(finals["plain"])
    print(
        f"steps={args.steps} future_k={args.future_k} her_success={her:.2f} plain_success={plain:.2f}"
    )


if __name__ == "__main__":
    main()
