"""Video bookkeeping on pairs: the render worker claims pending pairs, the web page asks for ready ones."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import replace

from rlhf.store.connection import StoreConnections
from rlhf.store.meta import RETIRE_META
from rlhf.store.records import (
    VIDEO_FAILED,
    VIDEO_PENDING,
    VIDEO_READY,
    VIDEO_RENDERING,
    PairRecord,
    is_row_id,
    pair_record,
)

LIVE = (
    "iteration >= (SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) FROM meta"
    f" WHERE key='{RETIRE_META}')"
)
"""SQL condition on ``pairs``: not retired. Retirement is one threshold in ``meta``, as iterations
only grow: a pair asked for long ago judges a policy that no longer exists."""

FRESHEST_FIRST = "ORDER BY iteration DESC, id"
"""Newest iteration first (what the policy does now); within one, the order the selector ranked."""


class VideoQueue(StoreConnections):
    """The ``pairs.video_*`` columns: pending -> rendering -> ready | failed."""

    def claim_for_render(self, limit: int, keep_ready: int | None = None) -> list[PairRecord]:
        """Atomically move up to ``limit`` freshest pending, unlabelled, live pairs to 'rendering'.

        With ``keep_ready``, claim only as many as keep (ready + rendering) pairs at that number:
        the check and the claim share one transaction, so several render processes never claim
        more than the labeller needs between them.
        """
        with self._tx() as con:
            if keep_ready is not None:
                busy = con.execute(
                    "SELECT COUNT(*) FROM pairs WHERE (video_status=? OR (video_status=? AND"
                    f" {LIVE})) AND id NOT IN (SELECT pair_id FROM answered)",
                    (VIDEO_RENDERING, VIDEO_READY),
                ).fetchone()[0]
                limit = min(limit, keep_ready - int(busy))
            rows = con.execute(
                "SELECT * FROM pairs WHERE video_status=? AND id NOT IN "
                f"(SELECT pair_id FROM answered) AND {LIVE} {FRESHEST_FIRST} LIMIT ?",
                (VIDEO_PENDING, max(limit, 0)),
            ).fetchall()
            con.executemany(
                "UPDATE pairs SET video_status=?, video_updated_at=? WHERE id=?",
                [(VIDEO_RENDERING, time.time(), r["id"]) for r in rows],
            )
        return [replace(pair_record(r), video_status=VIDEO_RENDERING) for r in rows]

    def mark_video(
        self, pair_id: int, status: str, path: str | None = None, error: str | None = None
    ) -> None:
        """Record the outcome of a render: 'ready' with a path, 'failed' with an error, or 'pending'."""
        if status not in (VIDEO_PENDING, VIDEO_RENDERING, VIDEO_READY, VIDEO_FAILED):
            raise ValueError(f"unknown video status {status!r}")
        with self._tx() as con:
            con.execute(
                "UPDATE pairs SET video_status=?, video_path=?, video_error=?, video_updated_at=?"
                " WHERE id=?",
                (status, path, error, time.time(), pair_id),
            )

    def reset_stale_renders(self) -> int:
        """Return pairs left 'rendering' by a worker that died to 'pending'; returns how many."""
        with self._tx() as con:
            cur = con.execute(
                "UPDATE pairs SET video_status=? WHERE video_status=?",
                (VIDEO_PENDING, VIDEO_RENDERING),
            )
            return int(cur.rowcount)

    def retire_before(self, iteration: int) -> int:
        """Retire the unlabelled pairs asked for before ``iteration``; returns how many are newly
        retired. A page that already holds one may still answer it; no one is handed it again."""
        with self._tx() as con:
            before = self._retired(con)
            con.execute(
                "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET"
                " value=MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                (RETIRE_META, str(int(iteration))),
            )
            return self._retired(con) - before

    @staticmethod
    def _retired(con: sqlite3.Connection) -> int:
        """Unlabelled pairs retired before their video failed (those are counted as failed)."""
        return int(
            con.execute(
                f"SELECT COUNT(*) FROM pairs WHERE NOT ({LIVE}) AND video_status!=? AND id NOT IN"
                " (SELECT pair_id FROM answered)",
                (VIDEO_FAILED,),
            ).fetchone()[0]
        )

    def next_ready(self, exclude: Iterable[int] = (), limit: int = 1) -> list[PairRecord]:
        """Freshest live pairs with a ready video and no label, skipping the ids in ``exclude``."""
        # The ids travel as one JSON parameter, not one "?" each: however many there are, the
        # query stays within SQLite's limit on bound variables.
        rows = (
            self._con()
            .execute(
                "SELECT * FROM pairs WHERE video_status=? AND id NOT IN "
                "(SELECT pair_id FROM answered) AND id NOT IN (SELECT value FROM json_each(?))"
                f" AND {LIVE} {FRESHEST_FIRST} LIMIT ?",
                (VIDEO_READY, _id_list(exclude), limit),
            )
            .fetchall()
        )
        return [pair_record(r) for r in rows]

    def answer_times(self, limit: int) -> list[float]:
        """When the latest ``limit`` answers by people (pairs and grades) were stored, newest
        first: the render pool reads the labeller's pace from them."""
        # Each half walks its table's primary key backwards: a few rows read, however many stored.
        rows = (
            self._con()
            .execute(
                "SELECT created_at FROM (SELECT created_at FROM labels WHERE source='human'"
                " ORDER BY seq DESC LIMIT ?) UNION ALL SELECT created_at FROM (SELECT created_at"
                " FROM ratings WHERE source='human' ORDER BY seq DESC LIMIT ?)",
                (limit, limit),
            )
            .fetchall()
        )
        return sorted((float(r[0]) for r in rows), reverse=True)[:limit]

    def ready_among(self, pair_ids: Iterable[int]) -> set[int]:
        """The ids among ``pair_ids`` of pairs that could be handed out now (ready, unlabelled)."""
        rows = (
            self._con()
            .execute(
                "SELECT id FROM pairs WHERE id IN (SELECT value FROM json_each(?))"
                " AND video_status=? AND id NOT IN (SELECT pair_id FROM answered)",
                (_id_list(pair_ids), VIDEO_READY),
            )
            .fetchall()
        )
        return {int(r["id"]) for r in rows}


def _id_list(pair_ids: Iterable[int]) -> str:
    """A JSON array of the ids a row can have; anything else could match no row anyway."""
    return json.dumps(sorted({p for p in pair_ids if is_row_id(p)}))
