"""Labelled data that outlives a run: ``rlhf export RUN OUT`` and ``rlhf import DATASET DIR``.

A dataset (schema version 3) is a directory readable without rlhf: the segments as a Minari
dataset (Farama's offline-RL standard) and the labels as Parquet files (read by pandas, polars,
DuckDB, Arrow and Hugging Face datasets alike) that reference segments by (episode id, start,
length), as the offline preference datasets do (Preference Transformer's index + label files)::

    OUT/dataset.json
    OUT/minari/rlhf/segments-v0/data/...   one Minari episode per segment (see rlhf.data.minari_segments)
    OUT/segments.parquet                    the segment index
    OUT/pairs.parquet
    OUT/labels.parquet
    OUT/ratings.parquet                     graded clips (see rlhf.data.ratings)

- ``dataset.json``: ``format`` ("rlhf-preferences"), ``schema_version``, the rlhf version that
  wrote it, the run's name, env id and env kwargs, ``task`` (what the labellers were asked to
  teach, ``rlhf train --task``; null if none), ``target`` (the target behaviour whose reward the
  segments' true rewards are, ``--teacher.target``/``--teacher.reward``; null: the env's own),
  ``rating_scale`` (the run's grade scale,
  {"levels": K, "names": [...]}, or null), row counts, and ``minari`` (the Minari dataset id and
  its path inside the dataset).
- ``segments.parquet``: one row per segment: ``id`` (the run's segment id), ``episode_id`` (its
  Minari episode), ``start`` (0: the whole episode), ``length``, ``env_id``, ``start_step``,
  ``absorbing`` (padding steps after the episode ended), ``true_return``.
- ``pairs.parquet``: the run's pairs: ``id``, ``left_segment``/``right_segment`` (segment ids),
  ``left_episode``, ``left_start``, ``left_length`` and the same for ``right_``, ``swapped``,
  ``iteration``, ``created_at``, ``kind`` ("pair", or "rating": a clip to grade, left = right).
- ``labels.parquet``: one row per answer: ``seq``, ``pair_id``, ``answer`` (left, right, equal,
  skip), ``source`` (human, synthetic, import), ``labeller``, ``response_ms``, ``created_at``
  (Unix time), and the pair's segment references (``left_episode`` ... as in pairs.parquet), so
  the labels file and the Minari dataset alone are enough to train on.

Schema version 2 (still read) had no ratings file and no ``kind`` (every query was a pair).
Schema version 1 (still read) kept the per-step arrays (``obs``, ``actions``, ``true_rewards``,
``qpos``, ``qvel``) as list columns of ``segments.parquet`` and had no Minari dataset.
Reading never changes the run (its store is opened read-only); an import writes a fresh
``labels.sqlite`` with the same ids, so export -> import -> export gives the same data.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rlhf.config import ConfigError
from rlhf.core.shell import missing_extra
from rlhf.core.types import Answer, Pair, Preference, Rating, Segment
from rlhf.data.minari_segments import MINARI_ID, MINARI_ROOT, SegmentReader, write_segments
from rlhf.data.ratings import (
    ratings_of,
    read_rating_rows,
    with_refs,
    write_ratings,
)
from rlhf.data.run_rows import read_run
from rlhf.data.v1 import V1Segments
from rlhf.store import LabelStore
from rlhf.store.meta import (
    ENV_ID_META,
    ENV_KWARGS_META,
    RUN_NAME_META,
    SCALE_META,
    TARGET_META,
    TASK_META,
)
from rlhf.store.records import pack_segment

FORMAT = "rlhf-preferences"
SCHEMA_VERSION = 3
REF_COLUMNS = tuple(
    f"{side}_{part}" for side in ("left", "right") for part in ("episode", "start", "length")
)
"""A pair's segment references by (episode id, start, length), in pairs and labels."""
CARRIED_META = (RUN_NAME_META, ENV_ID_META, ENV_KWARGS_META, TASK_META, TARGET_META, SCALE_META)
"""The store's meta keys a dataset carries: ``dataset.json`` holds each under the same name."""


