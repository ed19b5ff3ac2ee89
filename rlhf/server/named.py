"""The API's rules for named labellers (``--labeller``): who answers what, and what each sees.

Each labeller labels pairs nobody has labelled; a pair chosen for overlap (``--overlap``) that
another labeller answered is shown to one more labeller, whose answer is kept as a second
opinion. Nobody sees or changes another's answer: a label sent for a pair someone else
answered is refused without saying what they answered, and undo takes back only one's own.
What the store refuses is answered by the app's handler for store errors (``app.py``).
"""

from __future__ import annotations

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


def labeller_name(state: ServerState) -> str | None:
    """The named labeller making this request (None without names)."""
    return g.get("labeller") if state.labellers is not None else None


def labellers_payload(state: ServerState, who: str | None) -> dict[str, Any] | None:
    """The stats view: answers per labeller and their agreement (None without names)."""
    if state.labellers is None:
        return None
    stats = state.store.labeller_stats()
    counts = dict(stats.labels)
    return {
        "you": who,
        "counts": [{"name": n, "labels": counts.get(n, 0)} for n in _names(state)],
        "compared": stats.compared,
        "agreement": stats.agreement,
        "overlap": state.overlap,
    }


def _names(state: ServerState) -> list[str]:
    assert state.labellers is not None
    return list(dict.fromkeys(state.labellers.values()))
