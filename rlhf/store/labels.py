"""Writing labels: a group commit shared by concurrent writers, each label isolated in its batch.

Labels from many web threads arrive at once. Whoever holds the write lock commits every queued
label in one transaction (one fsync), so concurrent writers share the price of durability. Each
label runs inside its own savepoint: whatever is wrong with one answer (an unknown pair, a
conflict, a pair never shown, or a bug) undoes that answer alone, never the others committed
with it, so no client's input can fail another client's label.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlhf.core.types import Answer
from rlhf.store.errors import LabelConflict, PairNotShown, UnknownPair, WrongKind
from rlhf.store.records import (
    VIDEO_READY,
    LabelRecord,
    is_row_id,
    label_record,
)
from rlhf.store.videos import VideoQueue


@dataclass
class _PendingLabel:
    """One add_label call waiting for the group commit that will carry it."""

    args: tuple[Any, ...]
    insert: Callable[..., bool] | None = None
    """Writes the answer inside the batch's transaction: (connection, *args) -> new?
    (None: a label, written by ``_insert_label``)."""
    done: threading.Event = field(default_factory=threading.Event)
    result: bool | None = None
    error: BaseException | None = None


class LabelWriter(VideoQueue):
    """The ``labels`` table: add (durably, idempotently), undo, list."""

    def __init__(self, path: str | Path) -> None:
        self._queue_lock = threading.Lock()
        self._label_queue: list[_PendingLabel] = []
        super().__init__(path)

    def add_label(
        self,
        pair_id: int,
        answer: Answer,
        source: str = "human",
        labeller: str | None = None,
        response_ms: int | None = None,
    ) -> bool:
        """Store a label durably. Returns True if new, False if the same answer was already there.

        Only a pair whose video is ready can be labelled: one never shown to anybody cannot have
        been judged (synthetic teachers store pairs and labels together, see ``add_pairs_with_labels``).

        Raises:
            UnknownPair: no such pair (also for ids no SQLite row can have).
            PairNotShown: the pair's video was never ready.
            LabelConflict: the pair already has a different answer.
            WrongKind: the query is a clip to grade, not a pair.
        """
        if not is_row_id(pair_id):
            raise UnknownPair(pair_id)
        args = (pair_id, Answer(answer), source, labeller, response_ms)
        return self._group_commit(_PendingLabel(args, self._insert_label))

    def _group_commit(self, item: _PendingLabel) -> bool:
        """Queue ``item`` and return once a committed transaction holds it (or raise its error)."""
        with self._queue_lock:
            self._label_queue.append(item)
        # A label is reported only once the transaction holding it has committed.
        while not item.done.is_set():
            with self._write_lock:
                if item.done.is_set():
                    break
                with self._queue_lock:
                    batch, self._label_queue = self._label_queue, []
                self._commit_labels(batch)
        if item.error is not None:
            raise item.error
        return bool(item.result)

    def _commit_labels(self, batch: list[_PendingLabel]) -> None:
        try:
            with self._tx() as con:
                for item in batch:
                    con.execute("SAVEPOINT one_label")
                    try:
                        item.result = (item.insert or self._insert_label)(con, *item.args)
                    except Exception as exc:  # this answer alone is undone
                        con.execute("ROLLBACK TO one_label")
                        item.error = exc
                    finally:
                        con.execute("RELEASE one_label")
        except BaseException as exc:  # the transaction failed: nothing in it is durable
            for item in batch:
                item.result, item.error = None, exc
            raise
        finally:
            for item in batch:
                item.done.set()

    @staticmethod
    def _insert_label(
        con: sqlite3.Connection,
        pair_id: int,
        answer: Answer,
        source: str,
        labeller: str | None,
        response_ms: int | None,
    ) -> bool:
        pair = con.execute("SELECT video_status, kind FROM pairs WHERE id=?", (pair_id,)).fetchone()
        if pair is None:
            raise UnknownPair(pair_id)
        if pair["kind"] != "pair":
            raise WrongKind(pair_id, f"query {pair_id} asks for a grade, not a preference")
        if pair["video_status"] != VIDEO_READY:  # 'ready' is final: it never goes back
            raise PairNotShown(
                pair_id, f"pair {pair_id} was never shown (video {pair['video_status']})"
            )
        row = con.execute("SELECT answer FROM labels WHERE pair_id=?", (pair_id,)).fetchone()
        if row is not None:
            if row["answer"] == answer.value:
                return False
            raise LabelConflict(pair_id, f"pair {pair_id} is already labelled {row['answer']!r}")
        con.execute(
            "INSERT INTO labels(pair_id, answer, source, labeller, response_ms, created_at)"
            " VALUES(?, ?, ?, ?, ?, ?)",
            (pair_id, answer.value, source, labeller, response_ms, time.time()),
        )
        return True

    def undo_last(self, source: str = "human", labeller: str | None = None) -> LabelRecord | None:
        """Remove the most recent label from ``source`` (and ``labeller`` if given); returns it."""
        with self._tx() as con:
            query = "SELECT * FROM labels WHERE source=?"
            args: list[Any] = [source]
            if labeller is not None:
                query += " AND labeller=?"
                args.append(labeller)
            row = con.execute(query + " ORDER BY seq DESC LIMIT 1", args).fetchone()
            if row is None:
                return None
            con.execute("DELETE FROM labels WHERE seq=?", (row["seq"],))
        return label_record(row)

    def label_count(self) -> int:
        """How many answers (labels and ratings) are stored (``counts().labelled``, cheaply)."""
        return int(self._con().execute("SELECT COUNT(*) FROM answered").fetchone()[0])

    def labels(self) -> list[LabelRecord]:
        """Every stored label, oldest first."""
        rows = self._con().execute("SELECT * FROM labels ORDER BY seq").fetchall()
        return [label_record(r) for r in rows]
