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

import contextlib
import json
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhf.config import ConfigError
from rlhf.core.types import Segment
from rlhf.data.minari_segments import MINARI_ID, MINARI_ROOT, write_segments
from rlhf.data.ratings import with_refs, write_ratings
from rlhf.data.reading import (
    FORMAT,
    SCHEMA_VERSION,
    Tables,
    pyarrow,
    read_info,
    read_segments,
    read_tables,
)
from rlhf.data.run_rows import RunRows, read_run
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


def export_run(run: Path, out: Path, row_group_size: int = 4096) -> DatasetCounts:
    """Write the run's segments, pairs, labels and ratings as a dataset in ``out`` (a new directory).

    ``labels.parquet`` is written in row groups of ``row_group_size`` labels: the unit a lazy
    reader (:mod:`rlhf.data.stream`) loads at a time.
    """
    pa = pyarrow()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            f"{out} exists and is not empty (or not a directory); name a new directory"
        )
    rows = read_run(run)
    made = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _write_dataset(pa, run, out, rows, row_group_size)
    except BaseException:  # a half-written dataset would refuse the retry ("not empty")
        for path in list(out.iterdir()) if out.is_dir() else []:  # it was empty before
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        for path in made:  # innermost first; only those this export made
            with contextlib.suppress(OSError):
                path.rmdir()
        raise


def _write_dataset(
    pa: Any, run: Path, out: Path, rows: RunRows, row_group_size: int
) -> DatasetCounts:
    meta, segments, pairs, labels = rows.meta, rows.segments, rows.pairs, rows.labels
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


def import_dataset(dataset: Path, target: Path) -> DatasetCounts:
    """Write a dataset into ``target/labels.sqlite`` (a new store), ids unchanged.

    Every file is read and checked before the store is made, and a failed import removes the
    store it began (and ``target`` if it made it), so a retry finds nothing in its way.
    Unlabelled pairs come back with their videos pending, so ``rlhf serve`` renders them again.
    """
    info = read_info(dataset)
    store_path = target / "labels.sqlite"
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{target} is not a directory; name a directory for labels.sqlite")
    if store_path.exists():
        raise ConfigError(f"{store_path} exists; import into a new directory")
    tables = read_tables(dataset)
    segments = read_segments(dataset, tables.index)
    made = [p for p in (target, *target.parents) if not p.exists()]
    try:
        _write_store(store_path, info, segments, tables)
    except BaseException:
        for path in (store_path, *(store_path.with_name(store_path.name + s) for s in SIDECARS)):
            path.unlink(missing_ok=True)
        for path in made:  # innermost first; only those this import made, and only if empty
            with contextlib.suppress(OSError):
                path.rmdir()
        raise
    return DatasetCounts(len(segments), len(tables.pairs), len(tables.labels), len(tables.ratings))


SIDECARS = ("-wal", "-shm", "-journal")
"""SQLite's files beside a store."""


def _write_store(
    store_path: Path, info: dict[str, Any], segments: dict[int, Segment], tables: Tables
) -> None:
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
            _insert_rows(con, "pairs", tables.pairs)
            _insert_rows(con, "labels", tables.labels)
            _insert_rows(con, "ratings", tables.ratings)
    finally:
        store.close()


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
