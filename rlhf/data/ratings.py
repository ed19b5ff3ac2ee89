"""The ratings of a dataset (schema 3): ``ratings.parquet``, and graded clips read back from it.

One row per answer to a clip to grade, as the store keeps it: ``seq``, ``pair_id`` (the rating
query: a row of ``pairs.parquet`` of kind "rating" whose left and right are the same segment),
``grade`` (0 = worst to ``levels - 1``; null: skipped), ``levels``, ``source``, ``labeller``,
``response_ms``, ``created_at`` (Unix time), and the clip's reference by (``episode``,
``start``, ``length``) into the Minari dataset, so this file and the Minari dataset alone are
enough to train on. The columns have fixed types (a file of skips alone still says ``grade`` is
an integer). Datasets of schema 1 and 2 have no ratings file: they read as having no ratings.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from rlhf.core.types import LabelMeta, Rating

FILE = "ratings.parquet"
COLUMNS = (
    ("seq", "int64"),
    ("pair_id", "int64"),
    ("grade", "int64"),
    ("levels", "int64"),
    ("source", "string"),
    ("labeller", "string"),
    ("response_ms", "int64"),
    ("created_at", "float64"),
    ("episode", "int64"),
    ("start", "int64"),
    ("length", "int64"),
)
"""ratings.parquet's columns and their Arrow types, in order."""


def store_ratings(con: sqlite3.Connection) -> list[dict[str, Any]]:
    """The ``ratings`` rows of a store opened read-only (none before store schema 2)."""
    found = con.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='ratings'"
    ).fetchone()
    if found is None:
        return []
    rows = con.execute("SELECT * FROM ratings ORDER BY seq").fetchall()
    return [{k: row[k] for k in row.keys()} for row in rows]  # noqa: SIM118


def with_refs(ratings: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each rating with its clip's (episode, start, length): the left side of its query."""
    refs = {p["id"]: (p["left_episode"], p["left_start"], p["left_length"]) for p in pairs}
    return [
        r | dict(zip(("episode", "start", "length"), refs[r["pair_id"]], strict=True))
        for r in ratings
    ]


def write_ratings(pa: Any, rows: list[dict[str, Any]], out: Path) -> None:
    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in COLUMNS])
    table = pa.Table.from_pylist([{k: r.get(k) for k, _ in COLUMNS} for r in rows], schema)
    pa.parquet.write_table(table, out / FILE)


def ratings_of(
    rows: list[dict[str, Any]], pairs: dict[int, dict[str, Any]], segments: Any
) -> list[Rating]:
    """``rows`` of ratings.parquet as training data, in order (skips left out); reads only
    their clips from ``segments`` (a :class:`rlhf.data.datasets.Segments`)."""
    graded = [r for r in rows if r["grade"] is not None]
    found = segments.get([pairs[r["pair_id"]]["left_segment"] for r in graded])
    return [
        Rating(
            found[pairs[r["pair_id"]]["left_segment"]],
            r["grade"],
            r["levels"],
            LabelMeta(pairs[r["pair_id"]].get("iteration", 0), r["created_at"], r["source"]),
        )
        for r in graded
    ]
