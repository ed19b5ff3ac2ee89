"""The labelling page in Chromium: the task text, newest pairs first, the pacing wait and ETA."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
from rlhf.store import VIDEO_READY
from tests.web.pages import Server, wait_for, wait_playing

pytestmark = pytest.mark.browser

TASK = "<script>window.__pwned = 1</script><b>run backwards</b>"


def test_task_text_is_shown_as_text_never_as_markup(serve: Server, page) -> None:
    store, _, handle = serve(ready=2)
    store.set_meta("task", TASK)
    page.goto(handle.url)
    page.wait_for_function("() => !document.getElementById('task-box').hidden")
    assert page.text_content("#task") == TASK
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("#task b").count() == 0


def test_newest_pairs_are_shown_first(serve: Server, page, pair_assets, tmp_path: Path) -> None:
    store, videos, handle = serve(ready=2)  # iteration 0: pairs 1 and 2
    pair, video = pair_assets
    for pair_id in store.add_pairs([pair, pair], iteration=5):  # pairs 3 and 4
        (videos / f"{pair_id}.mp4").write_bytes(video)
        store.mark_video(pair_id, VIDEO_READY, path=str(videos / f"{pair_id}.mp4"))
    page.goto(handle.url)
    shown = []
    for _ in range(3):
        pair_id = int(page.get_attribute("#screen", "data-pair-id") or 0) or None
        if pair_id is None:
            page.wait_for_selector("#screen[data-pair-id]:not([data-pair-id=''])")
            pair_id = int(page.get_attribute("#screen", "data-pair-id"))
        wait_playing(page, pair_id)
        shown.append(pair_id)
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(
            f"() => document.getElementById('screen').dataset.pairId !== '{pair_id}'"
        )
    assert shown == [3, 4, 1]


def wait_both(page, learning: str, phase: str) -> None:
    """Wait until the progress box includes ``learning`` while the header reads ``phase``."""
    page.wait_for_function(
        "([learning, phase]) => document.getElementById('learning').textContent"
        ".includes(learning) && document.getElementById('phase').textContent === phase",
        arg=[learning, phase],
    )


def test_pacing_wait_counts_down_in_the_trainers_numbers_with_an_eta(serve: Server, page) -> None:
    store, _, handle = serve(ready=3)
    status = TrainerStatus(
        Phase.WAITING,
        message="waiting for 3 more labels before the agent goes on (paused while the labeller"
        " catches up with the schedule)",
        iteration=12,
        labels_used=40,
        labels_needed=3,
        labels_target=3,
        eta_seconds=754.0,
    )
    store.set_meta(STATUS_KEY, status.to_json())
    page.goto(handle.url)
    learning = page.locator("#learning")
    learning.wait_for()
    page.wait_for_function(
        "() => document.getElementById('learning').textContent.includes('3 more labels')"
    )
    assert "The agent is paused until you catch up: 3 more labels (0 of 3 given)" in (
        learning.text_content() or ""
    )
    assert page.text_content("#phase").startswith("waiting for 3 more labels")
    # The trainer's 754 s is mostly waits: while labels are still to give, the time left is
    # theirs at the answers' pace, and none is shown before that pace is known.
    assert page.text_content("#eta") == "-"
    wait_playing(page, 1)
    page.keyboard.press("ArrowRight")
    # The header counts down from the same number as the box (the trainer's own message, which
    # still says 3, is not shown), and never repeats the page's address. Both are read in one
    # evaluation: a status poll between two reads may re-render them (the same number in both).
    wait_both(page, "2 more labels (1 of 3", "waiting for 2 more labels")
    wait_playing(page, 2)
    page.keyboard.press("ArrowRight")
    wait_both(page, "1 more label (2 of 3", "waiting for 1 more label")
    # Before the first fit, the same wait says when learning starts.
    store.set_meta(STATUS_KEY, status.with_(labels_used=0, labels_target=5).to_json())
    page.wait_for_function(
        "() => document.getElementById('learning').textContent"
        ".startsWith('The agent starts learning after 3 more labels (2 of 5 given)')",
        timeout=8000,
    )


def test_a_status_asked_before_an_answer_was_saved_does_not_set_the_count_back(
    serve: Server, page
) -> None:
    """The race a loaded CI run met: a poll leaves, the answer is saved, the poll's older count
    comes back. The page holds the newer count until a status asked after the answer arrives."""
    store, _, handle = serve(ready=3)
    status = TrainerStatus(
        Phase.WAITING, iteration=3, labels_used=0, labels_needed=3, labels_target=3
    )
    store.set_meta(STATUS_KEY, status.to_json())
    page.goto(handle.url)
    page.wait_for_function(
        "() => document.getElementById('learning').textContent.includes('3 more labels')"
    )
    held = []  # each status poll, answered by the server when it was asked, not yet delivered

    def hold(route) -> None:
        held.append((route, route.fetch()))

    page.route("**/api/status*", hold)
    wait_for(page, lambda: bool(held), timeout=10)  # the page's next poll
    wait_playing(page, 1)
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.getElementById('learning').textContent.includes('2 more labels (1 of 3')"
    )
    route, before = held[0]
    assert before.json()["labels_done"] == 0
    asked = len(held)
    route.fulfill(response=before)  # the poll from before the answer comes back now
    # The next poll is asked only after that one was shown.
    wait_for(page, lambda: len(held) > asked, timeout=10)
    assert "2 more labels (1 of 3 given)" in (page.text_content("#learning") or "")
    assert page.text_content("#phase") == "waiting for 2 more labels"
    for route, response in held[1:]:
        route.fulfill(response=response)
    page.unroute("**/api/status*")