@dataclass(frozen=True)
class DatasetCounts:
    segments: int
    pairs: int
    labels: int
    ratings: int = 0


class Segments(Protocol):
    """Reads a dataset's segments by id (all at once, or just those asked for)."""

    rows: dict[int, dict[str, Any]]

    def get(self, segment_ids: list[int]) -> dict[int, Segment]: ...


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ConfigError(missing_extra("datasets need pyarrow", "data")) from None
    return pyarrow


def export_run(run: Path, out: Path, row_group_size: int = 4096) -> DatasetCounts:
    """Write the run's segments, pairs, labels and ratings as a dataset in ``out`` (a new directory).

    ``labels.parquet`` is written in row groups of ``row_group_size`` labels: the unit a lazy
    reader (:mod:`rlhf.data.stream`) loads at a time.
    """
    pa = _pyarrow()
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not empty; name a new directory")
    rows = read_run(run)
    meta, segments, pairs, labels = rows.meta, rows.segments, rows.pairs, rows.labels
    out.mkdir(parents=True, exist_ok=True)
    write_segments(out, [s for _, s in segments], meta.get(ENV_ID_META), meta.get(ENV_KWARGS_META))
    episode = {seg_id: i for i, (seg_id, _) in enumerate(segments)}
    length = {seg_id: len(s) for seg_id, s in segments}
    for pair in pairs:
        for side in ("left", "right"):
            seg_id = pair[f"{side}_segment"]
            pair |= {f"{side}_episode": episode[seg_id], f"{side}_start": 0}
            pair[f"{side}_length"] = length[seg_id]
    refs = {pair["id"]: {k: pair[k] for k in REF_COLUMNS} for pair in pairs}
    labels = [label | refs[label["pair_id"]] for label in labels]
    ratings = with_refs(rows.ratings, pairs)
    pa.parquet.write_table(_segment_index(pa, segments), out / "segments.parquet")
    pa.parquet.write_table(_table(pa, pairs), out / "pairs.parquet")
    pa.parquet.write_table(
        _table(pa, labels), out / "labels.parquet", row_group_size=row_group_size
    )
    write_ratings(pa, ratings, out)
    counts = DatasetCounts(len(segments), len(pairs), len(labels), len(ratings))
    info = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "rlhf_version": _version(),
        "run_name": meta.get(RUN_NAME_META, run.name),
        "env_id": meta.get(ENV_ID_META),
        "env_kwargs": meta.get(ENV_KWARGS_META, {}),
        "task": meta.get(TASK_META) or None,
        "target": meta.get(TARGET_META) or None,
        "rating_scale": meta.get(SCALE_META),
        "counts": counts.__dict__,
        "minari": {"dataset_id": MINARI_ID, "path": f"{MINARI_ROOT}/{MINARI_ID}/data"},
    }
    (out / "dataset.json").write_text(json.dumps(info, indent=2) + "\n")
    return counts


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rlhf")
    except PackageNotFoundError:
        return "unknown"


def _table(pa: Any, rows: list[dict[str, Any]]) -> Any:
    # An empty run still gets files a reader can open (with no columns to guess from).
    return pa.Table.from_pylist(rows) if rows else pa.table({})


def _segment_index(pa: Any, segments: list[tuple[int, Segment]]) -> Any:
    return pa.table(
        {
            "id": pa.array([i for i, _ in segments], pa.int64()),
            "episode_id": pa.array(range(len(segments)), pa.int64()),
            "start": pa.array([0] * len(segments), pa.int64()),
            "length": pa.array([len(s) for _, s in segments], pa.int64()),
            "env_id": pa.array([s.env_id for _, s in segments], pa.string()),
            "start_step": pa.array([s.start_step for _, s in segments], pa.int64()),
            "absorbing": pa.array([s.absorbing for _, s in segments], pa.int32()),
            "true_return": pa.array([s.true_return for _, s in segments], pa.float64()),
        }
    )


