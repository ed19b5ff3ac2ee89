"""The agent in view: clips of the current policy and the learning curve the page draws.

The trainer adds a clip (a segment of its latest rollout, with the recorded physics states)
every few iterations; the render workers draw the newest one when no pair is waiting (older
pending clips are dropped: only what the policy does now is worth a render). The curve keeps
one point per iteration, thinned so the table stays small however long the run.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from rlhf.core.types import Segment
from rlhf.store.connection import StoreConnections
from rlhf.store.records import (
    VIDEO_FAILED,
    VIDEO_PENDING,
    VIDEO_READY,
    VIDEO_RENDERING,
    insert_segment,
)

MAX_CURVE_POINTS = 400
"""Beyond this the older half of the curve is thinned to every other point."""

VIDEO_DROPPED = "dropped"
"""A pending clip that a newer one made stale before it was rendered."""


@dataclass(frozen=True)
class PolicyClip:
    id: int
    segment_id: int
    iteration: int
    env_step: int
    video_status: str
    video_path: str | None


@dataclass(frozen=True)
class CurvePoint:
    iteration: int
    env_step: int
    true_return: float | None
    predicted_return: float | None
    accuracy: float | None


def _clip(row) -> PolicyClip:
    return PolicyClip(
        int(row["id"]), int(row["segment_id"]), int(row["iteration"]), int(row["env_step"]),
        row["video_status"], row["video_path"],
    )  # fmt: skip


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


class PolicyStore(StoreConnections):
    """The ``policy_clips`` and ``curve`` tables."""

    def add_policy_clip(self, segment: Segment, iteration: int, env_step: int) -> int:
        with self._tx() as con:
            cur = con.execute(
                "INSERT INTO policy_clips(segment_id, iteration, env_step, created_at)"
                " VALUES(?, ?, ?, ?)",
                (insert_segment(con, segment), iteration, env_step, time.time()),
            )
            return int(cur.lastrowid)

    def claim_policy_clip(self) -> PolicyClip | None:
        """Move the newest pending clip to 'rendering' (older pending ones are dropped)."""
        with self._tx() as con:
            row = con.execute(
                "SELECT * FROM policy_clips WHERE video_status=? ORDER BY id DESC LIMIT 1",
                (VIDEO_PENDING,),
            ).fetchone()
            if row is None:
                return None
            con.execute(
                "UPDATE policy_clips SET video_status=? WHERE video_status=? AND id<?",
                (VIDEO_DROPPED, VIDEO_PENDING, row["id"]),
            )
            con.execute(
                "UPDATE policy_clips SET video_status=? WHERE id=?", (VIDEO_RENDERING, row["id"])
            )
        return _clip(row)

    def mark_policy_clip(
        self, clip_id: int, status: str, path: str | None = None, error: str | None = None
    ) -> None:
        if status not in (VIDEO_PENDING, VIDEO_READY, VIDEO_FAILED):
            raise ValueError(f"unknown clip status {status!r}")
        with self._tx() as con:
            con.execute(
                "UPDATE policy_clips SET video_status=?, video_path=?, video_error=? WHERE id=?",
                (status, path, error, clip_id),
            )

    def reset_stale_policy_clips(self) -> None:
        """Clips a dead worker left 'rendering' go back to 'pending'."""
        with self._tx() as con:
            con.execute(
                "UPDATE policy_clips SET video_status=? WHERE video_status=?",
                (VIDEO_PENDING, VIDEO_RENDERING),
            )

    def policy_clips(self, ready_after: int = 0) -> list[PolicyClip]:
        """Ready clips with an id above ``ready_after``, oldest first."""
        rows = (
            self._con()
            .execute(
                "SELECT * FROM policy_clips WHERE video_status=? AND id>? ORDER BY id",
                (VIDEO_READY, ready_after),
            )
            .fetchall()
        )
        return [_clip(r) for r in rows]

    def policy_clips_in_flight(self) -> int:
        """Clips queued or being drawn (not yet ready, failed or dropped)."""
        row = (
            self._con()
            .execute(
                "SELECT COUNT(*) FROM policy_clips WHERE video_status IN (?, ?)",
                (VIDEO_PENDING, VIDEO_RENDERING),
            )
            .fetchone()
        )
        return int(row[0])

    def policy_clip_error(self) -> str | None:
        """Why the newest clip that failed to render failed (None: none failed)."""
        row = (
            self._con()
            .execute(
                "SELECT video_error FROM policy_clips WHERE video_status=? ORDER BY id DESC LIMIT 1",
                (VIDEO_FAILED,),
            )
            .fetchone()
        )
        return None if row is None else (row[0] or "no reason recorded")

    def latest_policy_clip(self) -> PolicyClip | None:
        row = (
            self._con()
            .execute(
                "SELECT * FROM policy_clips WHERE video_status=? ORDER BY id DESC LIMIT 1",
                (VIDEO_READY,),
            )
            .fetchone()
        )
        return None if row is None else _clip(row)

    def policy_clip(self, clip_id: int) -> PolicyClip | None:
        row = self._con().execute("SELECT * FROM policy_clips WHERE id=?", (clip_id,)).fetchone()
        return None if row is None else _clip(row)

    def add_curve_point(self, point: CurvePoint) -> None:
        """Record one iteration's point; the older half is thinned past :data:`MAX_CURVE_POINTS`."""
        with self._tx() as con:
            con.execute(
                "INSERT OR REPLACE INTO curve(iteration, env_step, true_return, predicted_return,"
                " accuracy) VALUES(?, ?, ?, ?, ?)",
                (
                    point.iteration,
                    point.env_step,
                    _finite(point.true_return),
                    _finite(point.predicted_return),
                    _finite(point.accuracy),
                ),
            )
            count = con.execute("SELECT COUNT(*) FROM curve").fetchone()[0]
            if count > MAX_CURVE_POINTS:
                # Every other point of the older half goes: recent points stay dense.
                con.execute(
                    "DELETE FROM curve WHERE iteration IN (SELECT iteration FROM (SELECT"
                    " iteration, ROW_NUMBER() OVER (ORDER BY iteration) AS n FROM curve)"
                    " WHERE n % 2 = 0 AND n <= ?)",
                    (count // 2,),
                )

    def curve(self) -> list[CurvePoint]:
        rows = self._con().execute("SELECT * FROM curve ORDER BY iteration").fetchall()
        return [
            CurvePoint(
                int(r["iteration"]),
                int(r["env_step"]),
                r["true_return"],
                r["predicted_return"],
                r["accuracy"],
            )
            for r in rows
        ]
