"""Reading a dataset written by ``rlhf export`` (see :mod:`rlhf.data.datasets` for its layout),
every file checked at the door (:mod:`rlhf.data.checks`): one line naming the file for a
truncated, foreign or hand-edited one, never a traceback and never a half-made result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rlhf.config import ConfigError
from rlhf.core.shell import missing_extra
from rlhf.core.types import Answer, Pair, Preference, Rating, Segment
from rlhf.data import checks
from rlhf.data.minari_segments import SegmentReader
from rlhf.data.ratings import FILE as RATINGS_FILE
from rlhf.data.ratings import ratings_of
from rlhf.data.v1 import V1Segments

FORMAT = "rlhf-preferences"
SCHEMA_VERSION = 3

Rows = list[dict[str, Any]]


class Segments(Protocol):
    """Reads a dataset's segments by id (all at once, or just those asked for)."""

    rows: dict[int, dict[str, Any]]

    def get(self, segment_ids: list[int]) -> dict[int, Segment]: ...


def pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ConfigError(missing_extra("datasets need pyarrow", "data")) from None
    return pyarrow


def read_info(dataset: Path) -> dict[str, Any]:
    """``dataset.json``, checked: a one-line error unless it is a dataset this rlhf can read."""
    file = dataset / "dataset.json"
    try:
        info = json.loads(file.read_text())
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise ConfigError(f"{dataset} is not an rlhf dataset (no readable dataset.json)") from None
    return checks.check_info(file, info, FORMAT, SCHEMA_VERSION)


def read_parquet(file: Path) -> Rows:
    """The rows of a Parquet file as dicts; one line for a missing, truncated or foreign file."""
    pa = pyarrow()
    if not file.is_file():
        raise ConfigError(f"{file}: no such file (the dataset is incomplete)")
    try:
        return pa.parquet.read_table(file).to_pylist()
    except (pa.ArrowException, OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
        gist = " ".join(str(exc).split())[:160]
        raise ConfigError(f"{file} is not a readable Parquet file ({gist})") from None


def read_table(dataset: Path, name: str) -> Rows:
    """The rows of ``name``.parquet as dicts, each with the columns its schema needs."""
    rows = read_parquet(dataset / f"{name}.parquet")
    version = read_info(dataset)["schema_version"]
    checks.check_rows(dataset / f"{name}.parquet", rows, checks.spec_of(name, version))
    return rows


def read_rating_rows(dataset: Path) -> Rows:
    """The rows of ``ratings.parquet``; [] for a dataset without one (schema 1 and 2)."""
    if not (dataset / RATINGS_FILE).exists():  # as schema 1 and 2 wrote them
        return []
    return read_table(dataset, "ratings")


@dataclass(frozen=True)
class Tables:
    """A dataset's tables, each checked, and checked against each other."""

    index: Rows
    """segments.parquet: one row per segment."""
    pairs: Rows
    labels: Rows
    ratings: Rows


def read_tables(dataset: Path) -> Tables:
    """Every table of ``dataset``; one line for a bad file, answer or reference."""
    index = read_table(dataset, "segments")
    pairs, labels = read_table(dataset, "pairs"), read_table(dataset, "labels")
    ratings = read_rating_rows(dataset)
    checks.check_references(dataset, [r["id"] for r in index], pairs, labels, ratings)
    return Tables(index, pairs, labels, ratings)


def open_segments(dataset: Path, index: Rows | None = None) -> Segments:
    """The dataset's segments, read on demand (schema 2) or all at once (schema 1)."""
    info = read_info(dataset)
    index = read_table(dataset, "segments") if index is None else index
    if info["schema_version"] >= 2:
        return SegmentReader(dataset, index)
    return V1Segments(index, dataset / "segments.parquet")


def read_segments(dataset: Path, index: Rows | None = None) -> dict[int, Segment]:
    """Every segment of a dataset by id, with the dtypes they were stored with."""
    segments = open_segments(dataset, index)
    found = segments.get(list(segments.rows))
    checks.check_same_shapes(str(dataset), found)
    return found


def preferences_of(
    labels: Rows, pairs: dict[int, dict[str, Any]], segments: Segments
) -> list[Preference]:
    """``labels`` rows as training data, in order (skips left out); reads only their segments."""
    usable = [(label, Answer(label["answer"]).mu) for label in labels]
    usable = [(label, mu) for label, mu in usable if mu is not None]
    ids = [
        pairs[label["pair_id"]][f"{side}_segment"]
        for label, _ in usable
        for side in ("left", "right")
    ]
    found = segments.get(ids)
    prefs = []
    for label, mu in usable:
        pair = pairs[label["pair_id"]]
        left, right = found[pair["left_segment"]], found[pair["right_segment"]]
        prefs.append(Preference(Pair(left, right), mu))
    return prefs


def read_preferences(dataset: Path) -> list[Preference]:
    """The dataset's labels as training data, oldest first (skips left out)."""
    tables = read_tables(dataset)
    segments = open_segments(dataset, tables.index)
    pairs = {row["id"]: row for row in tables.pairs}
    prefs = preferences_of(tables.labels, pairs, segments)
    sides = (s for p in prefs for s in (p.pair.left, p.pair.right))
    checks.check_same_shapes(str(dataset), dict(enumerate(sides)))
    return prefs


def read_ratings(dataset: Path) -> list[Rating]:
    """The dataset's graded clips as training data, oldest first (skips left out; none before
    schema 3)."""
    tables = read_tables(dataset)
    if not tables.ratings:
        return []
    pairs = {row["id"]: row for row in tables.pairs}
    return ratings_of(tables.ratings, pairs, open_segments(dataset, tables.index))
