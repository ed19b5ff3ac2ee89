"""``rlhf train --labels-from DATASET_OR_RUN``: a new run starts with an earlier run's labels.

The labelled pairs and the graded clips of the source (a run directory, or a dataset written by
``rlhf export``) are copied into the new run's ``labels.sqlite`` with fresh ids: segments, pairs
and rating queries (no video: nobody is asked about them again), labels and ratings with source
``"import"`` (their labeller, answer time and response time kept; a rating keeps its grade and
its scale's number of levels). The weighted sampler of reward training treats that source as the bucket of
imported demonstrations. The store's meta key ``labels_from`` records what was copied, so a
resumed run does not copy twice and the label schedule counts only the labels asked in this run.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhf.config import Config, ConfigError, flag
from rlhf.core.types import Segment
from rlhf.store import RATING, LabelStore
from rlhf.store.meta import ENV_ID_META, LABELS_FROM_META
from rlhf.store.protocols import MetaReader
from rlhf.store.records import insert_segment

IMPORT_SOURCE = "import"


def imported_pairs(store: MetaReader) -> int:
    """Pairs in ``store`` that were copied from ``--labels-from`` (not asked in this run)."""
    return int(store.get_meta(LABELS_FROM_META, {}).get("pairs", 0))


Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class LabelsSource:
    """What ``--labels-from`` names, read once (:func:`read_labels_source`): checked before the run
    directory exists, copied into the new run's store when it opens."""

    path: Path
    env_id: str | None
    """The env the labels are of (None: the source does not say)."""
    segments: dict[int, Segment]
    pairs: Rows
    labels: Rows
    ratings: Rows

    @property
    def scales(self) -> set[int]:
        """The numbers of levels its ratings are graded on."""
        return {r["levels"] for r in self.ratings}


def read_labels_source(path: Path) -> LabelsSource:
    """Segments by id, pairs, labels and ratings of a run or a dataset, and its env id."""
    from rlhf.data.reading import read_info, read_segments, read_tables
    from rlhf.data.run_rows import read_run

    if (path / "labels.sqlite").is_file():
        rows = read_run(path)
        env_id = rows.meta.get(ENV_ID_META)
        return LabelsSource(
            path, env_id, dict(rows.segments), rows.pairs, rows.labels, rows.ratings
        )
    if (path / "dataset.json").is_file():
        tables = read_tables(path)  # every file and reference checked, before the run starts
        env_id = read_info(path).get("env_id")
        segments = read_segments(path, tables.index)
        return LabelsSource(path, env_id, segments, tables.pairs, tables.labels, tables.ratings)
    raise ConfigError(
        f"{flag('labels_from')} {path} is neither a run directory (labels.sqlite) nor a dataset"
        " (dataset.json)"
    )


def rating_levels(cfg: Config) -> int | None:
    """The levels a run grades clips on, None if it asks no ratings (any imported scale goes)."""
    return None if cfg.feedback_kind == "pairs" else cfg.rating_scale().levels


def check_labels_source(source: LabelsSource, env_id: str, levels: int | None = None) -> None:
    """One line naming the flag unless ``source`` holds labels for ``env_id`` (and, with
    ``levels``, ratings on a scale of that many levels only: grades of two scales do not mix)."""
    path, found, scales = source.path, source.env_id, source.scales
    if found is not None and found != env_id:
        raise ConfigError(
            f"{flag('labels_from')} {path} holds labels for {found}, not {flag('env_id')} {env_id}"
        )
    if levels is not None and scales - {levels}:
        raise ConfigError(
            f"{flag('labels_from')} {path} holds ratings on a scale of"
            f" {'/'.join(map(str, sorted(scales)))} levels, not the {levels} of"
            f" {flag('ratings.levels')}"
        )


def seed_labels(
    store: LabelStore, source: LabelsSource, env_id: str, levels: int | None = None
) -> int:
    """Copy the labels and ratings of ``source`` into ``store`` once; returns the answers copied
    (0 if done before)."""
    if store.get_meta(LABELS_FROM_META) is not None:
        return 0
    check_labels_source(source, env_id, levels)
    path, segments, pairs = source.path, source.segments, source.pairs
    labels, ratings = source.labels, source.ratings
    pair_rows = {row["id"]: row for row in pairs}
    new_segment: dict[int, int] = {}

    def segment(con: sqlite3.Connection, old: int) -> int:
        if old not in new_segment:
            new_segment[old] = insert_segment(con, segments[old])
        return new_segment[old]

    with store._tx() as con:  # one transaction: all of them or none
        for label in labels:
            pair = pair_rows[label["pair_id"]]
            ids = [segment(con, pair[side]) for side in ("left_segment", "right_segment")]
            cur = con.execute(
                "INSERT INTO pairs(left_segment, right_segment, swapped, iteration, created_at,"
                " video_status) VALUES(?, ?, ?, 0, ?, 'none')",
                (*ids, pair.get("swapped", 0), pair["created_at"]),
            )
            _copy_answer(con, "labels", ("answer",), label, cur.lastrowid)
        for rating in ratings:
            query = pair_rows[rating["pair_id"]]
            clip = segment(con, query["left_segment"])
            cur = con.execute(
                "INSERT INTO pairs(left_segment, right_segment, iteration, created_at,"
                " video_status, kind) VALUES(?, ?, 0, ?, 'none', ?)",
                (clip, clip, query["created_at"], RATING),
            )
            _copy_answer(con, "ratings", ("grade", "levels"), rating, cur.lastrowid)
        copied = len(labels) + len(ratings)
        record = {"path": str(path), "pairs": copied, "ratings": len(ratings), "at": time.time()}
        con.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?)", (LABELS_FROM_META, json.dumps(record))
        )
    return copied


def _copy_answer(
    con: sqlite3.Connection,
    table: str,
    own: tuple[str, ...],
    row: dict[str, Any],
    query_id: int | None,
) -> None:
    """One label or rating (its ``own`` columns kept), now of source "import", for the new
    query ``query_id``."""
    con.execute(
        f"INSERT INTO {table}(pair_id, {', '.join(own)}, source, labeller, response_ms,"
        " created_at)"
        f" VALUES(?, {', '.join('?' * len(own))}, ?, ?, ?, ?)",
        (
            query_id,
            *(row[name] for name in own),
            IMPORT_SOURCE,
            row.get("labeller"),
            row.get("response_ms"),
            row["created_at"],
        ),
    )
