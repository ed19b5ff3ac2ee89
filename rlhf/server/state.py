"""What every part of the labelling app shares: its live state, and the error it answers with."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import current_app

from rlhf.server.eta import AnswerTimes
from rlhf.server.leases import Leases
from rlhf.server.pages import Pages
from rlhf.store.protocols import ServerStore


class ApiError(Exception):
    """An expected failure answered as JSON ``{"error": code, "message": message}``."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


@dataclass
class ServerState:
    """The app's live state, kept in ``app.extensions["rlhf"]`` (mutable: it changes as the
    session ends, so it is not one of the frozen records passed between modules).

    Attributes:
        store: the run's label store.
        videos_dir: the only directory videos are served from.
        token: the access token, or None for loopback-only serving.
        total_labels_hint: labels asked for over the run, shown until the trainer reports its own.
        watch_command: the command that shows the run's learning curves (for the finished screen).
        leases: which labeller holds which pair.
        pages: which pages are open and whether they still hold answers.
        closing_since: when the end-of-run grace period began (``time.monotonic()``), or None.
        stopped: set just before the server closes; requests still arriving get a 503.
        labellers, overlap: named labellers (each request carries one's token) and the share of
            pairs shown to two of them.
    """

    store: ServerStore
    videos_dir: Path
    token: str | None
    total_labels_hint: int | None
    watch_command: str | None
    leases: Leases
    pages: Pages
    closing_since: float | None = None
    stopped: bool = False
    labellers: dict[str, str] | None = None
    """Named labellers as ``{token: name}`` (see :mod:`rlhf.core.labellers`); None: anonymous."""
    overlap: float = 0.0
    """With named labellers, the share of pairs also shown to a second labeller."""
    answer_times: AnswerTimes = field(default_factory=AnswerTimes)
    """When the latest new answers arrived: the pace the page's time left comes from."""

    @property
    def closing(self) -> bool:
        """The run has ended: no new pairs go out, answers still in flight are still stored."""
        return self.closing_since is not None

    def begin_closing(self) -> None:
        if self.closing_since is None:
            self.closing_since = time.monotonic()


def server_state() -> ServerState:
    """The state of the app handling the current request."""
    return current_app.extensions["rlhf"]
