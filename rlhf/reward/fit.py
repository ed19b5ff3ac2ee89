"""``rlhf reward fit DATASET --out reward.pt``: a reward ensemble trained offline on a dataset.

The labels, and the ratings of graded clips, are each split once into a training and a test
share (by ``--seed``); the ensemble trains on the first as a run would (Bradley-Terry and rating
loss together, with its own validation split for early stopping) and is judged on the second:
pairwise accuracy against the labels, the share of held-out clip pairs with different grades
that its predicted returns order as the grades do, and the correlation of its per-step reward
with the env's true reward where the dataset has one. Like a run, the reward reads what
``--reward-model.sees`` says: by default the joint positions and velocities, found by comparing
the first segment's observation with the physics state it recorded. The lazy path (``--lazy``) streams pairs
only: a dataset's ratings are left out there. The saved file is the run's own
``reward_model.pt`` format (:meth:`RewardLearner.state_dict` plus where it came from).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import torch
import tyro

from rlhf.config import ConfigError, RewardConfig, command_check
from rlhf.config.presets import general_reward
from rlhf.config.ranges import at_least, seed, within
from rlhf.core.motion import segment_motion
from rlhf.core.signed import save_signed
from rlhf.core.types import Preference, Rating, Segment
from rlhf.reward.bradley_terry import preference_accuracy
from rlhf.reward.learner import RewardLearner


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
    --max-held-out labels each. Streams pairs only: the dataset's ratings are not used."""
    workers: int = 0
    """--lazy: DataLoader worker processes reading the dataset (0: read in the trainer)."""
    max_held_out: int = 5000
    """--lazy: at most this many labels of the test and of the validation share are kept in memory."""
    reward_model: RewardConfig = field(default_factory=RewardConfig)
    """The ensemble's settings (as for rlhf train)."""

    def validate(self) -> None:
        """One line for a value out of range or an --out that cannot be written, before the
        dataset is read (a fit can take minutes)."""
        check = command_check(RewardCommand)
        within(check, "test_fraction", self.test_fraction, 0, 1, "[)")
        seed(check, "seed", self.seed)
        at_least(check, "workers", self.workers, 0, 64)
        at_least(check, "max_held_out", self.max_held_out, 1, 10**7)
        self.reward_model.validate()
        out = Path(self.out)
        check(not out.is_dir(), "{out} ", f"{self.out} is a directory; name the file to write")
        check(out.parent.is_dir(), "{out} ", f"{self.out}: no such directory {out.parent}")


LAZY_ABOVE = 100_000
"""Datasets with more labels than this are read lazily even without --lazy."""


@dataclass(frozen=True)
class FitResult:
    train_labels: int
    test_labels: int
    test_accuracy: float
    test_pearson: float
    train_ratings: int = 0
    test_ratings: int = 0
    test_rating_accuracy: float = math.nan
    """Share of held-out clip pairs with different grades whose predicted returns agree."""


def fit_offline(
    prefs: list[Preference],
    cfg: RewardConfig,
    test_fraction: float,
    seed: int,
    ratings: list[Rating] | None = None,
) -> tuple[RewardLearner, FitResult]:
    """Split labels and ratings, fit on the training shares, judge on the test shares. No I/O."""
    ratings = ratings or []
    if len(prefs) + len(ratings) < 2:
        raise ConfigError(
            f"the dataset has {len(prefs) + len(ratings)} usable labels and ratings; fitting"
            " needs at least 2"
        )
    if not 0 <= test_fraction < 1:
        raise ConfigError("--test-fraction must be in [0, 1)")
    rng = np.random.default_rng(seed)
    test, train = _split(prefs, test_fraction, rng)
    rtest, rtrain = _split(ratings, test_fraction, rng)
    first = prefs[0].pair.left if prefs else ratings[0].segment
    learner = _learner(first, cfg, seed)
    learner.fit(train, rng, rtrain)
    accuracy = preference_accuracy(learner.ensemble, test) if test else math.nan
    held_out = [s for p in test for s in (p.pair.left, p.pair.right)] + [r.segment for r in rtest]
    return learner, FitResult(
        len(train),
        len(test),
        accuracy,
        _pearson(learner, held_out),
        len(rtrain),
        len(rtest),
        _grade_order_accuracy(learner, rtest),
    )


def _learner(first: Segment, cfg: RewardConfig, seed: int) -> RewardLearner:
    """A new learner for segments like ``first``, reading what ``--reward-model.sees`` says (the
    motion found in the recorded state, as a run finds it in its env)."""
    seen = segment_motion(first) if cfg.sees == "motion" else None
    return RewardLearner(first.obs.shape[1], first.actions.shape[1], cfg, seed=seed, seen_obs=seen)


