"""Which labelling pages are open, and whether each has delivered every answer it holds.

At the end of a run the server keeps accepting answers for a grace period. Waiting the whole
period is safe but slow; this lets it end as soon as every page that could still send something
has said so. A page names itself in the ``X-Rlhf-Page`` header (a random id per page load, so two
tabs of one browser are two pages) and reports how many answers its outbox holds with each
status poll. It is *done* once it has seen that the run ended (it takes no new answers from
then on) and reports an empty outbox. Anything that cannot be accounted for keeps the server
waiting until the grace period is over: a recent API request without a page id (a script, an
old page), or a page that last reported unsent answers, however long ago.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass

PAGE_HEADER = "X-Rlhf-Page"
ACTIVE_S = 20.0
"""A page that polled within this many seconds is open (it polls every 2 s; hidden tabs less)."""
MAX_PAGES = 256
"""Pages remembered at most; the longest silent ones are forgotten first."""
_PAGE_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


def valid_page_id(value: str | None) -> str | None:
    """The page id if it is well formed, else None (then the request counts as anonymous)."""
    return value if value and _PAGE_RE.match(value) else None


@dataclass
class _Page:
    seen: float
    outbox: int = 0
    ended: bool = False
    reported: float = -math.inf
    """When it last reported its outbox (a status poll: it read the run's status then)."""


class Pages:
    """Thread-safe record of the pages talking to the server (see the module docstring)."""

    def __init__(self, active_s: float = ACTIVE_S, max_pages: int = MAX_PAGES) -> None:
        self.active_s = active_s
        self.max_pages = max_pages
        self._lock = threading.Lock()
        self._pages: dict[str, _Page] = {}
        self._anonymous_at = -math.inf

    def seen(
        self,
        page_id: str | None,
        now: float,
        *,
        outbox: int | None = None,
        ended: bool | None = None,
        answering: bool = False,
    ) -> None:
        """Note one API request: its page (None: anonymous), and what it says about its outbox.

        Args:
            outbox: answers the page still holds, when the request reports it.
            ended: whether the page has seen the run end, when the request reports it.
            answering: the request carries an answer (a label or an undo).
        """
        with self._lock:
            if page_id is None:
                self._anonymous_at = now
                return
            page = self._pages.pop(page_id, None) or _Page(seen=now)
            self._pages[page_id] = page  # re-inserted: the dict stays ordered by last request
            page.seen = now
            if outbox is not None:
                page.outbox = outbox
                page.reported = now
            if ended is not None:
                page.ended = ended
            if answering:
                page.outbox, page.ended = max(page.outbox, 1), False
            while len(self._pages) > self.max_pages:
                del self._pages[next(iter(self._pages))]

    def all_read_since(self, since: float, now: float) -> bool:
        """True when every open page has read the status since ``since`` (the last status the
        run wrote): the finished page then shows the run's final figures."""
        with self._lock:
            return all(
                page.reported >= since
                for page in self._pages.values()
                if now - page.seen < self.active_s
            )

    def all_delivered(self, now: float) -> bool:
        """True when no open page holds an answer it could still send."""
        with self._lock:
            if now - self._anonymous_at < self.active_s:
                return False
            for page in self._pages.values():
                if page.ended and page.outbox == 0:
                    continue  # done: it takes no new answers and has sent the old ones
                if page.outbox > 0 or now - page.seen < self.active_s:
                    return False
            return True
