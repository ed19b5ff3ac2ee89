"""One line for a run that cannot write its files: a full disk, a read-only run directory.

The label store survives both (SQLite commits whole transactions or nothing, and checkpoints are
replaced atomically); what the person needs is what failed and the likely reason, not a traceback.
"""

from __future__ import annotations

import errno
import sqlite3

_FULL = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}
_SQLITE_FULL = ("disk i/o error", "database or disk is full")
_SQLITE_READ_ONLY = ("readonly database", "unable to open database file")
KEPT = "every label stored before it is kept"


def io_error_line(exc: OSError | sqlite3.Error) -> str:
    """What failed, the likely cause where one is plain, and that stored labels are kept."""
    if isinstance(exc, sqlite3.Error):
        text = str(exc)
        what = f"the label store cannot be written: {text}"
        full = any(s in text.lower() for s in _SQLITE_FULL)
        read_only = any(s in text.lower() for s in _SQLITE_READ_ONLY)
    elif exc.filename is not None or exc.errno in _FULL:  # a file, not a socket or a process
        reason = exc.strerror or type(exc).__name__
        where = f"{exc.filename}:" if exc.filename is not None else "cannot write the run's files:"
        what = f"{where} {reason}"
        full, read_only = exc.errno in _FULL, exc.errno in _READ_ONLY
    else:
        what, full, read_only = str(exc) or type(exc).__name__, False, False
    if full:
        return f"{what} (is the disk full, or a file size limit reached?); {KEPT}"
    if read_only:
        return f"{what} (is the run directory read-only, or not yours?); {KEPT}"
    return f"{what}; {KEPT}"
