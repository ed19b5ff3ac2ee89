"""Settings for graded feedback (``--ratings.*``) and for weighting labelled data (``--data.*``).

They live apart from :mod:`rlhf.config`, which only nests them. Validation takes the checker of
:mod:`rlhf.config` as an argument (importing it here would be a cycle), so every message still
names the flag exactly as ``--help`` spells it.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from rlhf.config.ranges import Check, above, at_least, within

MAX_LEVELS = 10
"""Keys 0-9 answer a rating, so a scale has at most ten levels."""


@dataclass(frozen=True)
class RatingScale:
    """A grade scale: level i (0 = worst) is called ``names[i]``."""

    names: tuple[str, ...]

    @property
    def levels(self) -> int:
        return len(self.names)

    def to_json(self) -> dict[str, object]:
        return {"levels": self.levels, "names": list(self.names)}


def default_names(levels: int) -> tuple[str, ...]:
    """Generic names: "0 worst", "1", ..., "K-1 best"."""
    names = [str(i) for i in range(levels)]
    names[0], names[-1] = "0 worst", f"{levels - 1} best"
    return tuple(names)


@dataclass(frozen=True)
class RatingsConfig:
    """The grade scale a person (or the synthetic teacher) rates single clips on
    (--feedback-kind ratings or both)."""

    levels: int = 7
    """Number of grades, 2 to 10 (keys 0-9 answer); grade 0 is the worst."""
    names: tuple[str, ...] = ()
    """A name per grade, worst first (e.g. --ratings.names failed wobbly ok good great);
    empty: "0 worst", "1", ..., "6 best". Given names set the number of levels."""
    scale_file: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """A TOML or JSON file with the scale, e.g. names = ["failed", "ok", "finished gracefully"];
    overrides --ratings.levels and --ratings.names."""
    sharpness: float = 30.0
    """k of the rating loss (White et al. 2024): class logits -k (x - b_i)(x - b_i+1) of the
    normalised predicted return x between the class boundaries b (they used 30)."""

    def scale(self, check: Check) -> RatingScale:
        """The scale these settings describe; a one-line error when they describe none."""
        names: tuple[str, ...] = tuple(self.names)
        if self.scale_file is not None:
            names = _read_scale_file(self.scale_file, check)
        elif not names:
            check(
                2 <= self.levels <= MAX_LEVELS,
                f"{{ratings.levels}} must be in [2, {MAX_LEVELS}], got ",
                str(self.levels),
            )
            names = default_names(self.levels)
        check(
            2 <= len(names) <= MAX_LEVELS,
            f"a grade scale needs 2 to {MAX_LEVELS} names ({{ratings.names}} or"
            " {ratings.scale_file}), got ",
            str(len(names)),
        )
        check(
            all(isinstance(n, str) and n.strip() and len(n) <= 60 for n in names),
            "every grade name ({ratings.names} or {ratings.scale_file}) must be non-empty text"
            " of at most 60 characters",
        )
        return RatingScale(tuple(n.strip() for n in names))

    def validate(self, check: Check) -> None:
        self.scale(check)
        above(check, "ratings.sharpness", self.sharpness, 0, 1000.0)


def _read_scale_file(path: str, check: Check) -> tuple[str, ...]:
    """``names`` from a TOML or JSON file (``levels`` alone gives the generic names)."""
    text = None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        check(False, "{ratings.scale_file} cannot be read: ", f"{path}: {exc}")
    data: object = None
    try:
        data = json.loads(text) if path.endswith(".json") else tomllib.loads(text or "")
    except ValueError as exc:  # tomllib.TOMLDecodeError and json's error are ValueErrors
        check(False, "{ratings.scale_file} is not valid TOML/JSON: ", f"{path}: {exc}")
    check(
        isinstance(data, dict) and ("names" in data or "levels" in data),
        "{ratings.scale_file} must hold names = [...] (worst first) or levels = N: ",
        path,
    )
    assert isinstance(data, dict)
    if "names" in data:
        names = data["names"]
        check(isinstance(names, list), "{ratings.scale_file}: names must be a list: ", path)
        return tuple(names)
    levels = data["levels"]
    check(
        isinstance(levels, int) and not isinstance(levels, bool) and 2 <= levels <= MAX_LEVELS,
        f"{{ratings.scale_file}}: levels must be an integer in [2, {MAX_LEVELS}]: ",
        path,
    )
    return default_names(levels)


@dataclass(frozen=True)
class DataConfig:
    """Which labelled data each reward-training round draws, and how often (the defaults draw
    every label uniformly, as plain bagging does)."""

    grade_beta: float = 0.0
    """Weight factor exp(beta * grade) of a rated clip (grade 0 = worst); pairs have no grade
    (factor 1)."""
    age_lambda: float = 0.0
    """Weight factor exp(-lambda * age) of every label, age in --data.age-unit."""
    age_unit: Literal["iterations", "hours"] = "iterations"
    """What an age counts: policy iterations since the query was asked, or hours since it was
    answered."""
    min_grade: int = 0
    """Rated clips below this grade are never drawn (0: all)."""
    max_age: Annotated[float | None, tyro.conf.arg(metavar="AGE")] = None
    """Labels older than this (in --data.age-unit) are never drawn (None: no limit)."""
    demo_fraction: Annotated[float | None, tyro.conf.arg(metavar="FRACTION")] = None
    """Share of each draw taken from imported labels (source "import", e.g. labels seeded from an earlier run),
    whatever their number; None: they are drawn like any other label."""
    holdout: Literal["random", "best-recent"] = "random"
    """Validation split of rated clips: random (stable as labels arrive), or the best grades of
    the most recent iteration first (what the policy must be judged on now)."""

    def validate(self, check: Check) -> None:
        # exp(beta * grade): beyond 100 one grade outweighs the next by more than e^100
        within(check, "data.grade_beta", self.grade_beta, -100.0, 100.0, "[]")
        at_least(check, "data.age_lambda", self.age_lambda, 0, 100.0)
        within(check, "data.min_grade", self.min_grade, 0, MAX_LEVELS - 1, "[]")
        # inf is "no limit" as None is; nan is no age at all
        check(self.max_age is None or self.max_age >= 0, "{data.max_age} must be >= 0")
        within(check, "data.demo_fraction", self.demo_fraction, 0, 1, "[]")

    @property
    def uniform(self) -> bool:
        """Every label is drawn with the same probability (plain bagging)."""
        return (
            self.grade_beta == 0
            and self.age_lambda == 0
            and self.min_grade == 0
            and self.max_age is None
            and self.demo_fraction is None
        )
