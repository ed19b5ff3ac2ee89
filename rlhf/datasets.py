"""Labelled data that outlives a run: ``rlhf export RUN OUT`` and ``rlhf import DATASET DIR``.

A dataset is a directory of Parquet files (read by pandas, polars, DuckDB, Arrow and Hugging
Face datasets alike) and one JSON file:

- ``dataset.json``: ``format`` ("rlhf-preferences"), ``schema_version``, the rlhf version that
  wrote it, the run's env id and env kwargs, and row counts.
- ``segments.parquet``: one row per segment: ``id``, ``env_id``, ``start_step``, ``absorbing``
  (padding steps after the episode ended), ``true_return``, and per step ``obs``, ``actions``,
  ``true_rewards``, ``qpos``, ``qvel`` (the MuJoCo state before each step, which replays it).
- ``pairs.parquet``: the run's pairs; ``left_segment``/``right_segment`` are segment ids.
- ``labels.parquet``: one row per answer: ``pair_id``, ``answer`` (left, right, equal, skip),
  ``source`` (human, synthetic), ``labeller``, ``response_ms``, ``created_at`` (Unix time).

Segments are referenced by id, as offline preference datasets reference their clips by index.
Reading never changes the run (its store is opened read-only); an import writes a fresh
``labels.sqlite`` with the same ids, so export -> import -> export gives the same files.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlhf.config import ConfigError
from rlhf.store import LabelStore
from rlhf.store.records import pack_segment, unpack_segment
from rlhf.types import Answer, Pair, Preference, Segment

FORMAT = "rlhf-preferences"
SCHEMA_VERSION = 1
ARRAYS = ("obs", "actions", "true_rewards", "qpos", "qvel")
INSTALL_HINT = "datasets need pyarrow, which is not installed: pip install 'rlhf[data]'"
VIDEO_COLUMNS = {"video_status", "video_path", "video_error", "video_updated_at"}
"""Pair columns about this machine's video files: not exported (videos are rendered again)."""


@dataclass(frozen=True)
class DatasetCounts:
    segments: int
    pairs: int
    labels: int


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return pyarrow


def export_run(run: Path, out: Path) -> DatasetCounts:
    """Write the run's segments, pairs and labels as a dataset in ``out`` (a new directory)."""
    pa = _pyarrow()
    store = run / "labels.sqlite"
    if not store.is_file():
        raise ConfigError(f"{run} is not a run directory (no labels.sqlite in it)")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not empty; name a new directory")
    con = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    con.row_factory = sqlite3.Row
    try:
        meta = {r["key"]: json.loads(r["value"]) for r in con.execute("SELECT * FROM meta")}
        segments = [
            (r["id"], unpack_segment(r["env_id"], r["start_step"], r["arrays"]))
            for r in con.execute("SELECT id, env_id, start_step, arrays FROM segments ORDER BY id")
        ]
        pairs = _rows(con, "SELECT * FROM pairs ORDER BY id", drop=VIDEO_COLUMNS)
        labels = _rows(con, "SELECT * FROM labels ORDER BY seq", drop=set())
    finally:
        con.close()
    out.mkdir(parents=True, exist_ok=True)
    pa.parquet.write_table(_segment_table(pa, segments), out / "segments.parquet")
    pa.parquet.write_table(pa.Table.from_pylist(pairs), out / "pairs.parquet")
    pa.parquet.write_table(pa.Table.from_pylist(labels), out / "labels.parquet")
    counts = DatasetCounts(len(segments), len(pairs), len(labels))
    info = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "rlhf_version": _version(),
        "run_name": meta.get("run_name", run.name),
        "env_id": meta.get("env_id"),
        "env_kwargs": meta.get("env_kwargs", {}),
        "counts": counts.__dict__,
    }
    (out / "dataset.json").write_text(json.dumps(info, indent=2) + "\n")
    return counts


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rlhf")
    except PackageNotFoundError:
        return "unknown"


def _rows(con: sqlite3.Connection, sql: str, drop: set[str]) -> list[dict[str, Any]]:
    # sqlite3.Row iterates over values, not names: .keys() is needed.
    return [{k: row[k] for k in row.keys() if k not in drop} for row in con.execute(sql)]  # noqa: SIM118


def _segment_table(pa: Any, segments: list[tuple[int, Segment]]) -> Any:
    columns: dict[str, Any] = {
        "id": pa.array([i for i, _ in segments], pa.int64()),
        "env_id": pa.array([s.env_id for _, s in segments], pa.string()),
        "start_step": pa.array([s.start_step for _, s in segments], pa.int64()),
        "absorbing": pa.array([s.absorbing for _, s in segments], pa.int32()),
        "true_return": pa.array([s.true_return for _, s in segments], pa.float64()),
    }
    for name in ARRAYS:
        # Exact dtypes (float32 obs, float64 physics state), so a round trip is bit for bit.
        columns[name] = pa.array([getattr(s, name).tolist() for _, s in segments])
        dtype = pa.float64() if name in ("qpos", "qvel") else pa.float32()
        inner = pa.list_(dtype) if name == "true_rewards" else pa.list_(pa.list_(dtype))
        columns[name] = columns[name].cast(inner)
    return pa.table(columns)


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


def read_segments(dataset: Path) -> dict[int, Segment]:
    """Every segment of a dataset by id, with the dtypes they were stored with."""
    pa = _pyarrow()
    table = pa.parquet.read_table(dataset / "segments.parquet").to_pylist()
    out = {}
    for row in table:
        arrays = {
            name: np.asarray(row[name], np.float64 if name in ("qpos", "qvel") else np.float32)
            for name in ARRAYS
        }
        for name in ("qpos", "qvel"):  # an env without physics state has (T, 0) arrays
            arrays[name] = arrays[name].reshape(len(arrays["obs"]), -1)
        out[row["id"]] = Segment(
            env_id=row["env_id"], start_step=row["start_step"], absorbing=row["absorbing"], **arrays
        )
    return out


def import_dataset(dataset: Path, target: Path) -> DatasetCounts:
    """Write a dataset into ``target/labels.sqlite`` (a new store), ids unchanged.

    Unlabelled pairs come back with their videos pending, so ``rlhf serve`` renders them again.
    """
    pa = _pyarrow()
    info = read_info(dataset)
    store_path = target / "labels.sqlite"
    if store_path.exists():
        raise ConfigError(f"{store_path} exists; import into a new directory")
    segments = read_segments(dataset)
    pairs = pa.parquet.read_table(dataset / "pairs.parquet").to_pylist()
    labels = pa.parquet.read_table(dataset / "labels.parquet").to_pylist()
    store = LabelStore(store_path)
    try:
        for key in ("run_name", "env_id", "env_kwargs"):
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
    finally:
        store.close()
    return DatasetCounts(len(segments), len(pairs), len(labels))


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


def read_preferences(dataset: Path) -> list[Preference]:
    """The dataset's labels as training data, oldest first (skips left out)."""
    pa = _pyarrow()
    read_info(dataset)
    segments = read_segments(dataset)
    pairs = {row["id"]: row for row in pa.parquet.read_table(dataset / "pairs.parquet").to_pylist()}
    prefs = []
    for label in pa.parquet.read_table(dataset / "labels.parquet").to_pylist():
        mu = Answer(label["answer"]).mu
        if mu is None:
            continue
        pair = pairs[label["pair_id"]]
        prefs.append(
            Preference(Pair(segments[pair["left_segment"]], segments[pair["right_segment"]]), mu)
        )
    return prefs
