"""The API's rules for named labellers (``--labeller``): who answers what, and what each sees.

Each labeller labels pairs nobody has labelled; a pair chosen for overlap (``--overlap``) that
another labeller answered is shown to one more labeller, whose answer is kept as a second
opinion. Nobody sees or changes another's answer: a label sent for a pair someone else
answered is refused without saying what they answered, undo takes back only one's own, and a
pair handed to one labeller (leased) cannot be answered by another.

Nothing a labeller can read moves with another's answer: the agreement between labellers is not
in the API (one second opinion, read before and after, would tell the first answer; with undo,
every answer could be tried in turn). The run's owner sees it in TensorBoard (``labellers/``).
What the store refuses is answered by the app's handler for store errors (``app.py``).
"""

from __future__ import annotations

import time
from typing import Any

from flask import g

from rlhf.core.labellers import shows_twice
from rlhf.core.types import Answer
from rlhf.server.state import ApiError, ServerState
from rlhf.store import LabelConflict, PairRecord
from rlhf.store.opinions import NOT_LABELLED


def second_look(state: ServerState, exclude: list[int], who: str) -> PairRecord | None:
    """The freshest overlap pair another labeller answered that ``who`` may judge too."""
    if state.overlap <= 0:
        return None
    for rec in state.store.second_look_candidates(who, exclude):
        if shows_twice(rec.id, state.overlap):
            return rec
    return None


def label_as(
    state: ServerState, pair_id: int, answer: Answer, response_ms: int | None, who: str
) -> bool:
    """Store ``who``'s answer (a label, or a second opinion); True if it is new."""
    owner = state.store.label_owner(pair_id)
    if owner is NOT_LABELLED:
        _hold(state, pair_id, who)
    if owner is NOT_LABELLED or owner == who:
        try:
            new = state.store.add_label(
                pair_id, answer, source="human", labeller=who, response_ms=response_ms
            )
        except LabelConflict:
            new = None  # someone's label is there: whose decides what to say
        if new is not None and state.store.label_owner(pair_id) == who:
            return new
        owner = state.store.label_owner(pair_id)
        if owner == who:  # a different answer of one's own: the store's conflict, said as such
            raise LabelConflict(pair_id)
    if not shows_twice(pair_id, state.overlap):
        raise ApiError(409, "taken", f"Another labeller has answered pair {pair_id}.")
    return state.store.add_opinion(pair_id, who, answer, response_ms)


def _hold(state: ServerState, pair_id: int, who: str) -> None:
    """Lease the pair to ``who`` before their label is written, or refuse it if another holds
    it: the page it was handed to may still answer it."""
    with state.leases.lock:
        now = time.monotonic()
        holder = state.leases.holder(pair_id, now)
        if holder is not None and holder != who:
            raise ApiError(409, "leased", f"Pair {pair_id} is being labelled by another labeller.")
        state.leases.take([pair_id], who, now)


def labeller_name(state: ServerState) -> str | None:
    """The named labeller making this request (None without names)."""
    return g.get("labeller") if state.labellers is not None else None


def labellers_payload(state: ServerState, who: str | None) -> dict[str, Any] | None:
    """The stats view: answers per labeller (None without names). Not their agreement: see
    the module's docstring."""
    if state.labellers is None:
        return None
    counts = dict(state.store.labeller_stats().labels)
    return {
        "you": who,
        "counts": [{"name": n, "labels": counts.get(n, 0)} for n in _names(state)],
        "overlap": state.overlap,
    }


def _names(state: ServerState) -> list[str]:
    assert state.labellers is not None
    return list(dict.fromkeys(state.labellers.values()))
