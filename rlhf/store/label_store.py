"""LabelStore: a run's ``labels.sqlite``, opened by the trainer, the render worker and the web server."""

from __future__ import annotations

import json
import time
from typing import Any

from rlhf.core.types import Answer, LabelMeta, Pair, Preference, Rating, Segment
from rlhf.store.errors import UnknownPair
from rlhf.store.opinions import OpinionStore
from rlhf.store.policy import PolicyStore
from rlhf.store.ratings import RatingWriter
from rlhf.store.records import (
    VIDEO_FAILED,
    VIDEO_PENDING,
    VIDEO_READY,
    VIDEO_RENDERING,
    PairRecord,
    StoreCounts,
    insert_segment,
    is_row_id,
    pair_record,
    unpack_segment,
)
from rlhf.store.videos import LIVE


class LabelStore(RatingWriter, OpinionStore, PolicyStore):
    """Thread-safe handle on a run's ``labels.sqlite``; each thread gets its own connection."""

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
                seg_ids = [insert_segment(con, s) for s in (pair.left, pair.right)]
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
                seg_ids = [insert_segment(con, s) for s in (pair.left, pair.right)]
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
        if not is_row_id(pair_id):  # SQLite cannot even bind it; no row has such an id
            raise UnknownPair(pair_id)
        row = self._con().execute("SELECT * FROM pairs WHERE id=?", (pair_id,)).fetchone()
        if row is None:
            raise UnknownPair(pair_id)
        return pair_record(row)

    def get_pair(self, pair_id: int) -> Pair:
        rec = self.get_pair_record(pair_id)
        return Pair(self.get_segment(rec.left_segment), self.get_segment(rec.right_segment))

    # -- labels (writing them: see rlhf.store.labels) -------------------------------------------
    def preferences(self, cache: dict[int, Pair] | None = None) -> list[Preference]:
        """All non-skip labels as training data; ``cache`` (pair id -> Pair) avoids re-reading."""
        cache = cache if cache is not None else {}
        asked = self._iterations("labels")
        prefs: list[Preference] = []
        for label in self.labels():
            mu = label.answer.mu
            if mu is None:
                continue
            if label.pair_id not in cache:
                cache[label.pair_id] = self.get_pair(label.pair_id)
            meta = LabelMeta(asked[label.pair_id], label.created_at, label.source)
            prefs.append(Preference(cache[label.pair_id], mu, meta))
        return prefs

    def rated(self, cache: dict[int, Segment] | None = None) -> list[Rating]:
        """All non-skip ratings as training data; ``cache`` (query id -> Segment) avoids re-reading."""
        cache = cache if cache is not None else {}
        asked = self._iterations("ratings")
        out: list[Rating] = []
        for rec in self.ratings():
            if rec.grade is None:
                continue
            if rec.pair_id not in cache:
                cache[rec.pair_id] = self.get_segment(
                    self.get_pair_record(rec.pair_id).left_segment
                )
            meta = LabelMeta(asked[rec.pair_id], rec.created_at, rec.source)
            out.append(Rating(cache[rec.pair_id], rec.grade, rec.levels, meta))
        return out

    def _iterations(self, table: str) -> dict[int, int]:
        """Iteration each answered query (in ``table``) was asked at."""
        rows = self._con().execute(
            f"SELECT p.id, p.iteration FROM pairs p JOIN {table} a ON a.pair_id = p.id"
        )
        return {int(r[0]): int(r[1]) for r in rows}

    def counts(self) -> StoreCounts:
        con = self._con()

        def one(sql: str, *args: Any) -> int:
            return int(con.execute(sql, args).fetchone()[0])

        unlabelled = f"id NOT IN (SELECT pair_id FROM answered) AND {LIVE}"
        # Ratings count as answers: the schedule and the page count queries of both kinds.
        return StoreCounts(
            pairs=one("SELECT COUNT(*) FROM pairs"),
            labelled=one("SELECT COUNT(*) FROM answered"),
            equal=one("SELECT COUNT(*) FROM labels WHERE answer=?", Answer.EQUAL.value),
            skipped=one("SELECT COUNT(*) FROM labels WHERE answer=?", Answer.SKIP.value)
            + one("SELECT COUNT(*) FROM ratings WHERE grade IS NULL"),
            pending_video=one(
                f"SELECT COUNT(*) FROM pairs WHERE video_status IN (?, ?) AND {unlabelled}",
                VIDEO_PENDING,
                VIDEO_RENDERING,
            ),
            ready_unlabelled=one(
                f"SELECT COUNT(*) FROM pairs WHERE video_status=? AND {unlabelled}", VIDEO_READY
            ),
            failed=one("SELECT COUNT(*) FROM pairs WHERE video_status=?", VIDEO_FAILED),
            retired=self._retired(con),
        )
