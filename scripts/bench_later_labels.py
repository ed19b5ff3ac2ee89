"""Benchmark: does a reward fitted on a run's earlier labels order what its agent did later?

A run asks for labels as its agent learns, and the reward it trains on between two rounds was
fitted on the labels before. This bench reads runs that kept their labels (``bench_rlhf.py
--keep-runs``, or any ``rlhf train`` run with synthetic feedback), fits the reward offline to the
first share of each run's labels (``--first``, in the order they were asked) and scores it on
the pairs asked after them: the share it orders as their true returns are (the run's true
reward: the env's or its target's; pairs of equal true return left out) and the per-step
correlation with the true reward on their segments. The share of those later labels whose
answer agrees with the true returns (the teacher's mistakes) is printed beside them.

Two arms fit the same labels: the run's own reward settings, and the same with ``--set
reward_model.KEY=VALUE`` (any ``--reward-model.*`` setting of rlhf train). One round from new
members, ``--n-seeds`` times, where a run warm-starts round after round; a setting that does
better here still has to be run (``scripts/bench_rlhf.py``). A minute a run instead of hours:
a screen for settings of the learned reward (docs/results/few-labels-reward.md).

    .venv/bin/python scripts/bench_later_labels.py runs/bench/runs/* --set reward_model.weight_decay=0
    .venv/bin/python scripts/bench_later_labels.py RUN --first 0.8 --set reward_model.ensemble_size=5
    .venv/bin/python scripts/bench_later_labels.py --quick   # makes a small run, then reads it
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from _bench_grid import with_settings

from rlhf.config import Config, ConfigError, QueryConfig, RewardConfig
from rlhf.core.types import Preference
from rlhf.reward.bradley_terry import preference_accuracy
from rlhf.reward.learner import RewardLearner
from rlhf.run.run_dir import read_config
from rlhf.store.label_store import LabelStore
from rlhf.sweep.spec import SpecError, settings_from_flags

QUICK_SET = "reward_model.weight_decay=0"
"""--quick's arm when no --set is given."""


def arm(cfg: Config, items: list[str]) -> RewardConfig:
    """The run's reward settings with ``--set`` applied; SpecError for a key outside them."""
    settings = settings_from_flags(items, "--set")
    for path, _ in settings:
        if not path.startswith("reward_model."):
            raise SpecError(f"--set {path}: only reward_model.* settings change the fit here")
    changed = with_settings(cfg, settings)
    changed.validate()
    return changed.reward_model


def scores(
    cfg: RewardConfig, first: list[Preference], later: list[Preference], seed: int
) -> tuple[float, float]:
    """(share of ``later`` pairs ordered as their true returns, per-step correlation on their
    steps before any episode end) of a reward fitted to ``first``. Pairs are scored as a run
    scores them (the absorbing steps with their flag: :func:`preference_accuracy`)."""
    seg = first[0].pair.left
    learner = RewardLearner(seg.obs.shape[1], seg.actions.shape[1], cfg, seed=seed)
    learner.fit(first, np.random.default_rng(seed))
    truth = [
        Preference(p.pair, float(p.pair.left.true_return > p.pair.right.true_return))
        for p in later
        if p.pair.left.true_return != p.pair.right.true_return
    ]
    accuracy = preference_accuracy(learner.ensemble, truth) if truth else float("nan")
    real = [(s, s.real_steps) for p in later for s in (p.pair.left, p.pair.right)]
    rewards = learner.score(
        np.concatenate([s.obs[:n] for s, n in real]),
        np.concatenate([s.actions[:n] for s, n in real]),
    )
    r = np.corrcoef(rewards, np.concatenate([s.true_rewards[:n] for s, n in real]))[0, 1]
    return accuracy, float(r)


def agreement(later: list[Preference]) -> float:
    """Share of ``later``'s decided answers that agree with the true returns."""
    agree = [
        (p.mu > 0.5) == (p.pair.left.true_return > p.pair.right.true_return)
        for p in later
        if p.mu != 0.5 and p.pair.left.true_return != p.pair.right.true_return
    ]
    return float(np.mean(agree)) if agree else float("nan")


def quick_run(root: Path) -> Path:
    """A small synthetic run on Hopper-v5 with its labels kept: what --quick reads."""
    from rlhf.run.runner import run

    cfg = Config(
        env_id="Hopper-v5",
        total_timesteps=6144,
        seed=0,
        feedback="synthetic",
        runs_dir=str(root),
        run_name="quick",
        progress=False,
        device="cpu",
        query=QueryConfig(total_labels=48),
    )
    run(cfg)
    return root / "quick"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="*", metavar="RUN", help="run directories")
    parser.add_argument("--first", type=float, default=2 / 3, help="share of labels to fit on")
    parser.add_argument("--n-seeds", type=int, default=3, help="fits per arm and run")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--quick", action="store_true", help="make a small run and read it")
    args = parser.parse_args()
    if not args.runs and not args.quick:
        parser.error("give one or more RUN directories (or --quick)")
    if not 0 < args.first < 1:
        parser.error("--first must be between 0 and 1")
    if args.n_seeds < 1:
        parser.error("--n-seeds must be >= 1")
    if not args.set and not args.quick:
        parser.error("give the arm to compare as --set reward_model.KEY=VALUE")
    torch.set_num_threads(1)
    items = args.set or [QUICK_SET]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [Path(r) for r in args.runs] or [quick_run(Path(tmp))]
        try:
            rows = [_run_row(run, items, args.first, args.n_seeds) for run in runs]
        except (ConfigError, SpecError) as exc:
            sys.exit(f"bench_later_labels.py: error: {exc}")
    base = float(np.nanmean([r[0] for r in rows]))
    other = float(np.nanmean([r[1] for r in rows]))
    print(
        f"ratio_acc={other / base:.2f} base_acc={base:.3f} arm_acc={other:.3f}"
        f" runs={len(rows)} seeds={args.n_seeds} first={args.first:.2f}"
    )


def _run_row(run: Path, items: list[str], first_share: float, seeds: int) -> tuple[float, float]:
    """Prints one run's line; returns the two arms' median later-pair accuracy."""
    cfg = read_config(run)
    prefs = LabelStore(run / "labels.sqlite").preferences()
    n = round(first_share * len(prefs))
    if n < 2 or n == len(prefs):
        raise ConfigError(
            f"{run}: {len(prefs)} labels are too few to split at --first {first_share:g}"
        )
    first, later = prefs[:n], prefs[n:]
    arms = {"run's settings": cfg.reward_model, f"--set {' '.join(items)}": arm(cfg, items)}
    print(f"{run.name}: fit on the first {n} labels, scored on the {len(later)} after them"
          f" (their answers agree with the true returns: {agreement(later):.2f})")  # fmt: skip
    medians = []
    for name, reward_cfg in arms.items():
        got = np.array([scores(reward_cfg, first, later, seed) for seed in range(seeds)])
        acc, r = got[:, 0], got[:, 1]
        print(
            f"  {name:40} later pairs {np.median(acc):.2f} ({acc.min():.2f}-{acc.max():.2f})"
            f"  r per step {np.median(r):+.2f}"
        )
        medians.append(float(np.median(acc)))
    return medians[0], medians[1]


if __name__ == "__main__":
    main()
