"""Video bookkeeping on pairs: the render worker claims pending pairs, the web page asks for ready ones."""

from __future__ import annotations

import time
from dataclasses import replace

from rlhf.store.connection import StoreConnections
from rlhf.store.records import (
    VIDEO_FAILED,
    VIDEO_PENDING,
    VIDEO_READY,
    VIDEO_RENDERING,
    PairRecord,
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

    def next_ready(self, exclude: tuple[int, ...] = (), limit: int = 1) -> list[PairRecord]:
        """Oldest pairs with a ready video and no label, skipping the ids in ``exclude``."""
        # No clause at all for an empty exclude: ``id NOT IN (NULL)`` is NULL, which matches nothing.
        skip = f" AND id NOT IN ({','.join('?' * len(exclude))})" if exclude else ""
        rows = (
            self._con()
            .execute(
                "SELECT * FROM pairs WHERE video_status=? AND id NOT IN "
                f"(SELECT pair_id FROM labels){skip} ORDER BY id LIMIT ?",
                (VIDEO_READY, *exclude, limit),
            )
            .fetchall()
        )
        return [pair_record(r) for r in rows]
