"""Durable file replacement, and the leftovers a killed writer can leave behind.

Every file a run rewrites in place (``config.json``, ``summary.json``, checkpoints) is written to a
temporary file in the same directory, synced, renamed over the old one, and the directory entry
synced: at every moment readers see the old file or the new one, and a power cut loses neither.
A process killed between ``mkstemp`` and the rename leaves its temporary file behind;
:func:`remove_orphan_temps` deletes those once the run's lock says no writer is alive.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

TEMP_SUFFIXES = (".tmp", ".tmp.json")
"""How the temporary files of :func:`replace_atomic` end (config.json's end in ``.tmp.json``)."""


def fsync_dir(directory: Path) -> None:
    """Sync a directory entry: a rename is durable only once its directory is on disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_atomic(
    path: Path, write: Callable[[IO[bytes]], None], mode: int | None = None, suffix: str = ".tmp"
) -> None:
    """Write ``path`` through ``write(file)`` so that it is replaced whole and durably.

    ``mode``: the new file's permissions (``mkstemp`` makes it private to the user).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        cause = _os_error_behind(exc)
        if cause is not None and cause is not exc:
            # torch.save's zip writer turns a full disk into a RuntimeError while it closes the
            # file; the OSError behind it is what the person needs to hear about.
            raise cause from exc
        raise
    fsync_dir(path.parent)


def _os_error_behind(exc: BaseException) -> OSError | None:
    """The first OSError in ``exc``'s chain of causes and contexts (``exc`` itself included)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""A full disk, a full quota, a file over the size limit (``ulimit -f``)."""


def disk_full(exc: BaseException) -> OSError | sqlite3.Error | None:
    """The error in ``exc``'s chain (itself included) that says the disk (or a quota, or the
    file size limit) is full; None when none does.

    SQLite says "database or disk is full" without an errno (and "disk I/O error" when a write
    of its journal fails, e.g. over the file size limit); torch's zip writer wraps the
    OSError in a RuntimeError; cleanup after the first error can raise a second one whose
    context is the first.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError) and current.errno in FULL_ERRNOS:
            return current
        if isinstance(current, sqlite3.Error) and any(
            text in str(current).lower() for text in ("disk is full", "disk i/o error")
        ):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def remove_orphan_temps(directories: Iterable[Path]) -> list[Path]:
    """Delete the temporary files :func:`replace_atomic` leaves when its process is killed.

    Call it only while holding the run's trainer lock (no other writer of these directories is
    alive). Returns what was removed.
    """
    removed = []
    for directory in directories:
        if not directory.is_dir():
            continue
        for entry in directory.iterdir():
            if entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIXES):
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
                    removed.append(entry)
    return removed