def read_info(dataset: Path) -> dict[str, Any]:
    """``dataset.json``, checked: a one-line error unless it is a dataset this rlhf can read."""
    try:
        info = json.loads((dataset / "dataset.json").read_text())
    except (OSError, ValueError):
        raise ConfigError(f"{dataset} is not an rlhf dataset (no readable dataset.json)") from None
    if info.get("format") != FORMAT:
        raise ConfigError(f"{dataset}: format {info.get('format')!r} is not {FORMAT!r}")
    if info.get("schema_version", 0) > SCHEMA_VERSION:
        raise ConfigError(
            f"{dataset} has schema {info['schema_version']}, newer than this rlhf reads"
            f" ({SCHEMA_VERSION}); upgrade rlhf"
        )
    return info


def read_table(dataset: Path, name: str) -> list[dict[str, Any]]:
    """The rows of ``name``.parquet as dicts."""
    return _pyarrow().parquet.read_table(dataset / f"{name}.parquet").to_pylist()


def open_segments(dataset: Path) -> Segments:
    """The dataset's segments, read on demand (schema 2) or all at once (schema 1)."""
    info = read_info(dataset)
    index = read_table(dataset, "segments")
    if info.get("schema_version", 1) >= 2:
        return SegmentReader(dataset, index)
    return V1Segments(index)


def read_segments(dataset: Path) -> dict[int, Segment]:
    """Every segment of a dataset by id, with the dtypes they were stored with."""
    segments = open_segments(dataset)
    return segments.get(list(segments.rows))


def import_dataset(dataset: Path, target: Path) -> DatasetCounts:
    """Write a dataset into ``target/labels.sqlite`` (a new store), ids unchanged.

    Unlabelled pairs come back with their videos pending, so ``rlhf serve`` renders them again.
    """
    info = read_info(dataset)
    store_path = target / "labels.sqlite"
    if store_path.exists():
        raise ConfigError(f"{store_path} exists; import into a new directory")
    segments = read_segments(dataset)
    pairs, labels = read_table(dataset, "pairs"), read_table(dataset, "labels")
    ratings = read_rating_rows(dataset)
    store = LabelStore(store_path)
    try:
        for key in CARRIED_META:
            if info.get(key) is not None:
                store.set_meta(key, info[key])
        with store._tx() as con:  # one transaction: a failed import leaves no rows behind
            con.executemany(
                "INSERT INTO segments(id, env_id, start_step, length, true_return, arrays)"
                " VALUES(?, ?, ?, ?, ?, ?)",
                [
                    (i, s.env_id, s.start_step, len(s), s.true_return, pack_segment(s))
                    for i, s in segments.items()
                ],
            )
            _insert_rows(con, "pairs", pairs)
            _insert_rows(con, "labels", labels)
            _insert_rows(con, "ratings", ratings)
    finally:
        store.close()
    return DatasetCounts(len(segments), len(pairs), len(labels), len(ratings))


def _insert_rows(con: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    known = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
    names = [k for k in rows[0] if k in known]
    marks = ", ".join("?" * len(names))
    con.executemany(
        f"INSERT INTO {table}({', '.join(names)}) VALUES({marks})",
        [tuple(row[k] for k in names) for row in rows],
    )


def preferences_of(
    labels: list[dict[str, Any]], pairs: dict[int, dict[str, Any]], segments: Segments
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
    segments = open_segments(dataset)
    pairs = {row["id"]: row for row in read_table(dataset, "pairs")}
    return preferences_of(read_table(dataset, "labels"), pairs, segments)


def read_ratings(dataset: Path) -> list[Rating]:
    """The dataset's graded clips as training data, oldest first (skips left out; none before
    schema 3)."""
    rows = read_rating_rows(dataset)
    if not rows:
        return []
    pairs = {row["id"]: row for row in read_table(dataset, "pairs")}
    return ratings_of(rows, pairs, open_segments(dataset))
