"""What the terminal says while a run waits for a person: plurals right, and a link that opens."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from rlhf.feedback.sources import HumanSource
from rlhf.store import StoreCounts


def _source(ready: int, pending: int, failed: int, links: dict[str, str]) -> HumanSource:
    source = HumanSource.__new__(HumanSource)  # no session started: only the note is tested
    counts = StoreCounts(
        pairs=ready + pending + failed, labelled=0, equal=0, skipped=0,
        pending_video=pending, ready_unlabelled=ready, failed=failed,
    )  # fmt: skip
    source.store = SimpleNamespace(counts=lambda: counts)  # type: ignore[assignment]
    server = SimpleNamespace(url="http://127.0.0.1:8000/", labeller_urls=links)
    source.session = SimpleNamespace(url=server.url, server=server)  # type: ignore[assignment]
    source.rng = np.random.default_rng(0)
    return source


def test_one_of_each_is_said_in_the_singular() -> None:
    note = _source(1, 1, 1, {}).waiting_note()
    assert note == (
        "1 pair ready to label at http://127.0.0.1:8000/; 1 video being rendered; 1 video failed"
    )
    assert _source(2, 0, 0, {}).waiting_note().startswith("2 pairs ready")


def test_named_labellers_are_not_given_an_address_without_their_token() -> None:
    note = _source(3, 0, 0, {"alice": "http://127.0.0.1:8000/?token=a"}).waiting_note()
    assert "http" not in note and "each labeller's link" in note