def _split(items: list, test_fraction: float, rng: np.random.Generator) -> tuple[list, list]:
    """(test, train): a random ``test_fraction`` of ``items`` held out."""
    order = rng.permutation(len(items))
    n_test = round(test_fraction * len(items))
    return [items[i] for i in order[:n_test]], [items[i] for i in order[n_test:]]


def _grade_order_accuracy(learner: RewardLearner, ratings: list[Rating]) -> float:
    """Share of the pairs of ``ratings`` with different grades whose predicted returns are
    ordered as their grades (NaN if there is no such pair)."""
    if len(ratings) < 2:
        return math.nan
    returns = learner.member_returns([r.segment for r in ratings]).mean(axis=0)
    grades = np.array([r.grade / (r.levels - 1) for r in ratings])
    i, j = np.triu_indices(len(ratings), k=1)
    differ = grades[i] != grades[j]
    if not differ.any():
        return math.nan
    agree = np.sign(returns[i] - returns[j]) == np.sign(grades[i] - grades[j])
    return float(agree[differ].mean())


def _pearson(learner: RewardLearner, segments: list[Segment]) -> float:
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
    from rlhf.data.stream import LabelStream, batches

    if not 0 <= test_fraction < 1:
        raise ConfigError("--test-fraction must be in [0, 1)")
    cfg = general_reward(cfg)
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

    rng = np.random.default_rng(seed)
    learner = _learner(val[0].pair.left, cfg, seed)
    stats = learner.fit_stream(epochs, val, rng)
    accuracy = preference_accuracy(learner.ensemble, test) if test else math.nan
    held_out = [s for p in test for s in (p.pair.left, p.pair.right)]
    return learner, FitResult(stats.n_train, len(test), accuracy, _pearson(learner, held_out))


def fit_summary(result: FitResult, unused_ratings: bool = False) -> str:
    """What was trained on and what was measured on the held-out shares, in one line: a figure
    that could not be measured (no held-out labels, no ratings) is left out, never "nan".
    ``unused_ratings``: the dataset has ratings that were not read (--lazy says so itself)."""
    counts = ((result.train_labels, "labels"), (result.train_ratings, "ratings"))
    trained = " and ".join(f"{n} {kind}" for n, kind in counts if n) or "nothing"
    held_out = []
    if not math.isnan(result.test_accuracy):
        held_out.append(
            f"held-out accuracy {result.test_accuracy:.3f} on {result.test_labels} labels"
        )
    if not math.isnan(result.test_rating_accuracy):
        held_out.append(
            f"grade order {result.test_rating_accuracy:.3f} on {result.test_ratings} ratings"
        )
    if not math.isnan(result.test_pearson):
        held_out.append(f"reward vs true reward r={result.test_pearson:.3f}")
    if not result.train_ratings + result.test_ratings and not unused_ratings:
        held_out.append("no ratings")
    return f"trained on {trained}; {', '.join(held_out) or 'nothing held out to measure it on'}"


def reward_main(cmd: RewardCommand) -> None:
    from rlhf.data.reading import read_info, read_preferences, read_ratings

    cmd.validate()
    dataset = Path(cmd.dataset)
    info = read_info(dataset)
    torch.set_num_threads(1)
    lazy = cmd.lazy or info.get("counts", {}).get("labels", 0) > LAZY_ABOVE
    if lazy:
        learner, result = fit_lazy(
            dataset, cmd.reward_model, cmd.test_fraction, cmd.seed, cmd.workers, cmd.max_held_out
        )
    else:
        learner, result = fit_offline(
            read_preferences(dataset),
            cmd.reward_model,
            cmd.test_fraction,
            cmd.seed,
            read_ratings(dataset),
        )
    # The held-out figures travel with the reward (as the run's own figures do in its summary).
    state = learner.state_dict() | {
        "env_id": info.get("env_id"),
        "dataset": str(dataset),
        "fit": dataclasses.asdict(result) | {"lazy": lazy},
    }
    out = Path(cmd.out)
    save_signed(state, out)  # atomic: a failed write (a full disk) leaves no half-written file
    unused = lazy and bool(info.get("counts", {}).get("ratings", 0))
    print(f"{out}: {fit_summary(result, unused)}")
    if (reads := learner.ensemble.what_it_reads()) is not None:
        print(f"{out}: {reads}")
    if unused:
        print(f"{dataset}: --lazy streams pairs only; the dataset's ratings were not used")
