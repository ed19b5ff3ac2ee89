"""Video bookkeeping on pairs: the render worker claims pending pairs, the web page asks for ready ones."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import replace

from rlhf.store.connection import StoreConnections
from rlhf.store.records import (
    VIDEO_FAILED,
    VIDEO_PENDING,
    VIDEO_READY,
    VIDEO_RENDERING,
    PairRecord,
    is_row_id,
    pair_record,
)


class VideoQueue(StoreConnections):
    """The ``pairs.video_*`` columns: pending -> rendering -> ready | failed."""

    def claim_for_render(self, limit: int) -> list[PairRecord]:
        """Atomically move up to ``limit`` oldest pending, unlabelled pairs to 'rendering'."""
        with self._tx() as con:
            rows = con.execute(
                "SELECT * FROM pairs WHERE video_status=? AND id NOT IN "
                "(SELECT pair_id FROM labels) ORDER BY id LIMIT ?",
                (VIDEO_PENDING, limit),
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

    def next_ready(self, exclude: Iterable[int] = (), limit: int = 1) -> list[PairRecord]:
        """Oldest pairs with a ready video and no label, skipping the ids in ``exclude``."""
        # The ids travel as one JSON parameter, not one "?" each: however many there are, the
        # query stays within SQLite's limit on bound variables.
        rows = (
            self._con()
            .execute(
                "SELECT * FROM pairs WHERE video_status=? AND id NOT IN "
                "(SELECT pair_id FROM labels) AND id NOT IN (SELECT value FROM json_each(?))"
                " ORDER BY id LIMIT ?",
                (VIDEO_READY, _id_list(exclude), limit),
            )
            .fetchall()
        )
        return [pair_record(r) for r in rows]

    def ready_among(self, pair_ids: Iterable[int]) -> set[int]:
        """The ids among ``pair_ids`` of pairs that could be handed out now (ready, unlabelled)."""
        rows = (
            self._con()
            .execute(
                "SELECT id FROM pairs WHERE id IN (SELECT value FROM json_each(?))"
                " AND video_status=? AND id NOT IN (SELECT pair_id FROM labels)",
                (_id_list(pair_ids), VIDEO_READY),
            )
            .fetchall()
        )
        return {int(r["id"]) for r in rows}


def _id_list(pair_ids: Iterable[int]) -> str:
    """A JSON array of the ids a row can have; anything else could match no row anyway."""
    return json.dumps(sorted({p for p in pair_ids if is_row_id(p)}))
