"""``rlhf reward fit DATASET --out reward.pt``: a reward ensemble trained offline on a dataset.

The labels are split once into a training and a test share (by ``--seed``); the ensemble trains
on the first as a run would (with its own validation split for early stopping) and is judged on
the second: pairwise accuracy against the labels, and the correlation of its per-step reward
with the env's true reward where the dataset has one. The saved file is the run's own
``reward_model.pt`` format (:meth:`RewardLearner.state_dict` plus where it came from).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import torch
import tyro

from rlhf.config import ConfigError, RewardConfig
from rlhf.reward.learner import RewardLearner
from rlhf.reward.train import preference_accuracy
from rlhf.types import Preference


@dataclass(frozen=True)
class RewardCommand:
    """rlhf reward fit: train a reward ensemble on a dataset written by rlhf export, print its
    held-out accuracy and save it."""

    action: Annotated[Literal["fit"], tyro.conf.Positional]
    """What to do: fit."""
    dataset: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DATASET")]
    """A directory written by rlhf export."""
    out: str = "reward.pt"
    """Where the fitted ensemble goes."""
    test_fraction: float = 0.2
    """Share of labels held out to judge the fitted reward (never trained on)."""
    seed: int = 1
    """Seeds the split and the networks."""
    lazy: bool = False
    """Read the labels from disk batch by batch instead of loading them all (for datasets larger
    than memory; on by itself above 100,000 labels). Held-out shares are capped at
    --max-held-out labels each."""
    workers: int = 0
    """--lazy: DataLoader worker processes reading the dataset (0: read in the trainer)."""
    max_held_out: int = 5000
    """--lazy: at most this many labels of the test and of the validation share are kept in memory."""
    reward_model: RewardConfig = field(default_factory=RewardConfig)
    """The ensemble's settings (as for rlhf train)."""


LAZY_ABOVE = 100_000
"""Datasets with more labels than this are read lazily even without --lazy."""


@dataclass(frozen=True)
class FitResult:
    train_labels: int
    test_labels: int
    test_accuracy: float
    test_pearson: float


def fit_offline(
    prefs: list[Preference], cfg: RewardConfig, test_fraction: float, seed: int
) -> tuple[RewardLearner, FitResult]:
    """Split, fit on the training share, judge on the test share. No I/O."""
    if len(prefs) < 2:
        raise ConfigError(f"the dataset has {len(prefs)} usable labels; fitting needs at least 2")
    if not 0 <= test_fraction < 1:
        raise ConfigError("--test-fraction must be in [0, 1)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(prefs))
    n_test = round(test_fraction * len(prefs))
    test = [prefs[i] for i in order[:n_test]]
    train = [prefs[i] for i in order[n_test:]]
    first = prefs[0].pair.left
    learner = RewardLearner(first.obs.shape[1], first.actions.shape[1], cfg, seed=seed)
    learner.fit(train, rng)
    accuracy = preference_accuracy(learner.ensemble, test) if test else math.nan
    return learner, FitResult(len(train), len(test), accuracy, _pearson(learner, test))


def _pearson(learner: RewardLearner, prefs: list[Preference]) -> float:
    segments = [s for p in prefs for s in (p.pair.left, p.pair.right)]
    if not segments:
        return math.nan
    real = [s.real_steps for s in segments]
    obs = np.concatenate([s.obs[:n] for s, n in zip(segments, real, strict=True)])
    act = np.concatenate([s.actions[:n] for s, n in zip(segments, real, strict=True)])
    true = np.concatenate([s.true_rewards[:n] for s, n in zip(segments, real, strict=True)])
    predicted = learner.score(obs, act)
    if np.std(true) == 0 or np.std(predicted) == 0:
        return math.nan
    return float(np.corrcoef(predicted, true)[0, 1])


def fit_lazy(
    dataset: Path, cfg: RewardConfig, test_fraction: float, seed: int, workers: int, cap: int
) -> tuple[RewardLearner, FitResult]:
    """As :func:`fit_offline`, reading the training labels from disk one batch at a time."""
    from rlhf.label_stream import LabelStream, batches

    if not 0 <= test_fraction < 1:
        raise ConfigError("--test-fraction must be in [0, 1)")
    val_fraction = cfg.val_fraction if cfg.val_fraction > 0 else 0.1  # streaming needs one

    def part(name: str, buffer: int = 1) -> LabelStream:
        return LabelStream(dataset, name, test_fraction, val_fraction, seed, buffer)  # type: ignore[arg-type]

    test = [p for _, p in itertools.islice(part("test"), cap)]
    val = [p for _, p in itertools.islice(part("val"), cap)]
    if not val:
        raise ConfigError(f"{dataset}: no label fell in the validation share; fitting needs more")
    train = part("train", buffer=max(cfg.batch_size * 16, 1024))

    def epochs(k: int) -> Iterator[list[Preference]]:
        train.set_epoch(k)
        return batches(train, cfg.batch_size, workers)

    first = val[0].pair.left
    rng = np.random.default_rng(seed)
    learner = RewardLearner(first.obs.shape[1], first.actions.shape[1], cfg, seed=seed)
    stats = learner.fit_stream(epochs, val, rng)
    accuracy = preference_accuracy(learner.ensemble, test) if test else math.nan
    return learner, FitResult(stats.n_train, len(test), accuracy, _pearson(learner, test))


def reward_main(cmd: RewardCommand) -> None:
    from rlhf.datasets import read_info, read_preferences

    dataset = Path(cmd.dataset)
    info = read_info(dataset)
    torch.set_num_threads(1)
    if cmd.workers < 0 or cmd.max_held_out < 1:
        raise ConfigError("--workers must be >= 0 and --max-held-out >= 1")
    lazy = cmd.lazy or info.get("counts", {}).get("labels", 0) > LAZY_ABOVE
    if lazy:
        learner, result = fit_lazy(
            dataset, cmd.reward_model, cmd.test_fraction, cmd.seed, cmd.workers, cmd.max_held_out
        )
    else:
        learner, result = fit_offline(
            read_preferences(dataset), cmd.reward_model, cmd.test_fraction, cmd.seed
        )
    # The held-out figures travel with the reward (as the run's own figures do in its summary).
    state = learner.state_dict() | {
        "env_id": info.get("env_id"),
        "dataset": str(dataset),
        "fit": dataclasses.asdict(result) | {"lazy": lazy},
    }
    out = Path(cmd.out)
    tmp = out.with_name(f".{out.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, out)
    print(
        f"{out}: trained on {result.train_labels} labels; held-out accuracy"
        f" {result.test_accuracy:.3f} on {result.test_labels} labels, reward vs true reward"
        f" r={result.test_pearson:.3f}"
    )
