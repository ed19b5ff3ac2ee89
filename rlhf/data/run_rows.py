"""A run's label store read as plain rows, read-only: what ``rlhf export`` and ``--labels-from``
copy. The store is opened with ``mode=ro`` and never migrated, so reading leaves the run's file
byte for byte as it was (a store older than ratings reads as having none).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhf.config import ConfigError
from rlhf.core.types import Segment
from rlhf.data.ratings import store_ratings
from rlhf.store.records import unpack_segment

VIDEO_COLUMNS = {"video_status", "video_path", "video_error", "video_updated_at"}
"""Pair columns about this machine's video files: not exported (videos are rendered again)."""


@dataclass(frozen=True)
class RunRows:
    """A run's store as rows: meta, segments (id, segment), pairs, labels and ratings."""

    meta: dict[str, Any]
    segments: list[tuple[int, Segment]]
    pairs: list[dict[str, Any]]
    labels: list[dict[str, Any]]
    ratings: list[dict[str, Any]]


def read_run(run: Path) -> RunRows:
    """A run's store, read-only, as rows (a store older than ratings reads as having none)."""
    store = run / "labels.sqlite"
    if not store.is_file():
        raise ConfigError(f"{run} is not a run directory (no labels.sqlite in it)")
    try:
        con = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        con.row_factory = sqlite3.Row
        try:
            meta = {r["key"]: json.loads(r["value"]) for r in con.execute("SELECT * FROM meta")}
            rows = con.execute("SELECT id, env_id, start_step, arrays FROM segments ORDER BY id")
            segments = [
                (r["id"], unpack_segment(r["env_id"], r["start_step"], r["arrays"])) for r in rows
            ]
            pairs = _rows(con, "SELECT * FROM pairs ORDER BY id", drop=VIDEO_COLUMNS)
            labels = _rows(con, "SELECT * FROM labels ORDER BY seq", drop=set())
            ratings = store_ratings(con)
        finally:
            con.close()
    except (sqlite3.Error, ValueError, TypeError, KeyError) as exc:  # a damaged or foreign file
        gist = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
        raise ConfigError(f"{store} is not a readable label store ({gist})") from None
    # A store written before ratings (schema 1, read without migrating) has no kind: all pairs.
    pairs = [pair | {"kind": pair.get("kind", "pair")} for pair in pairs]
    return RunRows(meta, segments, pairs, labels, ratings)


def _rows(con: sqlite3.Connection, sql: str, drop: set[str]) -> list[dict[str, Any]]:
    # sqlite3.Row iterates over values, not names: .keys() is needed.
    return [{k: row[k] for k in row.keys() if k not in drop} for row in con.execute(sql)]  # noqa: SIM118
