"""Durable label store: one SQLite file per run holding segments, pairs, labels and trainer status.

The store is the only thing the trainer, the render worker and the web server share. Every process
(and every thread) opens its own connection; SQLite in WAL mode with ``synchronous=FULL`` makes a
label durable the moment :meth:`LabelStore.add_label` returns, so the HTTP request that sent it can
be acknowledged safely.
"""

from __future__ import annotations

import io
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rlhf.types import Answer, Pair, Preference, Segment

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY,
    env_id TEXT NOT NULL,
    start_step INTEGER NOT NULL,
    length INTEGER NOT NULL,
    true_return REAL NOT NULL,
    arrays BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS pairs (
    id INTEGER PRIMARY KEY,
    left_segment INTEGER NOT NULL REFERENCES segments(id),
    right_segment INTEGER NOT NULL REFERENCES segments(id),
    swapped INTEGER NOT NULL DEFAULT 0,
    iteration INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    video_status TEXT NOT NULL DEFAULT 'pending',
    video_path TEXT,
    video_error TEXT,
    video_updated_at REAL
);
CREATE INDEX IF NOT EXISTS pairs_video_status ON pairs(video_status);
CREATE TABLE IF NOT EXISTS labels (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    pair_id INTEGER NOT NULL UNIQUE REFERENCES pairs(id),
    answer TEXT NOT NULL,
    source TEXT NOT NULL,
    labeller TEXT,
    response_ms INTEGER,
    created_at REAL NOT NULL
);
"""

VIDEO_PENDING = "pending"
VIDEO_RENDERING = "rendering"
VIDEO_READY = "ready"
VIDEO_FAILED = "failed"


class LabelConflict(Exception):
    """A pair already carries a different answer."""


class UnknownPair(KeyError):
    """No pair with this id exists."""


@dataclass(frozen=True)
class PairRecord:
    """A pair's row: ids and bookkeeping, without the segment arrays."""

    id: int
    left_segment: int
    right_segment: int
    swapped: bool
    iteration: int
    created_at: float
    video_status: str
    video_path: str | None
    video_error: str | None


@dataclass(frozen=True)
class LabelRecord:
    """A stored label."""

    seq: int
    pair_id: int
    answer: Answer
    source: str
    labeller: str | None
    response_ms: int | None
    created_at: float


@dataclass(frozen=True)
class StoreCounts:
    """Progress figures for status displays."""

    pairs: int
    labelled: int
    equal: int
    skipped: int
    pending_video: int
    ready_unlabelled: int
    failed: int


def _pack(segment: Segment) -> bytes:
    buf = io.BytesIO()
    np.savez(
        buf,
        obs=segment.obs,
        actions=segment.actions,
        true_rewards=segment.true_rewards,
        qpos=segment.qpos,
        qvel=segment.qvel,
    )
    return buf.getvalue()


def _unpack(env_id: str, start_step: int, blob: bytes) -> Segment:
    with np.load(io.BytesIO(blob)) as data:
        arrays = {k: data[k] for k in data.files}
    return Segment(env_id=env_id, start_step=start_step, **arrays)


@dataclass
class _PendingLabel:
    """One add_label call waiting for the group commit that will carry it."""

    args: tuple[int, Answer, str, str | None, int | None]
    done: threading.Event = field(default_factory=threading.Event)
    result: bool | None = None
    error: BaseException | None = None


class LabelStore:
    """Thread-safe handle on a run's ``labels.sqlite``; each thread gets its own connection."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # Writers of this process queue on this lock rather than in SQLite's busy handler, whose
        # sleeps back off to 100 ms (20 concurrent web labellers: API p99 ~950 ms without it).
        self._write_lock = threading.RLock()
        self._queue_lock = threading.Lock()
        self._label_queue: list[_PendingLabel] = []
        # executescript commits on its own, so it runs outside _tx.
        self._con().executescript(_SCHEMA)

    # -- connection handling -------------------------------------------------------------------
    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit is on disk before add_label returns, so an acknowledged label
            # survives a SIGKILL or a power cut.
            con.execute("PRAGMA synchronous=FULL")
            con.execute("PRAGMA foreign_keys=ON")
            con.row_factory = sqlite3.Row
            self._local.con = con
        return con

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        con = self._con()
        with self._write_lock:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (other threads close theirs when they end)."""
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

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
            (segment.env_id, segment.start_step, len(segment), segment.true_return, _pack(segment)),
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
        return _unpack(row["env_id"], row["start_step"], row["arrays"])

    def get_pair_record(self, pair_id: int) -> PairRecord:
        row = self._con().execute("SELECT * FROM pairs WHERE id=?", (pair_id,)).fetchone()
        if row is None:
            raise UnknownPair(pair_id)
        return _pair_record(row)

    def get_pair(self, pair_id: int) -> Pair:
        rec = self.get_pair_record(pair_id)
        return Pair(self.get_segment(rec.left_segment), self.get_segment(rec.right_segment))

    # -- video bookkeeping (render worker) -----------------------------------------------------
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
        return [replace(_pair_record(r), video_status=VIDEO_RENDERING) for r in rows]

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
        return [_pair_record(r) for r in rows]

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
        return _label_record(row)

    def labels(self) -> list[LabelRecord]:
        """Every stored label, oldest first."""
        rows = self._con().execute("SELECT * FROM labels ORDER BY seq").fetchall()
        return [_label_record(r) for r in rows]

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


def _pair_record(row: sqlite3.Row) -> PairRecord:
    return PairRecord(
        id=row["id"],
        left_segment=row["left_segment"],
        right_segment=row["right_segment"],
        swapped=bool(row["swapped"]),
        iteration=row["iteration"],
        created_at=row["created_at"],
        video_status=row["video_status"],
        video_path=row["video_path"],
        video_error=row["video_error"],
    )


def _label_record(row: sqlite3.Row) -> LabelRecord:
    return LabelRecord(
        seq=row["seq"],
        pair_id=row["pair_id"],
        answer=Answer(row["answer"]),
        source=row["source"],
        labeller=row["labeller"],
        response_ms=row["response_ms"],
        created_at=row["created_at"],
    )
