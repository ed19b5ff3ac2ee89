"""The labelling page in a real (headless) Chromium, driven by Playwright. (The screenshots the
README and the guide show come from real runs: ``scripts/screenshots.py``.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rlhf.config import WebConfig
from rlhf.core.shell import program
from rlhf.core.types import Answer, Pair
from rlhf.store import VIDEO_READY, LabelStore
from tests.web.pages import Server, wait_for, wait_playing

pytestmark = pytest.mark.browser

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route


def _answers(store: LabelStore) -> dict[int, Answer]:
    return {lb.pair_id: lb.answer for lb in store.labels()}


def test_label_progress_and_undo(serve: Server, page: Page, tmp_path: Path) -> None:
    store, _, handle = serve(ready=4)
    page.goto(handle.url)
    wait_playing(page, 1)
    page.wait_for_function("() => document.getElementById('phase').textContent.includes('waiting')")
    assert page.locator("#progress-text").inner_text() == "0 of 25 labels"
    # The next pair is already loaded in the hidden standby video.
    page.wait_for_function(
        "() => { const s = document.querySelector('video.standby');"
        " return s.dataset.pairId === '2' && s.readyState >= 2; }"
    )
    shot = tmp_path / "ui.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000

    page.keyboard.press("ArrowLeft")
    wait_for(page, lambda: _answers(store) == {1: Answer.LEFT})
    wait_playing(page, 2)  # the prefetched pair plays at once
    page.wait_for_function(
        "() => document.getElementById('progress-text').textContent === '1 of 25 labels'"
    )
    assert "Saved #1" in page.locator("#toasts").inner_text()

    page.keyboard.press("u")
    wait_for(page, lambda: _answers(store) == {})
    wait_playing(page, 1)
    page.keyboard.press("ArrowRight")
    wait_playing(page, 2)
    page.keyboard.press("=")
    wait_for(page, lambda: _answers(store) == {1: Answer.RIGHT, 2: Answer.EQUAL})
    page.wait_for_function(
        "() => document.getElementById('progress-text').textContent === '2 of 25 labels'"
    )
    # Buttons work as well as keys.
    wait_playing(page, 3)
    page.get_by_role("button", name="Can't tell").click()
    wait_for(page, lambda: _answers(store).get(3) == Answer.SKIP)


def test_waiting_state_refreshes_itself(serve: Server, page: Page, pair_assets) -> None:
    store, videos, handle = serve(ready=0)
    page.goto(handle.url)
    overlay = page.locator("#overlay-text")
    page.wait_for_function(
        "() => document.getElementById('overlay-text').textContent.startsWith('Waiting for the trainer')"
    )
    assert overlay.is_visible()
    assert page.get_by_role("button", name="Left is better").is_disabled()

    [pair_id] = store.add_pairs([pair_assets[0]])
    (videos / f"{pair_id}.mp4").write_bytes(pair_assets[1])
    store.mark_video(pair_id, VIDEO_READY, path=str(videos / f"{pair_id}.mp4"))
    wait_playing(page, pair_id)  # no reload: the page polls
    assert not overlay.is_visible()
    assert page.get_by_role("button", name="Left is better").is_enabled()


def test_broken_video_shows_message_and_skip_works(serve: Server, page: Page) -> None:
    store, _, handle = serve(ready=1, broken=True)
    page.goto(handle.url)
    page.wait_for_function(
        "() => document.getElementById('overlay-text').textContent.includes('could not be loaded')"
    )
    assert page.get_by_role("button", name="Left is better").is_disabled()
    page.keyboard.press("ArrowLeft")  # ignored: nobody saw this pair
    page.get_by_role("button", name="Can't tell").click()
    wait_for(page, lambda: _answers(store) == {1: Answer.SKIP})


def test_label_is_retried_until_the_server_has_it(serve: Server, page: Page) -> None:
    store, _, handle = serve(ready=2)
    failures = {"left": 2}

    def flaky(route: Route) -> None:
        if failures["left"] > 0:
            failures["left"] -= 1
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/api/label", flaky)
    page.goto(handle.url)
    wait_playing(page, 1)
    page.keyboard.press("ArrowLeft")
    page.wait_for_function(
        "() => document.getElementById('outbox-text').textContent.startsWith('Connection lost')"
    )
    wait_playing(page, 2)  # labelling goes on while the answer waits to be re-sent
    wait_for(page, lambda: _answers(store) == {1: Answer.LEFT}, timeout=10)
    assert failures["left"] == 0
    page.wait_for_function("() => document.getElementById('outbox-text').textContent === ''")


def test_layout_fits_a_narrow_window(serve: Server, page: Page) -> None:
    _, _, handle = serve(ready=1)
    page.set_viewport_size({"width": 380, "height": 800})
    page.goto(handle.url)
    wait_playing(page, 1)
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    for name in ("Left is better", "Right is better", "Equally good", "Can't tell", "Undo"):
        box = page.get_by_role("button", name=name).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 380, name


# -- the end of a run --------------------------------------------------------------------------------
FINISH_GRACE = 20.0


def test_answers_on_their_way_when_the_run_finishes_are_all_stored(
    page: Page, tmp_path: Path, pair_assets: tuple[Pair, bytes]
) -> None:
    from rlhf.config import VideoConfig
    from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
    from rlhf.feedback.session import LabellingSession

    run_root = tmp_path / "runs" / "cheetah"
    store = LabelStore(run_root / "labels.sqlite")
    (run_root / "videos").mkdir()
    store.set_meta(STATUS_KEY, TrainerStatus(Phase.TRAINING, iteration=40).to_json())
    for pair_id in store.add_pairs([pair_assets[0]] * 6):
        path = run_root / "videos" / f"{pair_id}.mp4"
        path.write_bytes(pair_assets[1])
        store.mark_video(pair_id, VIDEO_READY, path=str(path))
    session = LabellingSession(run_root, WebConfig(), VideoConfig(), say=lambda _: None).start()

    # The server's answers to labels are held back, so answers are still in the page's outbox
    # (one in flight, the others queued behind it) when the run finishes.
    held: list[Route] = []
    holding = [True]
    page.route(
        "**/api/label", lambda route: held.append(route) if holding[0] else route.continue_()
    )
    try:
        page.goto(session.url)
        given = {1: Answer.LEFT, 2: Answer.RIGHT, 3: Answer.EQUAL}
        for pair_id, key in zip(given, ("ArrowLeft", "ArrowRight", "ArrowDown"), strict=True):
            wait_playing(page, pair_id)
            page.keyboard.press(key)
        wait_for(page, lambda: len(held) == 1)
        assert _answers(store) == {}

        final = TrainerStatus(
            Phase.FINISHED,
            message="Done <b>after</b> 3 labels.",  # shown as text, never as HTML
            latest_true_return=1234.56,
            labels_used=3,
            resume_command="rlhf train --resume runs/cheetah --total-timesteps 2000000",
        )
        store.set_meta(STATUS_KEY, final.to_json())
        took: list[float] = []
        stopper = threading.Thread(target=_timed_stop, args=(session, FINISH_GRACE, took))
        stopper.start()
        page.wait_for_timeout(300)
        holding[0] = False
        for route in held:
            route.continue_()
        wait_for(page, lambda: not stopper.is_alive(), timeout=FINISH_GRACE + 10)
        assert _answers(store) == given, "an answer made before the finish was lost"
        assert took[0] < FINISH_GRACE, "the page said it was done: the server need not wait"

        page.wait_for_selector("#finished:not([hidden])")
        assert page.locator("#final-return").inner_text() == "1234.6"
        assert page.locator("#final-labels-used").inner_text() == "3"
        assert page.locator("#finished-title").inner_text() == "Training has finished"
        # The page's own sentence under the title, never the title again in other words.
        message = page.locator("#finished-message").inner_text()
        assert message == "There is nothing left to label. Thank you!"
        assert page.locator("#finished b").count() == 0
        assert page.locator("#resume-command").inner_text() == final.resume_command
        assert (
            page.locator("#watch-command")
            .inner_text()
            .startswith(f"{program('tensorboard')} --logdir ")
        )
        assert (
            page.locator("#finished-saving").inner_text().startswith("All your answers are saved")
        )
        assert not page.locator(".choices").is_visible()
    finally:
        holding[0] = False
        session.stop()
        store.close()


def _timed_stop(session: object, grace: float, took: list[float]) -> None:
    start = time.monotonic()
    session.stop(grace=grace)  # type: ignore[attr-defined]
    took.append(time.monotonic() - start)


def test_key_rules_follow_focus(serve: Server, page: Page) -> None:
    """keys.js, as the page loads it: arrows label unless a form control has focus, Space skips
    unless a button or a form control has it (it presses or edits that), p plays, u undoes,
    digits grade only a clip to rate and only on its scale."""
    _, _, handle = serve(ready=1)
    page.goto(handle.url)
    commands = page.evaluate(
        """async () => {
          const { keyCommand } = await import('/static/keys.js');
          const clip = { kind: 'rating', scale: { levels: 3 } };
          const on = (tag, key, current = null) => keyCommand({ key, target: { tagName: tag } }, current);
          return {
            left: on('BODY', 'ArrowLeft'), leftOnRange: on('INPUT', 'ArrowLeft'),
            down: on('BODY', 'ArrowDown'), space: on('BODY', ' '),
            spaceOnButton: on('BUTTON', ' '), spaceOnRange: on('INPUT', ' '),
            s: on('BUTTON', 's'), p: on('BODY', 'P'), u: on('BODY', 'Backspace'),
            grade: on('BODY', '2', clip), offScale: on('BODY', '7', clip),
            digitOnPair: on('BODY', '2', { kind: 'pair' }), other: on('BODY', 'x'),
          };
        }"""
    )
    assert commands == {
        "left": {"answer": "left"},
        "leftOnRange": None,
        "down": {"answer": "equal"},
        "space": {"answer": "skip"},
        "spaceOnButton": None,
        "spaceOnRange": None,
        "s": {"answer": "skip"},
        "p": {"togglePlay": True},
        "u": {"undo": True},
        "grade": {"answer": "grade", "grade": 2},
        "offScale": None,
        "digitOnPair": None,
        "other": None,
    }


def test_playback_speed_is_kept_across_pages(serve: Server, page: Page) -> None:
    """The speed a labeller picks plays the next page's videos too; a stored value that is
    not one of the speed buttons' falls back to 1x."""
    _, _, handle = serve(ready=2)
    page.goto(handle.url)
    wait_playing(page, 1)
    page.click('.speed[data-rate="1.5"]')
    page.reload()
    wait_playing(page, 1)
    assert page.get_attribute('.speed[data-rate="1.5"]', "aria-pressed") == "true"
    assert page.evaluate("document.querySelector('video.active').playbackRate") == 1.5
    page.evaluate("localStorage.setItem('rlhf.rate', '7')")
    page.reload()
    wait_playing(page, 1)
    assert page.get_attribute('.speed[data-rate="1"]', "aria-pressed") == "true"
    assert page.evaluate("document.querySelector('video.active').playbackRate") == 1
