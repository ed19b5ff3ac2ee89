"""LabelStore: a run's ``labels.sqlite``, opened by the trainer, the render worker and the web server."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlhf.store.records import (
    VIDEO_FAILED,
    VIDEO_PENDING,
    VIDEO_READY,
    VIDEO_RENDERING,
    LabelConflict,
    LabelRecord,
    PairRecord,
    StoreCounts,
    UnknownPair,
    label_record,
    pack_segment,
    pair_record,
    unpack_segment,
)
from rlhf.store.videos import VideoQueue
from rlhf.types import Answer, Pair, Preference, Segment


@dataclass
class _PendingLabel:
    """One add_label call waiting for the group commit that will carry it."""

    args: tuple[int, Answer, str, str | None, int | None]
    done: threading.Event = field(default_factory=threading.Event)
    result: bool | None = None
    error: BaseException | None = None


class LabelStore(VideoQueue):
    """Thread-safe handle on a run's ``labels.sqlite``; each thread gets its own connection."""

    def __init__(self, path: str | Path) -> None:
        self._queue_lock = threading.Lock()
        self._label_queue: list[_PendingLabel] = []
        super().__init__(path)

    # -- metadata ------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under ``key``."""
        with self._tx() as con:
            con.execute(
                "INSERT INTO meta(key, value) VALUES(?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, json.dumps(value)),
            )

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._con().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else json.loads(row["value"])

    # -- segments and pairs --------------------------------------------------------------------
    def add_pairs(
        self, pairs: list[Pair], swapped: list[bool] | None = None, iteration: int = 0
    ) -> list[int]:
        """Store pairs (and their segments) in one transaction; returns the new pair ids.

        ``swapped[i]`` records that pair i's display order was flipped from the order the query
        selector produced (position-bias randomisation); the pair is stored in display order.
        """
        swapped = swapped if swapped is not None else [False] * len(pairs)
        if len(swapped) != len(pairs):
            raise ValueError("swapped must have one flag per pair")
        now = time.time()
        ids: list[int] = []
        with self._tx() as con:
            for pair, flip in zip(pairs, swapped, strict=True):
                seg_ids = [self._insert_segment(con, s) for s in (pair.left, pair.right)]
                cur = con.execute(
                    "INSERT INTO pairs(left_segment, right_segment, swapped, iteration, created_at)"
                    " VALUES(?, ?, ?, ?, ?)",
                    (seg_ids[0], seg_ids[1], int(flip), iteration, now),
                )
                ids.append(int(cur.lastrowid))
        return ids

    def add_pairs_with_labels(
        self, pairs: list[Pair], answers: list[Answer], source: str, iteration: int = 0
    ) -> list[int]:
        """Store pairs and their labels in one transaction (synthetic teachers label at once)."""
        if len(answers) != len(pairs):
            raise ValueError("answers must have one entry per pair")
        now = time.time()
        ids: list[int] = []
        with self._tx() as con:
            for pair, answer in zip(pairs, answers, strict=True):
                seg_ids = [self._insert_segment(con, s) for s in (pair.left, pair.right)]
                cur = con.execute(
                    "INSERT INTO pairs(left_segment, right_segment, iteration, created_at,"
                    " video_status) VALUES(?, ?, ?, ?, 'none')",
                    (seg_ids[0], seg_ids[1], iteration, now),
                )
                pair_id = int(cur.lastrowid)
                con.execute(
                    "INSERT INTO labels(pair_id, answer, source, created_at) VALUES(?, ?, ?, ?)",
                    (pair_id, answer.value, source, now),
                )
                ids.append(pair_id)
        return ids

    @staticmethod
    def _insert_segment(con: sqlite3.Connection, segment: Segment) -> int:
        cur = con.execute(
            "INSERT INTO segments(env_id, start_step, length, true_return, arrays)"
            " VALUES(?, ?, ?, ?, ?)",
            (
                segment.env_id,
                segment.start_step,
                len(segment),
                segment.true_return,
                pack_segment(segment),
            ),
        )
        return int(cur.lastrowid)

    def get_segment(self, segment_id: int) -> Segment:
        row = (
            self._con()
            .execute("SELECT env_id, start_step, arrays FROM segments WHERE id=?", (segment_id,))
            .fetchone()
        )
        if row is None:
            raise KeyError(f"no segment {segment_id}")
        return unpack_segment(row["env_id"], row["start_step"], row["arrays"])

    def get_pair_record(self, pair_id: int) -> PairRecord:
        row = self._con().execute("SELECT * FROM pairs WHERE id=?", (pair_id,)).fetchone()
        if row is None:
            raise UnknownPair(pair_id)
        return pair_record(row)

    def get_pair(self, pair_id: int) -> Pair:
        rec = self.get_pair_record(pair_id)
        return Pair(self.get_segment(rec.left_segment), self.get_segment(rec.right_segment))

    # -- labels --------------------------------------------------------------------------------
    def add_label(
        self,
        pair_id: int,
        answer: Answer,
        source: str = "human",
        labeller: str | None = None,
        response_ms: int | None = None,
    ) -> bool:
        """Store a label durably. Returns True if new, False if the same answer was already there.

        Raises:
            UnknownPair: no such pair.
            LabelConflict: the pair already has a different answer.
        """
        item = _PendingLabel((pair_id, Answer(answer), source, labeller, response_ms))
        with self._queue_lock:
            self._label_queue.append(item)
        # Group commit: whoever holds the write lock commits every queued label in one
        # transaction (one fsync), so concurrent writers share the price of durability. A label
        # is reported only once the transaction holding it has committed.
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
                    try:
                        item.result = self._insert_label(con, *item.args)
                    except (UnknownPair, LabelConflict) as exc:
                        item.error = exc
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
        if con.execute("SELECT 1 FROM pairs WHERE id=?", (pair_id,)).fetchone() is None:
            raise UnknownPair(pair_id)
        row = con.execute("SELECT answer FROM labels WHERE pair_id=?", (pair_id,)).fetchone()
        if row is not None:
            if row["answer"] == answer.value:
                return False
            raise LabelConflict(f"pair {pair_id} is already labelled {row['answer']!r}")
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

    def labels(self) -> list[LabelRecord]:
        """Every stored label, oldest first."""
        rows = self._con().execute("SELECT * FROM labels ORDER BY seq").fetchall()
        return [label_record(r) for r in rows]

    def preferences(self, cache: dict[int, Pair] | None = None) -> list[Preference]:
        """All non-skip labels as training data; ``cache`` (pair id -> Pair) avoids re-reading."""
        cache = cache if cache is not None else {}
        prefs: list[Preference] = []
        for label in self.labels():
            mu = label.answer.mu
            if mu is None:
                continue
            if label.pair_id not in cache:
                cache[label.pair_id] = self.get_pair(label.pair_id)
            prefs.append(Preference(cache[label.pair_id], mu))
        return prefs

    def counts(self) -> StoreCounts:
        con = self._con()

        def one(sql: str, *args: Any) -> int:
            return int(con.execute(sql, args).fetchone()[0])

        unlabelled = "id NOT IN (SELECT pair_id FROM labels)"
        return StoreCounts(
            pairs=one("SELECT COUNT(*) FROM pairs"),
            labelled=one("SELECT COUNT(*) FROM labels"),
            equal=one("SELECT COUNT(*) FROM labels WHERE answer=?", Answer.EQUAL.value),
            skipped=one("SELECT COUNT(*) FROM labels WHERE answer=?", Answer.SKIP.value),
            pending_video=one(
                f"SELECT COUNT(*) FROM pairs WHERE video_status IN (?, ?) AND {unlabelled}",
                VIDEO_PENDING,
                VIDEO_RENDERING,
            ),
            ready_unlabelled=one(
                f"SELECT COUNT(*) FROM pairs WHERE video_status=? AND {unlabelled}", VIDEO_READY
            ),
            failed=one("SELECT COUNT(*) FROM pairs WHERE video_status=?", VIDEO_FAILED),
        )
