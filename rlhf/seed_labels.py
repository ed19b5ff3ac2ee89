"""``rlhf train --labels-from DATASET_OR_RUN``: a new run starts with an earlier run's labels.

The labelled pairs of the source (a run directory, or a dataset written by ``rlhf export``) are
copied into the new run's ``labels.sqlite`` with fresh ids: segments, pairs (no video: nobody is
asked about them again) and labels with source ``"import"`` (their labeller, answer time and
response time kept). The weighted sampler of reward training treats that source as the bucket of
imported demonstrations. The store's meta key ``labels_from`` records what was copied, so a
resumed run does not copy twice and the label schedule counts only the labels asked in this run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rlhf.config import ConfigError, flag
from rlhf.store import LabelStore
from rlhf.types import Segment

IMPORT_SOURCE = "import"
META_KEY = "labels_from"


def imported_pairs(store: LabelStore) -> int:
    """Pairs in ``store`` that were copied from ``--labels-from`` (not asked in this run)."""
    return int(store.get_meta(META_KEY, {}).get("pairs", 0))


def _source_env(path: Path) -> str | None:
    from rlhf.datasets import read_info, read_run

    if (path / "labels.sqlite").is_file():
        return read_run(path)[0].get("env_id")
    if (path / "dataset.json").is_file():
        return read_info(path).get("env_id")
    raise ConfigError(
        f"{flag('labels_from')} {path} is neither a run directory (labels.sqlite) nor a dataset"
        " (dataset.json)"
    )


def check_labels_source(path: Path, env_id: str) -> None:
    """One line naming the flag unless ``path`` holds labels for ``env_id``."""
    found = _source_env(path)
    if found is not None and found != env_id:
        raise ConfigError(
            f"{flag('labels_from')} {path} holds labels for {found}, not {flag('env_id')} {env_id}"
        )


def _read(path: Path) -> tuple[dict[int, Segment], list[dict[str, Any]], list[dict[str, Any]]]:
    from rlhf.datasets import read_run, read_segments, read_table

    if (path / "labels.sqlite").is_file():
        _, segments, pairs, labels = read_run(path)
        return dict(segments), pairs, labels
    return read_segments(path), read_table(path, "pairs"), read_table(path, "labels")


def seed_labels(store: LabelStore, path: Path, env_id: str) -> int:
    """Copy the labels of ``path`` into ``store`` once; returns the labels copied (0 if done before)."""
    if store.get_meta(META_KEY) is not None:
        return 0
    check_labels_source(path, env_id)
    segments, pairs, labels = _read(path)
    pair_rows = {row["id"]: row for row in pairs}
    new_segment: dict[int, int] = {}
    with store._tx() as con:  # one transaction: all of them or none
        for label in labels:
            pair = pair_rows[label["pair_id"]]
            ids = []
            for side in ("left_segment", "right_segment"):
                if pair[side] not in new_segment:
                    new_segment[pair[side]] = store._insert_segment(con, segments[pair[side]])
                ids.append(new_segment[pair[side]])
            cur = con.execute(
                "INSERT INTO pairs(left_segment, right_segment, swapped, iteration, created_at,"
                " video_status) VALUES(?, ?, ?, 0, ?, 'none')",
                (*ids, pair.get("swapped", 0), pair["created_at"]),
            )
            con.execute(
                "INSERT INTO labels(pair_id, answer, source, labeller, response_ms, created_at)"
                " VALUES(?, ?, ?, ?, ?, ?)",
                (
                    cur.lastrowid,
                    label["answer"],
                    IMPORT_SOURCE,
                    label.get("labeller"),
                    label.get("response_ms"),
                    label["created_at"],
                ),
            )
        record = {"path": str(path), "pairs": len(labels), "at": time.time()}
        con.execute("INSERT INTO meta(key, value) VALUES(?, ?)", (META_KEY, json.dumps(record)))
    return len(labels)
