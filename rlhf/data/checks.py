"""A dataset's files checked at the door: every problem is one line naming the file.

A dataset comes from a user (``rlhf import``, ``rlhf reward fit``, ``--labels-from``), so it may
be truncated, hand-edited or not a dataset at all. What :mod:`rlhf.data.datasets` reads is
checked here before anything is trained on it or written from it: ``dataset.json`` field by
field, each Parquet file's columns and value types, the answers (left, right, equal, skip), and
that every label names a pair and every pair names segments that exist. A later step can then
trust what it reads, instead of failing with a traceback (or, worse, storing an answer no step
can read).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rlhf.config import ConfigError
from rlhf.core.types import Answer, Segment

ANSWERS = frozenset(a.value for a in Answer)
KINDS = frozenset({"pair", "rating"})

# A column's kind: "int", "num" (int or float), "str", "list"; a trailing "?" allows null (or
# no such column: files of older schemas).
SEGMENT_INDEX = {"id": "int", "env_id": "str", "start_step": "int", "absorbing": "int"}
SEGMENT_INDEX_V2 = SEGMENT_INDEX | {"episode_id": "int", "start": "int?", "length": "int"}
SEGMENT_ARRAYS_V1 = {name: "list" for name in ("obs", "actions", "true_rewards", "qpos", "qvel")}
PAIRS = {
    "id": "int",
    "left_segment": "int",
    "right_segment": "int",
    "swapped": "int?",
    "iteration": "int?",
    "created_at": "num",
    "kind": "str?",
}
LABELS = {
    "seq": "int",
    "pair_id": "int",
    "answer": "str",
    "source": "str",
    "labeller": "str?",
    "response_ms": "int?",
    "created_at": "num",
}
REFS = {f"{side}_{part}": "int" for side in ("left", "right") for part in ("episode", "length")}
RATINGS = {
    "seq": "int",
    "pair_id": "int",
    "grade": "int?",
    "levels": "int",
    "source": "str",
    "labeller": "str?",
    "response_ms": "int?",
    "created_at": "num",
}


def spec_of(name: str, schema_version: int) -> dict[str, str]:
    """The columns file ``name``.parquet must have in a dataset of ``schema_version``."""
    if name == "segments":
        return SEGMENT_INDEX | SEGMENT_ARRAYS_V1 if schema_version < 2 else SEGMENT_INDEX_V2
    if name == "labels":
        return LABELS | REFS if schema_version >= 2 else LABELS
    return {"pairs": PAIRS, "ratings": RATINGS}[name]


def _fits(value: Any, kind: str) -> bool:
    if value is None:
        return kind.endswith("?")
    base = kind.rstrip("?")
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "num":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if base == "str":
        return isinstance(value, str)
    return isinstance(value, list)


_SAID = {"int": "an integer", "num": "a finite number", "str": "text", "list": "a list"}


def check_rows(file: Path, rows: Iterable[Mapping[str, Any]], spec: Mapping[str, str]) -> None:
    """Every row has the columns of ``spec``, each value of its kind."""
    for i, row in enumerate(rows):
        for column, kind in spec.items():
            if column not in row:
                if kind.endswith("?"):  # may be null, so older files may leave it out
                    continue
                raise ConfigError(f"{file}: no column {column!r} (is it a file of rlhf export?)")
            if not _fits(row[column], kind):
                said = _SAID[kind.rstrip("?")] + (" or null" if kind.endswith("?") else "")
                raise ConfigError(
                    f"{file}: row {i}: {column} must be {said}, got {_short(row[column])}"
                )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_answers(file: Path, labels: Iterable[Mapping[str, Any]]) -> None:
    for label in labels:
        if label["answer"] not in ANSWERS:
            raise ConfigError(
                f"{file}: seq {label['seq']}: answer {_short(label['answer'])} is not one of"
                f" {', '.join(sorted(ANSWERS))}"
            )


def check_references(
    dataset: Path,
    segment_ids: Iterable[int],
    pairs: list[dict[str, Any]],
    labels: list[dict[str, Any]],
    ratings: list[dict[str, Any]],
) -> None:
    """Ids are unique, every label and rating names a pair of the dataset, every pair names
    segments of it, and every answer and grade is one a step can read."""
    segments = _unique(dataset / "segments.parquet", "id", list(segment_ids))
    _unique(dataset / "pairs.parquet", "id", [p["id"] for p in pairs])
    by_id = {p["id"]: p for p in pairs}
    for pair in pairs:
        for side in ("left_segment", "right_segment"):
            if pair[side] not in segments:
                raise ConfigError(
                    f"{dataset / 'pairs.parquet'}: pair {pair['id']}: {side} {pair[side]} is"
                    " not a segment of segments.parquet"
                )
        if pair.get("kind") is not None and pair["kind"] not in KINDS:
            raise ConfigError(
                f"{dataset / 'pairs.parquet'}: pair {pair['id']}: kind {_short(pair['kind'])}"
                " is not pair or rating"
            )
    check_answers(dataset / "labels.parquet", labels)
    for name, rows in (("labels", labels), ("ratings", ratings)):
        file = dataset / f"{name}.parquet"
        _unique(file, "pair_id", [r["pair_id"] for r in rows])
        _unique(file, "seq", [r["seq"] for r in rows])
        for row in rows:
            if row["pair_id"] not in by_id:
                raise ConfigError(
                    f"{file}: seq {row['seq']}: pair_id {row['pair_id']} is not a pair of"
                    " pairs.parquet"
                )
    for rating in ratings:
        _check_grade(dataset / "ratings.parquet", rating, by_id[rating["pair_id"]])


def _check_grade(file: Path, rating: Mapping[str, Any], query: Mapping[str, Any]) -> None:
    levels, grade = rating["levels"], rating["grade"]
    where = f"{file}: seq {rating['seq']}"
    if not 2 <= levels <= 10:
        raise ConfigError(f"{where}: levels must be in [2, 10], got {levels}")
    if grade is not None and not 0 <= grade < levels:
        raise ConfigError(f"{where}: grade must be in [0, {levels - 1}] or null, got {grade}")
    if query.get("kind") != "rating":
        raise ConfigError(f"{where}: pair {query['id']} is not a clip to grade (kind rating)")


def _unique(file: Path, column: str, values: list[int]) -> set[int]:
    seen = set(values)
    if len(seen) != len(values):
        raise ConfigError(f"{file}: {column} holds the same value twice")
    return seen


def check_segment(where: str, seg_id: int, make: Any) -> Segment:
    """``make()`` (a :class:`Segment` from a dataset's arrays) with finite values, or one line."""
    try:
        segment = make()
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ConfigError(f"{where}: segment {seg_id}: {exc}") from None
    for name in ("obs", "actions", "true_rewards"):
        if not np.isfinite(getattr(segment, name)).all():
            raise ConfigError(f"{where}: segment {seg_id}: {name} holds nan or inf")
    return segment


def check_same_shapes(where: str, segments: Mapping[int, Segment]) -> None:
    """All segments have one observation and one action size (one env's)."""
    shapes = {(s.obs.shape[1], s.actions.shape[1]) for s in segments.values()}
    if len(shapes) > 1:
        raise ConfigError(
            f"{where}: segments differ in (observation, action) size: {sorted(shapes)}"
        )


INFO = {
    "format": "str",
    "schema_version": "int",
    "run_name": "str?",
    "env_id": "str?",
    "task": "str?",
    "target": "str?",
}


def check_info(file: Path, info: Any, fmt: str, newest: int) -> dict[str, Any]:
    """``dataset.json`` (already parsed) as a dataset of format ``fmt``, schema 1 to ``newest``."""
    if not isinstance(info, dict):
        raise ConfigError(f"{file} must hold a JSON object, not {type(info).__name__}")
    if info.get("format") != fmt:
        raise ConfigError(f"{file.parent}: format {_short(info.get('format'))} is not {fmt!r}")
    info = {"schema_version": 1} | info  # the first datasets did not say
    for key, kind in INFO.items():
        if key in info and not _fits(info[key], kind if kind.endswith("?") else kind + "?"):
            raise ConfigError(
                f"{file}: {key} must be {_SAID[kind.rstrip('?')]}, got {_short(info[key])}"
            )
    version = info["schema_version"]
    if not isinstance(version, int) or version < 1:
        raise ConfigError(f"{file}: schema_version must be an integer >= 1, got {_short(version)}")
    if version > newest:
        raise ConfigError(
            f"{file.parent} has schema {version}, newer than this rlhf reads ({newest}); upgrade rlhf"
        )
    for key in ("env_kwargs", "counts", "minari"):
        if info.get(key) is not None and not isinstance(info[key], dict):
            raise ConfigError(f"{file}: {key} must be a JSON object, got {_short(info[key])}")
    counts = info.get("counts") or {}
    if not all(_fits(n, "int") and n >= 0 for n in counts.values()):
        raise ConfigError(f"{file}: counts must be whole numbers >= 0, got {_short(counts)}")
    _check_scale(file, info.get("rating_scale"))
    return info


def _check_scale(file: Path, scale: Any) -> None:
    """null, or {"levels": K, "names": [K names]} with K in [2, 10]."""
    if scale is None:
        return
    names = scale.get("names") if isinstance(scale, dict) else None
    fine = (
        isinstance(names, list)
        and 2 <= len(names) <= 10
        and all(isinstance(n, str) for n in names)
        and scale.get("levels") == len(names)
    )
    if not fine:
        raise ConfigError(
            f'{file}: rating_scale must be null or {{"levels": K, "names": [K names]}} with K'
            f" in [2, 10], got {_short(scale)}"
        )
