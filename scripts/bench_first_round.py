"""Benchmark: how much the first reward round learns from the labels a run asks up front.

A run's first labels compare segments of the untrained policy (random actions), and PPO then
trains on the reward fitted to them until the next labels arrive. This bench fits the reward
ensemble offline to N such labels (the synthetic teacher, ``--mistake`` of them flipped) and
measures it where it matters, on segments it was not fitted on:

* held-out pairs of the random policy's segments (the same behaviour, other segments), and
* pairs of other behaviours: open-loop gaits (each joint a sine of its own phase), which move
  the robot forwards and backwards as a trained policy may.

Each arm is one way to fit the same labels; the first, ``defaults``, is what ``rlhf train`` does
today on the env with ``--algo`` (its preset included). Prints, per arm, the share of held-out
pairs ordered as their true returns are (median and range over seeds) and the per-step Pearson
correlation with the true reward, then the headline figures as the last line.

    .venv/bin/python scripts/bench_first_round.py                       # HalfCheetah, 50 labels
    .venv/bin/python scripts/bench_first_round.py --env-id Hopper-v5 --labels 20 50 150
    .venv/bin/python scripts/bench_first_round.py --algo sac --labels 130 --mistake 0
                                    # PEBBLE's first round: 130 perfect labels at step 14k
    .venv/bin/python scripts/bench_first_round.py --quick               # smoke check
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from collections.abc import Callable

import numpy as np
import torch

from rlhf.config import Config, RewardConfig
from rlhf.config.presets import with_preset
from rlhf.core.types import Pair, Preference, Segment
from rlhf.envs.make import make_env  # also routes MuJoCo 4's deprecation notes to logging
from rlhf.reward.learner import RewardLearner

SEGMENT = 50
"""Steps per segment (the synthetic teacher's default)."""


def arms(env_id: str, quick: bool, algo: str = "ppo") -> dict[str, RewardConfig]:
    """The ways to fit the labels: today's defaults for the env and algorithm, then the
    alternatives."""
    cfg, _ = with_preset(Config(env_id=env_id, algo=algo, feedback="synthetic"))
    base = cfg.reward_model
    epochs = 5 if quick else 100  # x 32 gradient steps
    every = dataclasses.replace(base, val_fraction=0.0, min_epoch_steps=32, max_epochs=epochs)
    return {
        "defaults": base,
        # PPO's default (SAC's before it fitted every label): stop early on a fifth held out
        "a fifth held out, 30 epochs": dataclasses.replace(base, val_fraction=0.2, max_epochs=30),
        # the general default, then HalfCheetah's and Walker2d's preset, on every env
        "one pass an epoch, random": dataclasses.replace(
            base, min_epoch_steps=1, output_init="random"
        ),
        "32 steps an epoch, flat": dataclasses.replace(
            base, min_epoch_steps=32, output_init="zero"
        ),
        "every label, no early stop": every,
        "linear, every label": dataclasses.replace(every, hidden_sizes=()),
        # the group lasso on the inputs (--reward-model.input-sparsity) on each of the two fits
        "32 steps, flat, sparse inputs": dataclasses.replace(
            base, min_epoch_steps=32, output_init="zero", input_sparsity=0.01
        ),
        "every label, sparse inputs": dataclasses.replace(every, input_sparsity=0.01),
    }


def rollout(
    env_id: str, policy: Callable[[int], np.ndarray], steps: int, seed: int
) -> list[Segment]:
    """``steps`` steps of ``policy`` (a function of the step), cut into segments that do not
    cross an episode's end."""
    env = make_env(env_id)
    obs, _ = env.reset(seed=seed)
    segments, buf = [], ([], [], [])
    for t in range(steps):
        action = np.clip(policy(t), -1, 1).astype(np.float32)
        nxt, reward, term, trunc, _ = env.step(action)
        for part, value in zip(buf, (obs, action, reward), strict=True):
            part.append(value)
        obs = nxt
        if len(buf[0]) == SEGMENT:
            o, a, r = (np.asarray(p, np.float32) for p in buf)
            none = np.zeros((SEGMENT, 0))
            segments.append(Segment(o, a, r, none, none, env_id))
        if len(buf[0]) == SEGMENT or term or trunc:
            buf = ([], [], [])
        if term or trunc:
            obs, _ = env.reset()
    env.close()
    return segments


def gaits(
    env_id: str, act_dim: int, count: int, steps: int, rng: np.random.Generator
) -> list[Segment]:
    """``count`` open-loop gaits of ``steps`` steps each: every joint a sine of its own phase
    (one frequency and amplitude a gait), plus a little noise."""
    segments: list[Segment] = []
    for k in range(count):
        sine = functools.partial(
            _sine,
            amp=rng.uniform(0.5, 1.0),
            freq=rng.uniform(0.2, 1.0),
            phase=rng.uniform(0, 2 * np.pi, act_dim),
            noise=np.random.default_rng(k),
        )
        segments += rollout(env_id, sine, steps, seed=10_000 + k)
    return segments


def _sine(
    t: int, amp: float, freq: float, phase: np.ndarray, noise: np.random.Generator
) -> np.ndarray:
    return amp * np.sin(freq * t + phase) + 0.2 * noise.normal(size=phase.shape)


def labels(segments: list[Segment], n: int, mistake: float, rng: np.random.Generator):
    """``n`` pairs of distinct segments, labelled by their true returns, ``mistake`` flipped."""
    out = []
    for _ in range(n):
        i, j = rng.choice(len(segments), 2, replace=False)
        left, right = segments[i], segments[j]
        mu = float(left.true_rewards.sum() > right.true_rewards.sum())
        out.append(Preference(Pair(left, right), 1.0 - mu if rng.random() < mistake else mu))
    return out


def pair_accuracy(learner: RewardLearner, segments: list[Segment], rng: np.random.Generator):
    """Share of random pairs of ``segments`` (different true returns) the reward orders right."""
    learned = np.array([learner.score(s.obs, s.actions).sum() for s in segments])
    true = np.array([s.true_rewards.sum() for s in segments])
    a, b = rng.integers(len(segments), size=(2, 4000))
    keep = true[a] != true[b]
    return float(np.mean((learned[a] > learned[b])[keep] == (true[a] > true[b])[keep]))


def step_correlation(learner: RewardLearner, segments: list[Segment]) -> float:
    obs = np.concatenate([s.obs for s in segments])
    rewards = learner.score(obs, np.concatenate([s.actions for s in segments]))
    return float(np.corrcoef(rewards, np.concatenate([s.true_rewards for s in segments]))[0, 1])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env-id", default="HalfCheetah-v5")
    parser.add_argument(
        "--algo", choices=("ppo", "sac"), default="ppo", help="whose defaults (rlhf train --algo)"
    )
    parser.add_argument("--labels", type=int, nargs="+", default=None, help="default 50")
    parser.add_argument("--mistake", type=float, default=0.1, help="share of flipped answers")
    parser.add_argument("--n-seeds", type=int, default=None, help="label draws (default 5)")
    parser.add_argument("--quick", action="store_true", help="a small run of the same table")
    return parser


def main() -> None:
    args = _parser().parse_args()
    torch.set_num_threads(1)
    budgets = args.labels or ([20] if args.quick else [50])
    seeds = args.n_seeds or (2 if args.quick else 5)
    rng = np.random.default_rng(0)
    act_dim = make_env(args.env_id).action_space.shape[0]
    random_steps = 4000 if args.quick else 20_000
    pool = rollout(args.env_id, lambda t: rng.normal(size=act_dim), random_steps, seed=0)
    fit_on, held_out = pool[: len(pool) // 2], pool[len(pool) // 2 :]
    other = gaits(args.env_id, act_dim, 4 if args.quick else 40, 500, rng)
    print(
        f"{args.env_id}: {len(fit_on)} random-policy segments to label, {len(held_out)} held"
        f" out, {len(other)} gait segments; {args.mistake:g} of the answers flipped; seeds 0-{seeds - 1}"
    )
    print(f"{'labels':>6}  {'arm':28} {'random pairs':>22} {'gait pairs':>22} {'r per step':>10}")
    headline: dict[str, float] = {}
    for n in budgets:
        scores: dict[str, list[tuple[float, float, float]]] = {}
        for seed in range(seeds):
            draw = np.random.default_rng(100 + seed)
            prefs = labels(fit_on, n, args.mistake, draw)
            for name, cfg in arms(args.env_id, args.quick, args.algo).items():
                learner = RewardLearner(pool[0].obs.shape[1], act_dim, cfg, seed=seed)
                learner.fit(prefs, np.random.default_rng(seed))
                figures = (
                    pair_accuracy(learner, held_out, np.random.default_rng(seed)),
                    pair_accuracy(learner, other, np.random.default_rng(seed)),
                    step_correlation(learner, held_out),
                )
                scores.setdefault(name, []).append(figures)
        for name, rows in scores.items():
            m = np.array(rows)
            cells = [
                f"{np.median(m[:, k]):.2f} ({m[:, k].min():.2f}-{m[:, k].max():.2f})"
                for k in (0, 1)
            ]
            print(f"{n:>6}  {name:28} {cells[0]:>22} {cells[1]:>22} {np.median(m[:, 2]):>10.2f}")
            headline[f"{name}@{n}"] = float(np.median(m[:, 0]))
    _print_headline(headline, budgets[0], seeds, args)


def _print_headline(
    headline: dict[str, float], n: int, seeds: int, args: argparse.Namespace
) -> None:
    """The machine-readable line: ratios of the arms' held-out pair accuracy at ``n`` labels."""
    default, every = headline[f"defaults@{n}"], headline[f"every label, no early stop@{n}"]
    linear = headline[f"linear, every label@{n}"]
    sparse = headline[f"32 steps, flat, sparse inputs@{n}"]
    every_sparse = headline[f"every label, sparse inputs@{n}"]
    held_out_fifth = headline[f"a fifth held out, 30 epochs@{n}"]
    one_pass, flat = (
        headline[f"one pass an epoch, random@{n}"],
        headline[f"32 steps an epoch, flat@{n}"],
    )
    print(
        f"ratio_acc_flat_vs_one_pass={flat / one_pass:.2f}"
        f" ratio_acc_every={every / default:.2f} ratio_acc_linear={linear / default:.2f}"
        f" ratio_acc_defaults_vs_fifth={default / held_out_fifth:.2f}"
        f" defaults_acc={default:.3f} one_pass_acc={one_pass:.3f} flat_acc={flat:.3f}"
        f" every_acc={every:.3f}"
        f" linear_acc={linear:.3f} sparse_acc={sparse:.3f} every_sparse_acc={every_sparse:.3f}"
        f" labels={n} seeds={seeds} env={args.env_id} algo={args.algo}"
    )


if __name__ == "__main__":
    main()
