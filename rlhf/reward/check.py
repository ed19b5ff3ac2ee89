"""Where a learned reward is wrong: it scored against the env's true reward, on and off the
agent's own behaviour (``scripts/check_reward.py RUN``).

A learned reward is only defined up to an affine map (Bradley-Terry fixes neither offset nor
scale, and the run standardises it), so the check first fits ``learned = slope * true +
intercept`` on the agent's own steps, then asks how well that map holds:

* per **behaviour** (the agent with more and more action noise, zero actions, uniform random
  actions): the mean learned reward a step against what the fit predicts from the true reward.
  A negative residual means the reward undervalues that behaviour relative to the agent's.
* per **reward term** the env reports in ``info`` (``reward_forward``, ``reward_ctrl``, ...): the
  correlation of the learned reward with it on the agent's steps (a term the labels never taught
  stays near 0).
* **before an episode's end**: the residual in the last steps before a termination (does the
  reward like what leads to a fall?), and where the fit puts the true value of an end (0)
  against the learned reward of the absorbing state.

The learning code never calls this: it is a tool for reading a finished run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

RewardFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
Policy = Callable[[np.ndarray], np.ndarray]

BEHAVIOURS: tuple[tuple[str, bool, float], ...] = (
    ("agent", True, 0.1),
    ("agent, noise 0.5", True, 0.5),
    ("agent, noise 1", True, 1.0),
    ("zero actions", False, 0.0),
    ("random actions", False, -1.0),
)
"""(name, acts with the agent's mean action, Gaussian noise std; -1: uniform random actions).
The first is where the affine fit is made."""
BEFORE_END = ((0, 5), (5, 20), (20, 80), (80, 10**9))
"""Step ranges before a termination for the residual by distance to the end."""


@dataclass(frozen=True)
class Steps:
    """The steps of some episodes: what the reward sees, the true reward and its terms."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terms: dict[str, np.ndarray]
    to_end: np.ndarray
    """Steps left before a termination (-1 in episodes that were truncated)."""
    lengths: tuple[int, ...]


@dataclass(frozen=True)
class BehaviourRow:
    name: str
    mean_length: float
    true_per_step: float
    learned_per_step: float
    residual: float
    """learned minus what the agent-fit predicts from the true reward, per step."""
    pearson: float


@dataclass(frozen=True)
class Check:
    slope: float
    intercept: float
    absorbing: float | None
    behaviours: tuple[BehaviourRow, ...]
    terms: dict[str, float]
    before_end: tuple[tuple[str, int, float, float], ...]
    """(range, steps, true reward a step, residual) for terminated episodes of the agent."""


def rollout(env: gym.Env, act: Policy | None, noise: float, episodes: int, seed: int) -> Steps:
    """``episodes`` episodes: the agent's mean action plus Gaussian ``noise`` (``act`` None:
    zero actions; ``noise`` < 0: uniform random actions), clipped to the action space."""
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    obs_l, act_l, rew_l, left_l, lengths = [], [], [], [], []
    terms: dict[str, list[float]] = {}
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        n, terminated = 0, False
        while True:
            if noise < 0:
                action = rng.uniform(low, high)
            else:
                base = act(obs) if act is not None else np.zeros_like(low)
                action = base + rng.normal(0.0, noise, low.shape) if noise > 0 else base
            action = np.clip(action, low, high)
            next_obs, reward, terminated, truncated, info = env.step(action)
            obs_l.append(obs)
            act_l.append(action)
            rew_l.append(float(reward))
            for key, value in info.items():
                if key.startswith("reward_") and np.isscalar(value):
                    terms.setdefault(key, []).append(float(value))
            obs, n = next_obs, n + 1
            if terminated or truncated:
                break
        left_l += list(range(n - 1, -1, -1)) if terminated else [-1] * n
        lengths.append(n)
    return Steps(
        obs=np.asarray(obs_l, np.float32),
        actions=np.asarray(act_l, np.float32),
        rewards=np.asarray(rew_l),
        terms={k: np.asarray(v) for k, v in terms.items() if len(v) == len(rew_l)},
        to_end=np.asarray(left_l),
        lengths=tuple(lengths),
    )


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def check_reward(
    reward: RewardFn,
    absorbing: float | None,
    env: gym.Env,
    act: Policy,
    episodes: int = 5,
    seed: int = 0,
) -> Check:
    """Score ``reward`` against ``env``'s true reward on each of :data:`BEHAVIOURS`."""
    runs = [
        (name, rollout(env, act if agent else None, noise, episodes, seed + 1000 * i))
        for i, (name, agent, noise) in enumerate(BEHAVIOURS)
    ]
    learned = [np.asarray(reward(s.obs, s.actions), np.float64) for _, s in runs]
    ref, ref_learned = runs[0][1], learned[0]
    if np.std(ref.rewards) > 0:
        slope, intercept = (float(v) for v in np.polyfit(ref.rewards, ref_learned, 1))
    else:  # a constant true reward: only the offset can be fitted
        slope, intercept = 0.0, float(ref_learned.mean())
    rows = tuple(
        BehaviourRow(
            name=name,
            mean_length=float(np.mean(s.lengths)),
            true_per_step=float(s.rewards.mean()),
            learned_per_step=float(p.mean()),
            residual=float(np.mean(p - (slope * s.rewards + intercept))),
            pearson=_pearson(p, s.rewards),
        )
        for (name, s), p in zip(runs, learned, strict=True)
    )
    terms = {k: _pearson(ref_learned, v) for k, v in sorted(ref.terms.items())}
    before = []
    for lo, hi in BEFORE_END:
        near = (ref.to_end >= lo) & (ref.to_end < hi)
        if near.any():
            fit = slope * ref.rewards[near] + intercept
            label = f"{lo}-{hi - 1}" if hi < 10**9 else f">= {lo}"
            before.append(
                (label, int(near.sum()), float(ref.rewards[near].mean()),
                 float(np.mean(ref_learned[near] - fit)))
            )  # fmt: skip
    return Check(slope, intercept, absorbing, rows, terms, tuple(before))


def format_check(c: Check, env_id: str) -> str:
    """The check as the lines ``scripts/check_reward.py`` prints."""
    lines = [
        f"{env_id}: on the agent's steps, learned = {c.slope:.3f} * true {c.intercept:+.3f}",
        "",
        f"{'behaviour':18} {'length':>7} {'true/step':>10} {'learned/step':>13}"
        f" {'residual':>9} {'pearson':>8}",
    ]
    for r in c.behaviours:
        lines.append(
            f"{r.name:18} {r.mean_length:7.0f} {r.true_per_step:10.2f} {r.learned_per_step:13.2f}"
            f" {r.residual:+9.2f} {r.pearson:8.2f}"
        )
    lines.append("(residual: learned minus the fit's prediction from the true reward, a step;")
    lines.append(" negative: the reward undervalues that behaviour against the agent's)")
    if c.terms:
        lines.append("")
        lines.append("correlation with each reward term on the agent's steps:")
        lines += [f"  {k:20} {v:+.2f}" for k, v in c.terms.items()]
    if c.absorbing is not None:
        lines.append("")
        lines.append(
            f"an episode's end: learned absorbing reward {c.absorbing:+.2f}; the fit puts the"
            f" true value of an end (0) at {c.intercept:+.2f}"
        )
    if c.before_end:
        lines.append("residual before a termination (agent's episodes):")
        lines += [
            f"  {label:>8} steps before: {n:6d} steps, true {true:6.2f}, residual {res:+.2f}"
            for label, n, true, res in c.before_end
        ]
    return "\n".join(lines)
