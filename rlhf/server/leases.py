"""Leases: which labeller was last handed which pair, so concurrent labellers see different pairs."""

from __future__ import annotations

import threading
from collections.abc import Iterable

LEASE_SECONDS = 300.0
"""How long a pair handed to one labeller is kept from the others."""


class Leases:
    """Pairs handed out per labeller, each until its lease expires.

    A pair leased to one labeller (a browser without names) is not handed to another until
    the lease ends: the second person would answer it for nothing. Named labellers are people
    too, and a pair leased to one is not even answered by another (``named.py``). Callers
    hold :attr:`lock` around a look-then-take sequence, and only ever lease pairs that exist and
    are ready, so the table never holds more entries than there are pairs to hand out.
    """

    def __init__(self, ttl_s: float = LEASE_SECONDS) -> None:
        self.ttl_s = ttl_s
        self.lock = threading.Lock()
        self._held: dict[int, tuple[str, float]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def held_by_others(self, labeller: str, now: float) -> set[int]:
        self._held = {p: v for p, v in self._held.items() if v[1] > now}
        return {p for p, (who, _) in self._held.items() if who != labeller}

    def holder(self, pair_id: int, now: float) -> str | None:
        """Who holds a live lease on the pair (None: nobody)."""
        held = self._held.get(pair_id)
        return held[0] if held is not None and held[1] > now else None

    def take(self, pair_ids: Iterable[int], labeller: str, now: float, steal: bool = True) -> None:
        """Lease ``pair_ids`` to ``labeller``; with ``steal=False`` another's live lease stays."""
        for pair_id in pair_ids:
            holder = self._held.get(pair_id)
            if steal or holder is None or holder[0] == labeller or holder[1] <= now:
                self._held[pair_id] = (labeller, now + self.ttl_s)

    def release(self, pair_id: int) -> None:
        with self.lock:
            self._held.pop(pair_id, None)
