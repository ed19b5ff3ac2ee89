"""One SQLite connection per thread, and the write transaction every change goes through."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlhf.store.schema import migrate, refuse_newer


class StoreConnections:
    """The base of :class:`~rlhf.store.LabelStore`: opens (and migrates) the file, hands out connections."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # Writers of this process queue on this lock rather than in SQLite's busy handler, whose
        # sleeps back off to 100 ms (20 concurrent web labellers: API p99 ~950 ms without it).
        self._write_lock = threading.RLock()
        try:
            # Every handle brings the file up to the schema this code writes (or refuses a
            # newer one) before anything else touches it.
            self.schema_version = migrate(self._con(), self.path)
        except BaseException:
            self.close()
            raise

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            try:
                # Before anything is written, even the journal mode: a newer rlhf's file stays
                # exactly as that version left it.
                refuse_newer(con, self.path)
            except BaseException:
                con.close()
                raise
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
