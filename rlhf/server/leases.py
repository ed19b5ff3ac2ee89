"""Leases: which labeller was last handed which pair, so concurrent labellers see different pairs."""

from __future__ import annotations

import threading

LEASE_SECONDS = 300.0
"""How long a pair handed to one labeller is kept from the others."""


class Leases:
    """Pairs handed out per labeller, each until its lease expires.

    Leases only spread work: when every ready pair is leased to someone else, the pair is handed
    out anyway (a second answer is harmless: same answer -> duplicate, different -> 409).
    Callers hold :attr:`lock` around a look-then-take sequence.
    """

    def __init__(self, ttl_s: float = LEASE_SECONDS) -> None:
        self.ttl_s = ttl_s
        self.lock = threading.Lock()
        self._held: dict[int, tuple[str, float]] = {}

    def held_by_others(self, labeller: str, now: float) -> set[int]:
        self._held = {p: v for p, v in self._held.items() if v[1] > now}
        return {p for p, (who, _) in self._held.items() if who != labeller}

    def take(self, pair_ids: list[int], labeller: str, now: float) -> None:
        for pair_id in pair_ids:
            self._held[pair_id] = (labeller, now + self.ttl_s)

    def release(self, pair_id: int) -> None:
        with self.lock:
            self._held.pop(pair_id, None)
