"""Two named labellers in one Chromium (issue 34, finding 3): a pair is with one person at a
time, and an answer refused because another person answered first says nothing of that answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlhf.config import WebConfig
from rlhf.core.types import Answer
from rlhf.server import ServerHandle, serve_in_thread
from rlhf.store import VIDEO_READY, LabelStore
from tests.web.pages import wait_for, wait_playing

pytestmark = pytest.mark.browser


def _serve(tmp_path: Path, pair_assets, pairs: int) -> tuple[LabelStore, ServerHandle]:
    """``pairs`` ready pairs served to alice and bob with --overlap 0: none is meant for both."""
    pair, video = pair_assets
    store = LabelStore(tmp_path / "labels.sqlite")
    videos = tmp_path / "videos"
    videos.mkdir()
    for pair_id in store.add_pairs([pair] * pairs):
        (videos / f"{pair_id}.mp4").write_bytes(video)
        store.mark_video(pair_id, VIDEO_READY, path=str(videos / f"{pair_id}.mp4"))
    handle = serve_in_thread(store, videos, WebConfig(labeller=("alice", "bob"), overlap=0.0))
    return store, handle


@pytest.fixture
def no_overlap(tmp_path: Path, pair_assets) -> Iterator[tuple[LabelStore, ServerHandle]]:
    """Two ready pairs, alice and bob, --overlap 0."""
    store, handle = _serve(tmp_path, pair_assets, 2)
    yield store, handle
    handle.stop()
    store.close()


@pytest.fixture
def four_pairs(tmp_path: Path, pair_assets) -> Iterator[tuple[LabelStore, ServerHandle]]:
    store, handle = _serve(tmp_path, pair_assets, 4)
    yield store, handle
    handle.stop()
    store.close()


def _shown(pg) -> int:
    pg.wait_for_selector("#screen[data-pair-id]:not([data-pair-id=''])", timeout=8000)
    return int(pg.get_attribute("#screen", "data-pair-id"))


def _held_by(handle: ServerHandle, who: str) -> set[int]:
    """The pairs leased to ``who`` now: all held (by others than a name nobody has) less
    those held by others than ``who``."""
    leases = handle.state.leases
    with leases.lock:
        now = time.monotonic()
        return leases.held_by_others("nobody", now) - leases.held_by_others(who, now)


def test_a_pair_is_with_one_labeller_and_a_refusal_reveals_no_answer(browser, no_overlap) -> None:
    store, handle = no_overlap
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    try:
        alice = context.new_page()
        alice.goto(handle.labeller_urls["alice"])
        first = _shown(alice)
        # alice's page holds both pairs: the one on screen and the next, preloaded.
        wait_for(alice, lambda: _held_by(handle, "alice") == {1, 2})
        second = ({1, 2} - {first}).pop()

        bob = context.new_page()  # a second tab of the same browser, with bob's own link
        bob.goto(handle.labeller_urls["bob"])
        bob.wait_for_function("() => document.getElementById('you').textContent.includes('bob')")
        # Every ready pair is alice's: bob waits (his page asks every 1.5 s) and is never
        # handed one of hers, where the old page gave him one anyway.
        bob.wait_for_timeout(3200)
        assert bob.get_attribute("#screen", "data-pair-id") in (None, "")
        assert _held_by(handle, "bob") == set()

        # alice leaves her second pair longer than its lease: it is bob's now.
        handle.state.leases.release(second)
        assert _shown(bob) == second
        wait_playing(bob, second)
        bob.keyboard.press("ArrowRight")
        wait_for(bob, lambda: {lb.pair_id for lb in store.labels()} == {second})

        alice.bring_to_front()
        wait_playing(alice, first)
        alice.keyboard.press("ArrowLeft")
        wait_playing(alice, second)
        alice.keyboard.press("ArrowLeft")  # the pair bob answered "right"
        refusal = alice.locator("#toasts .toast.error")
        refusal.wait_for(timeout=8000)
        message = refusal.inner_text()
        assert message == f"Another labeller has answered pair {second}."
        # True, and nothing of bob's answer: not his side, not that it differed, not his name.
        for leak in ("right", "left", "different", "kept", "bob"):
            assert leak not in message.lower(), message
        labels = {lb.pair_id: (lb.labeller, lb.answer) for lb in store.labels()}
        assert labels == {second: ("bob", Answer.RIGHT), first: ("alice", Answer.LEFT)}
        assert alice.locator("#btn-undo").is_enabled()  # her own answer to pair `first`
    finally:
        context.close()


def test_the_labellers_box_counts_an_answer_as_soon_as_it_is_saved(browser, four_pairs) -> None:
    """The counts come with the status, read every 2 s: after a saved answer the page reads it
    at once, so "alice: N" never lags the progress box (it did, by up to 2 s, in the guide's
    screenshot: "4 of 8 labels" over "alice: 1, bob: 2")."""
    store, handle = four_pairs
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    try:
        alice = context.new_page()
        alice.goto(handle.labeller_urls["alice"])
        for given in range(1, 5):
            wait_playing(alice, _shown(alice))
            alice.keyboard.press("ArrowLeft")
            alice.wait_for_function(
                f"() => document.getElementById('progress-text').textContent.startsWith('{given} ')",
                timeout=8000,
            )
            # One status read (every 2 s) in a second would pass by chance: 1 in 16 for four.
            alice.wait_for_function(
                "() => document.querySelector('#labeller-counts li.me').textContent"
                f" === 'alice: {given}'",
                timeout=1000,
            )
        assert len(store.labels()) == 4
    finally:
        context.close()
