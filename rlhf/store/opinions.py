"""Named labellers in the store: who labelled what, second opinions, agreement.

``labels`` keeps one row per pair (what the reward trains on). A pair chosen for overlap
(``--overlap``) is shown once more to another named labeller; that answer is a second opinion,
kept in ``opinions`` and only used to measure how often two people agree.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rlhf.core.types import Answer
from rlhf.store.connection import StoreConnections
from rlhf.store.errors import LabelConflict, PairNotShown, UnknownPair
from rlhf.store.records import (
    VIDEO_READY,
    PairRecord,
    is_row_id,
    pair_record,
)

NOT_LABELLED = object()
"""What :meth:`OpinionStore.label_owner` returns for a pair with no label yet."""


@dataclass(frozen=True)
class LabellerStats:
    """Labels per named labeller and their agreement on the pairs both judged."""

    labels: tuple[tuple[str, int], ...]
    """(name, first labels + second opinions given), by name."""
    compared: int
    """Pairs with a label and a second opinion, neither a skip."""
    agreed: int
    """Of those, pairs where both gave the same answer."""

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.compared if self.compared else None


class OpinionStore(StoreConnections):
    """The ``opinions`` table and the queries named labellers need."""

    def label_owner(self, pair_id: int) -> object:
        """Who gave the pair's label (a name, or None for an anonymous or synthetic one), or
        :data:`NOT_LABELLED`."""
        if not is_row_id(pair_id):
            return NOT_LABELLED
        row = (
            self._con()
            .execute("SELECT labeller FROM labels WHERE pair_id=?", (pair_id,))
            .fetchone()
        )
        return NOT_LABELLED if row is None else row["labeller"]

    def add_opinion(
        self, pair_id: int, labeller: str, answer: Answer, response_ms: int | None = None
    ) -> bool:
        """Store a second opinion durably; True if new, False if the same one was there.

        Raises:
            UnknownPair, PairNotShown: as :meth:`add_label`.
            LabelConflict: this labeller already gave the pair a different second opinion.
        """
        if not is_row_id(pair_id):
            raise UnknownPair(pair_id)
        with self._tx() as con:
            pair = con.execute("SELECT video_status FROM pairs WHERE id=?", (pair_id,)).fetchone()
            if pair is None:
                raise UnknownPair(pair_id)
            if pair["video_status"] != VIDEO_READY:
                raise PairNotShown(pair_id, f"pair {pair_id} was never shown")
            row = con.execute(
                "SELECT answer FROM opinions WHERE pair_id=? AND labeller=?", (pair_id, labeller)
            ).fetchone()
            if row is not None:
                if row["answer"] == Answer(answer).value:
                    return False
                raise LabelConflict(
                    pair_id, f"pair {pair_id} already has your answer {row['answer']!r}"
                )
            con.execute(
                "INSERT INTO opinions(pair_id, labeller, answer, response_ms, created_at)"
                " VALUES(?, ?, ?, ?, ?)",
                (pair_id, labeller, Answer(answer).value, response_ms, time.time()),
            )
        return True

    def second_look_candidates(
        self, labeller: str, exclude: Iterable[int] = (), limit: int = 200
    ) -> list[PairRecord]:
        """Freshest ready pairs another named labeller labelled that have no second opinion
        yet (the caller keeps those chosen for overlap)."""
        rows = (
            self._con()
            .execute(
                "SELECT p.* FROM pairs p JOIN labels l ON l.pair_id = p.id WHERE"
                " l.labeller IS NOT NULL AND l.labeller != ? AND l.source = 'human'"
                " AND p.video_status = ? AND p.id NOT IN (SELECT pair_id FROM opinions)"
                " AND p.id NOT IN (SELECT value FROM json_each(?))"
                " ORDER BY p.iteration DESC, p.id LIMIT ?",
                (labeller, VIDEO_READY, json.dumps(sorted(set(exclude))), limit),
            )
            .fetchall()
        )
        return [pair_record(r) for r in rows]

    def undo_latest_of(self, labeller: str) -> tuple[int, dict[str, Any]] | None:
        """Remove ``labeller``'s most recent answer (label, grade or second opinion); returns
        (pair id, what was undone as the API reports it: ``answer`` and, for a grade, ``grade``)."""
        with self._tx() as con:
            candidates = []
            for table, cols in (("labels", "answer"), ("ratings", "grade")):
                row = con.execute(
                    f"SELECT seq, pair_id, {cols}, created_at FROM {table} WHERE source='human'"
                    " AND labeller=? ORDER BY created_at DESC, seq DESC LIMIT 1",
                    (labeller,),
                ).fetchone()
                if row is not None:
                    candidates.append((row["created_at"], table, row))
            row = con.execute(
                "SELECT pair_id, answer, created_at FROM opinions WHERE labeller=?"
                " ORDER BY created_at DESC LIMIT 1",
                (labeller,),
            ).fetchone()
            if row is not None:
                candidates.append((row["created_at"], "opinions", row))
            if not candidates:
                return None
            _, table, row = max(candidates, key=lambda c: c[0])
            if table == "opinions":
                con.execute(
                    "DELETE FROM opinions WHERE pair_id=? AND labeller=?",
                    (row["pair_id"], labeller),
                )
                return int(row["pair_id"]), {"answer": row["answer"]}
            con.execute(f"DELETE FROM {table} WHERE seq=?", (row["seq"],))
            if table == "ratings":
                grade = row["grade"]
                return int(row["pair_id"]), {
                    "answer": "grade" if grade is not None else "skip",
                    "grade": grade,
                }
            return int(row["pair_id"]), {"answer": row["answer"]}

    def answers_by(self, labeller: str) -> int:
        """Labels and second opinions ``labeller`` has given."""
        con = self._con()
        n = con.execute("SELECT COUNT(*) FROM labels WHERE labeller=?", (labeller,)).fetchone()[0]
        m = con.execute("SELECT COUNT(*) FROM opinions WHERE labeller=?", (labeller,)).fetchone()
        return int(n) + int(m[0])

    def labeller_stats(self) -> LabellerStats:
        con = self._con()
        rows = con.execute(
            "SELECT labeller, COUNT(*) FROM (SELECT labeller FROM labels WHERE labeller IS NOT"
            " NULL AND source='human' UNION ALL SELECT labeller FROM opinions)"
            " GROUP BY labeller ORDER BY labeller"
        ).fetchall()
        skip = Answer.SKIP.value
        compared, agreed = con.execute(
            "SELECT COUNT(*), COALESCE(SUM(o.answer = l.answer), 0) FROM opinions o"
            " JOIN labels l ON l.pair_id = o.pair_id WHERE o.answer != ? AND l.answer != ?"
            # After an undo, the second opinion's author may have given the label itself.
            " AND o.labeller IS NOT l.labeller",
            (skip, skip),
        ).fetchone()
        return LabellerStats(tuple((r[0], int(r[1])) for r in rows), int(compared), int(agreed))
