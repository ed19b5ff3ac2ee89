"""What the store hands out: row records, progress counts, and the segment packing format."""

from __future__ import annotations

import io
import sqlite3
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import numpy as np

from rlhf.core.types import Answer, Segment

VIDEO_PENDING = "pending"
VIDEO_RENDERING = "rendering"
VIDEO_READY = "ready"
VIDEO_FAILED = "failed"

MAX_ROW_ID = 2**63 - 1
"""The largest id SQLite can store: a larger Python int cannot even be bound as a parameter."""


def is_row_id(value: object) -> bool:
    """True for an int SQLite can hold as a row id (1 to 2^63-1); bools are not ids."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_ROW_ID


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
    kind: str = "pair"
    """'pair' (compare left and right) or 'rating' (grade one clip: left = right)."""


@dataclass(frozen=True)
class RatingRecord:
    """A stored rating of one clip."""

    seq: int
    pair_id: int
    grade: int | None
    """0 (worst) to ``levels - 1``; None: skipped."""
    levels: int
    source: str
    labeller: str | None
    response_ms: int | None
    created_at: float


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
    """Ready, unlabelled and not retired: what the page can be handed now."""
    failed: int
    retired: int = 0
    """Unlabelled pairs no longer handed out: asked too many iterations ago (see ``retire_before``)."""

    @property
    def live(self) -> int:
        """Pairs asked for that can still be answered: not labelled, retired or failed."""
        return self.pending_video + self.ready_unlabelled


def pack_segment(segment: Segment) -> bytes:
    """A segment's arrays as one ``.npz`` blob (the ``segments.arrays`` column)."""
    buf = io.BytesIO()
    np.savez(
        buf,
        obs=segment.obs,
        actions=segment.actions,
        true_rewards=segment.true_rewards,
        qpos=segment.qpos,
        qvel=segment.qvel,
        absorbing=np.int64(segment.absorbing),
    )
    return buf.getvalue()


def insert_segment(con: sqlite3.Connection, segment: Segment) -> int:
    """Store a segment (a row of ``segments``, arrays packed) in ``con``'s transaction; its id."""
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


def unpack_segment(env_id: str, start_step: int, blob: bytes) -> Segment:
    with np.load(io.BytesIO(blob)) as data:
        arrays = {k: data[k] for k in data.files}
    # Segments stored before absorbing padding existed have none.
    absorbing = int(arrays.pop("absorbing", 0))
    return Segment(env_id=env_id, start_step=start_step, absorbing=absorbing, **arrays)


_R = TypeVar("_R")


def _record(cls: type[_R], row: sqlite3.Row, **converted: Any) -> _R:
    """``cls`` from a row whose columns carry its fields' names; ``converted`` overrides some."""
    return cls(**{f.name: row[f.name] for f in fields(cls) if f.name not in converted}, **converted)


def pair_record(row: sqlite3.Row) -> PairRecord:
    return _record(PairRecord, row, swapped=bool(row["swapped"]))


def rating_record(row: sqlite3.Row) -> RatingRecord:
    return _record(RatingRecord, row)


def label_record(row: sqlite3.Row) -> LabelRecord:
    return _record(LabelRecord, row, answer=Answer(row["answer"]))
