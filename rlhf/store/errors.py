"""The store's errors: what it refuses about one query, and one line for files it cannot write.

A refused query (:class:`QueryError`: an unknown id, the wrong kind of answer, a video never shown,
a different answer already stored) says which query it was about and whether the refused request
was a grade; the web API turns each class into its JSON reply in one place (``server/app.py``).

A full disk or a read-only run directory: the label store survives both (SQLite commits whole
transactions or nothing, and checkpoints are replaced atomically); what the person needs is what
failed and the likely reason, not a traceback (:func:`io_error_line`).
"""

from __future__ import annotations

import errno
import sqlite3

from rlhf.core.files import FULL_ERRNOS

_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}
_SQLITE_FULL = ("disk i/o error", "database or disk is full")
_SQLITE_READ_ONLY = ("readonly database", "unable to open database file")
KEPT = "every label stored before it is kept"


class QueryError(Exception):
    """The store refuses a request about one query (a pair to compare, or a clip to grade).

    Attributes:
        query_id: the pair or clip the request named.
        rating: True when the refused request was a grade for a clip (``add_rating``), False for
            a preference or a second opinion (``add_label``, ``add_opinion``) or a look-up.
    """

    def __init__(self, query_id: object, detail: str | None = None, *, rating: bool = False):
        super().__init__(query_id if detail is None else detail)
        self.query_id = query_id
        self.rating = rating


class LabelConflict(QueryError):
    """A pair already carries a different answer (a clip a different grade)."""


class UnknownPair(QueryError, KeyError):
    """No pair (or clip) with this id exists."""


class WrongKind(QueryError):
    """A pair was answered with a grade, or a clip to rate with a preference."""


class PairNotShown(QueryError):
    """The pair's video was never ready, so nobody can have watched it: a label would be a guess."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether a write failed because the disk (or a quota, or a file size limit) is full:
    SQLite's SQLITE_FULL, or an OSError with ENOSPC, EDQUOT or EFBIG."""
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", "")
        return name == "SQLITE_FULL" or "database or disk is full" in str(exc).lower()
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def io_error_line(exc: OSError | sqlite3.Error) -> str:
    """What failed, the likely cause where one is plain, and that stored labels are kept."""
    if isinstance(exc, sqlite3.Error):
        text = str(exc)
        what = f"the label store cannot be written: {text}"
        full = any(s in text.lower() for s in _SQLITE_FULL)
        read_only = any(s in text.lower() for s in _SQLITE_READ_ONLY)
    elif exc.filename is not None or exc.errno in FULL_ERRNOS:  # a file, not a socket or a process
        reason = exc.strerror or type(exc).__name__
        where = f"{exc.filename}:" if exc.filename is not None else "cannot write the run's files:"
        what = f"{where} {reason}"
        full, read_only = exc.errno in FULL_ERRNOS, exc.errno in _READ_ONLY
    else:
        what, full, read_only = str(exc) or type(exc).__name__, False, False
    if full:
        return f"{what} (is the disk full, or a file size limit reached?); {KEPT}"
    if read_only:
        return f"{what} (is the run directory read-only, or not yours?); {KEPT}"
    return f"{what}; {KEPT}"
