"""Rating queries (one clip to grade) and their answers, durable and idempotent like labels.

A rating query is a ``pairs`` row of kind 'rating' whose left and right are the same segment:
the render workers, leases, retirement and ``next_ready`` treat it as any query. A rating is
written through the same group commit as labels (one fsync shared by concurrent writers, each
answer in its own savepoint), so it is on disk before :meth:`RatingWriter.add_rating` returns.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from rlhf.core.types import Segment
from rlhf.store.errors import LabelConflict, PairNotShown, UnknownPair, WrongKind
from rlhf.store.labels import LabelWriter, _PendingLabel
from rlhf.store.records import (
    VIDEO_READY,
    LabelRecord,
    RatingRecord,
    insert_segment,
    is_row_id,
    label_record,
    rating_record,
)

RATING = "rating"
"""``pairs.kind`` of a clip to grade."""


class RatingWriter(LabelWriter):
    """The ``ratings`` table and the rating queries in ``pairs``."""

    def add_rating_queries(self, segments: list[Segment], iteration: int = 0) -> list[int]:
        """Store clips to be graded by people (video pending); returns their query ids."""
        now = time.time()
        with self._tx() as con:
            return [self._insert_query(con, s, iteration, now, "pending") for s in segments]

    def add_rated_clips(
        self,
        segments: list[Segment],
        grades: list[int | None],
        levels: int,
        source: str,
        iteration: int = 0,
    ) -> list[int]:
        """Store clips and their grades (None: skipped) in one transaction (synthetic teachers)."""
        if len(grades) != len(segments):
            raise ValueError("grades must have one entry per segment")
        now = time.time()
        ids: list[int] = []
        with self._tx() as con:
            for segment, grade in zip(segments, grades, strict=True):
                query_id = self._insert_query(con, segment, iteration, now, "none")
                con.execute(
                    "INSERT INTO ratings(pair_id, grade, levels, source, created_at)"
                    " VALUES(?, ?, ?, ?, ?)",
                    (query_id, _checked_grade(grade, levels), levels, source, now),
                )
                ids.append(query_id)
        return ids

    def _insert_query(
        self, con: sqlite3.Connection, segment: Segment, iteration: int, now: float, video: str
    ) -> int:
        seg_id = insert_segment(con, segment)
        cur = con.execute(
            "INSERT INTO pairs(left_segment, right_segment, iteration, created_at, video_status,"
            " kind) VALUES(?, ?, ?, ?, ?, ?)",
            (seg_id, seg_id, iteration, now, video, RATING),
        )
        return int(cur.lastrowid)

    def add_rating(
        self,
        query_id: int,
        grade: int | None,
        levels: int,
        source: str = "human",
        labeller: str | None = None,
        response_ms: int | None = None,
    ) -> bool:
        """Store a grade (None: skip) durably. True if new, False if the same one was there.

        Raises:
            UnknownPair: no such query.
            WrongKind: the query is a pair (it takes a preference, not a grade).
            PairNotShown: its video was never ready.
            LabelConflict: it already has a different grade.
            ValueError: the grade is not on the scale.
        """
        if not is_row_id(query_id):
            raise UnknownPair(query_id, rating=True)
        args = (query_id, _checked_grade(grade, levels), levels, source, labeller, response_ms)
        return self._group_commit(_PendingLabel(args, self._insert_rating))

    @staticmethod
    def _insert_rating(
        con: sqlite3.Connection,
        query_id: int,
        grade: int | None,
        levels: int,
        source: str,
        labeller: str | None,
        response_ms: int | None,
    ) -> bool:
        row = con.execute("SELECT video_status, kind FROM pairs WHERE id=?", (query_id,)).fetchone()
        if row is None:
            raise UnknownPair(query_id, rating=True)
        if row["kind"] != RATING:
            raise WrongKind(
                query_id,
                f"query {query_id} is a pair: it takes a preference, not a grade",
                rating=True,
            )
        if row["video_status"] != VIDEO_READY:
            raise PairNotShown(
                query_id,
                f"clip {query_id} was never shown (video {row['video_status']})",
                rating=True,
            )
        old = con.execute("SELECT grade FROM ratings WHERE pair_id=?", (query_id,)).fetchone()
        if old is not None:
            if old["grade"] == grade:
                return False
            raise LabelConflict(
                query_id, f"clip {query_id} is already graded {old['grade']!r}", rating=True
            )
        con.execute(
            "INSERT INTO ratings(pair_id, grade, levels, source, labeller, response_ms,"
            " created_at) VALUES(?, ?, ?, ?, ?, ?, ?)",
            (query_id, grade, levels, source, labeller, response_ms, time.time()),
        )
        return True

    def ratings(self) -> list[RatingRecord]:
        """Every stored rating, oldest first."""
        rows = self._con().execute("SELECT * FROM ratings ORDER BY seq").fetchall()
        return [rating_record(r) for r in rows]

    def undo_last(
        self, source: str = "human", labeller: str | None = None
    ) -> LabelRecord | RatingRecord | None:
        """Remove the most recent label or rating from ``source`` (and ``labeller``); returns it."""
        with self._tx() as con:
            where, args = "source=?", [source]
            if labeller is not None:
                where += " AND labeller=?"
                args.append(labeller)
            rows: list[tuple[str, Any]] = []
            for table in ("labels", "ratings"):
                row = con.execute(
                    f"SELECT * FROM {table} WHERE {where} ORDER BY created_at DESC, seq DESC"
                    " LIMIT 1",
                    args,
                ).fetchone()
                if row is not None:
                    rows.append((table, row))
            if not rows:
                return None
            table, row = max(rows, key=lambda tr: tr[1]["created_at"])
            con.execute(f"DELETE FROM {table} WHERE seq=?", (row["seq"],))
        return label_record(row) if table == "labels" else rating_record(row)


def _checked_grade(grade: int | None, levels: int) -> int | None:
    if grade is None:
        return None
    if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade < levels:
        raise ValueError(f"grade must be an integer in [0, {levels}), got {grade!r}")
    return grade
