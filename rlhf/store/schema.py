"""Store schema versions: ``PRAGMA user_version`` and the ordered migrations that bring a file up to date.

Migration k (``MIGRATIONS[k - 1]``) takes a store from version k-1 to k. Each runs in its own
transaction together with the version bump, so a migration that fails leaves the file at the
version it had before, and a store is never half-migrated. Version 1 is the schema that shipped
before versions existed; stores written then have ``user_version`` 0 and already hold its tables,
which migration 1 leaves as they are (every statement is ``IF NOT EXISTS``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from rlhf.config import ConfigError

Migration = Callable[[sqlite3.Connection], None]
"""Runs inside an open transaction; must use ``execute`` (``executescript`` would commit)."""

_SCHEMA_V1 = (
    """CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY,
    env_id TEXT NOT NULL,
    start_step INTEGER NOT NULL,
    length INTEGER NOT NULL,
    true_return REAL NOT NULL,
    arrays BLOB NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS pairs (
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
)""",
    "CREATE INDEX IF NOT EXISTS pairs_video_status ON pairs(video_status)",
    """CREATE TABLE IF NOT EXISTS labels (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    pair_id INTEGER NOT NULL UNIQUE REFERENCES pairs(id),
    answer TEXT NOT NULL,
    source TEXT NOT NULL,
    labeller TEXT,
    response_ms INTEGER,
    created_at REAL NOT NULL
)""",
)


def _create_v1(con: sqlite3.Connection) -> None:
    for statement in _SCHEMA_V1:
        con.execute(statement)


def _add_ratings(con: sqlite3.Connection) -> None:
    """Version 2: graded single clips (--feedback-kind ratings).

    A rating query is a row of ``pairs`` of kind 'rating' showing one segment (left = right), so
    it goes through the same video queue, leases and retirement as a pair. Its answer is a row of
    ``ratings`` (grade NULL: skipped); the view ``answered`` is every query with an answer of
    either kind.
    """
    con.execute("ALTER TABLE pairs ADD COLUMN kind TEXT NOT NULL DEFAULT 'pair'")
    con.execute(
        """CREATE TABLE IF NOT EXISTS ratings (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    pair_id INTEGER NOT NULL UNIQUE REFERENCES pairs(id),
    grade INTEGER,
    levels INTEGER NOT NULL,
    source TEXT NOT NULL,
    labeller TEXT,
    response_ms INTEGER,
    created_at REAL NOT NULL
)"""
    )
    con.execute(
        "CREATE VIEW IF NOT EXISTS answered AS"
        " SELECT pair_id FROM labels UNION ALL SELECT pair_id FROM ratings"
    )


_SCHEMA_V3 = (
    # Second opinions: a pair shown to another named labeller on purpose (--overlap), to measure
    # agreement. ``labels`` stays one row per pair (what the reward trains on).
    """CREATE TABLE IF NOT EXISTS opinions (
    pair_id INTEGER NOT NULL REFERENCES pairs(id),
    labeller TEXT NOT NULL,
    answer TEXT NOT NULL,
    response_ms INTEGER,
    created_at REAL NOT NULL,
    PRIMARY KEY (pair_id, labeller)
)""",
    # Clips of the current policy (the agent in view), rendered by the render workers.
    """CREATE TABLE IF NOT EXISTS policy_clips (
    id INTEGER PRIMARY KEY,
    segment_id INTEGER NOT NULL REFERENCES segments(id),
    iteration INTEGER NOT NULL,
    env_step INTEGER NOT NULL,
    created_at REAL NOT NULL,
    video_status TEXT NOT NULL DEFAULT 'pending',
    video_path TEXT,
    video_error TEXT
)""",
    # The learning curve the page draws: one point per iteration, thinned to a bounded size.
    """CREATE TABLE IF NOT EXISTS curve (
    iteration INTEGER PRIMARY KEY,
    env_step INTEGER NOT NULL,
    true_return REAL,
    predicted_return REAL,
    accuracy REAL
)""",
)


def _create_v3(con: sqlite3.Connection) -> None:
    for statement in _SCHEMA_V3:
        con.execute(statement)


MIGRATIONS: tuple[Migration, ...] = (_create_v1, _add_ratings, _create_v3)
"""``MIGRATIONS[k - 1]`` brings version k-1 to k; append, never edit a shipped one."""

LATEST_VERSION = len(MIGRATIONS)


class StoreVersionError(ConfigError):
    """The store was written by a newer rlhf whose schema this code does not know."""


def user_version(con: sqlite3.Connection) -> int:
    return int(con.execute("PRAGMA user_version").fetchone()[0])


def migrate(
    con: sqlite3.Connection, path: Path, migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Bring the store on ``con`` (autocommit mode) up to ``len(migrations)``; returns that version.

    Safe against other processes opening the same file at once: each step re-reads the version
    under the write lock (``BEGIN IMMEDIATE``) and skips what another process already did.

    Raises:
        StoreVersionError: the file's version is newer than ``len(migrations)``.
    """
    latest = len(migrations)
    refuse_newer(con, path, latest)
    while user_version(con) < latest:
        con.execute("BEGIN IMMEDIATE")
        try:
            refuse_newer(con, path, latest)  # another process may have migrated meanwhile
            current = user_version(con)
            if current < latest:
                migrations[current](con)
                # PRAGMA values cannot be bound as parameters; the int() keeps this injection-free.
                con.execute(f"PRAGMA user_version = {int(current + 1)}")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    return latest


def refuse_newer(con: sqlite3.Connection, path: Path, latest: int = LATEST_VERSION) -> None:
    """Raise :class:`StoreVersionError` if the file's schema is newer than ``latest``."""
    version = user_version(con)
    if version > latest:
        raise StoreVersionError(
            f"{path} was written by a newer rlhf (store schema {version}; this rlhf reads up to"
            f" {latest}): upgrade rlhf"
        )
