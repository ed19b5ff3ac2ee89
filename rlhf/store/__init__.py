"""Durable label store: one SQLite file per run holding segments, pairs, labels and trainer status.

The store is the only thing the trainer, the render worker and the web server share. Every process
(and every thread) opens its own connection; SQLite in WAL mode with ``synchronous=FULL`` makes a
label durable the moment :meth:`LabelStore.add_label` returns, so the HTTP request that sent it can
be acknowledged safely. The file carries its schema version (``PRAGMA user_version``); opening it
applies the migrations it lacks, and a file from a newer rlhf is refused.
"""

from rlhf.store.errors import (
    LabelConflict,
    PairNotShown,
    QueryError,
    UnknownPair,
    WrongKind,
    io_error_line,
)
from rlhf.store.label_store import LabelStore
from rlhf.store.meta import SCALE_META
from rlhf.store.ratings import RATING
from rlhf.store.records import (
    MAX_ROW_ID,
    VIDEO_FAILED,
    VIDEO_PENDING,
    VIDEO_READY,
    VIDEO_RENDERING,
    LabelRecord,
    PairRecord,
    RatingRecord,
    StoreCounts,
    is_row_id,
)
from rlhf.store.schema import LATEST_VERSION, MIGRATIONS, StoreVersionError

__all__ = [
    "LATEST_VERSION",
    "MAX_ROW_ID",
    "MIGRATIONS",
    "RATING",
    "SCALE_META",
    "VIDEO_FAILED",
    "VIDEO_PENDING",
    "VIDEO_READY",
    "VIDEO_RENDERING",
    "LabelConflict",
    "LabelRecord",
    "LabelStore",
    "PairNotShown",
    "PairRecord",
    "QueryError",
    "RatingRecord",
    "StoreCounts",
    "StoreVersionError",
    "UnknownPair",
    "WrongKind",
    "io_error_line",
    "is_row_id",
]
