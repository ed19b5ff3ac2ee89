"""The rating page in headless Chromium: one clip, the run's grade scale, keys 0-9 answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlhf.config import WebConfig
from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
from rlhf.core.types import Answer, Pair
from rlhf.server import serve_in_thread
from rlhf.store import SCALE_META, VIDEO_READY, LabelStore
from tests.web.pages import wait_for, wait_playing

pytestmark = pytest.mark.browser

NAMES = ["failed", "wobbly", "<b>fine</b>"]


@pytest.fixture
def rating_run(tmp_path: Path, pair_assets: tuple[Pair, bytes]) -> Iterator[tuple]:
    """Two clips to rate (ids 1, 2) and one pair (id 3), all with a video, served on loopback."""
    pair, video = pair_assets
    store = LabelStore(tmp_path / "labels.sqlite")
    store.set_meta(SCALE_META, {"levels": 3, "names": NAMES})
    videos = tmp_path / "videos"
    videos.mkdir()
    ids = [*store.add_rating_queries([pair.left, pair.right]), *store.add_pairs([pair])]
    for query_id in ids:
        path = videos / f"{query_id}.mp4"
        path.write_bytes(video)
        store.mark_video(query_id, VIDEO_READY, path=str(path))
    handle = serve_in_thread(store, videos, WebConfig(), total_labels_hint=3)
    yield store, handle
    handle.stop()
    store.close()


def _grades(store: LabelStore) -> dict[int, int | None]:
    return {r.pair_id: r.grade for r in store.ratings()}


def test_rating_page_grades_with_keys_and_undo(rating_run, page) -> None:
    store, handle = rating_run
    page.goto(handle.url)
    wait_playing(page, 1)
    grades = page.locator("#grades button")
    assert grades.count() == 3
    assert page.locator("#grades").is_visible() and not page.locator("#btn-left").is_visible()
    # A name is text, never markup.
    assert grades.nth(2).inner_text().endswith("<b>fine</b>")
    assert page.locator("#grades b").count() == 0
    assert page.locator("#pair-id").inner_text() == "clip #1"

    page.keyboard.press("7")  # not on this 3-level scale: nothing happens
    page.keyboard.press("ArrowLeft")  # a pair's answer: not for a clip
    page.wait_for_timeout(300)
    assert _grades(store) == {} and store.labels() == []
    page.keyboard.press("2")
    wait_for(page, lambda: _grades(store) == {1: 2})
    wait_playing(page, 2)
    assert "grade 2" in page.locator("#toasts").inner_text()

    page.keyboard.press("u")  # undo brings the clip back
    wait_for(page, lambda: _grades(store) == {})
    wait_playing(page, 1)
    page.keyboard.press("0")
    wait_playing(page, 2)
    page.get_by_role("button", name="Can't tell").click()  # a skip is a null grade
    wait_for(page, lambda: _grades(store) == {1: 0, 2: None})

    wait_playing(page, 3)  # then a pair: its buttons are back, the grades gone
    assert page.locator("#btn-left").is_visible() and not page.locator("#grades").is_visible()
    page.keyboard.press("1")  # digits do not answer a pair
    page.keyboard.press("ArrowLeft")
    wait_for(page, lambda: {lb.pair_id: lb.answer for lb in store.labels()} == {3: Answer.LEFT})
    assert _grades(store) == {1: 0, 2: None}


def test_a_ratings_run_is_its_own_page_to_its_end(rating_run, page) -> None:
    """One clip and its question, grade keys in the legend, Undo only once there is an answer;
    at the end, the grade agreement and the summary's figures, "finished" in the header even
    once the server is gone, and what to do next."""
    store, handle = rating_run
    store.set_meta(
        STATUS_KEY,
        TrainerStatus(Phase.TRAINING, iteration=2, feedback_kind="ratings").to_json(),
    )
    page.goto(handle.url)
    wait_playing(page, 1)
    assert page.locator("#btn-undo").is_disabled()  # nothing to undo yet
    assert page.locator("#question").inner_text().startswith("How close is this clip")
    assert not page.locator(".captions").is_visible()  # no LEFT / RIGHT over one clip
    divider = page.evaluate(
        "getComputedStyle(document.getElementById('screen'), '::after').display"
    )
    assert divider == "none"
    legend = page.locator(".legend").inner_text()
    assert "0 failed, 1 wobbly, 2 <b>fine</b>" in legend and "left is better" not in legend
    page.keyboard.press("1")
    wait_playing(page, 2)
    assert page.locator("#btn-undo").is_enabled()

    summary = TrainerStatus(
        Phase.FINISHED,
        message="training has finished",
        iteration=4,
        env_steps=2048,
        total_timesteps=2000,
        latest_true_return=-12.34,
        labels_used=1,
        feedback_kind="ratings",
        reward_accuracy=0.75,
        resume_command="rlhf train --resume runs/r --total-timesteps 4000",
        final=True,
    )
    store.set_meta(STATUS_KEY, summary.to_json())
    handle.state.begin_closing()
    page.wait_for_selector("#finished:not([hidden])", timeout=8000)
    wait_for(page, lambda: page.locator("#final-accuracy").inner_text() == "75%")
    assert page.locator("#final-accuracy-name").inner_text().lower() == "grade agreement"
    assert page.locator("#final-labels-used-name").inner_text().lower() == "grades used"
    assert page.locator("#final-steps").inner_text() == "2,048"
    assert page.locator("#env-steps").inner_text() == "2,048"  # never "2,048 / 2,000"
    message = page.locator("#finished-message").inner_text()
    assert "finished" not in message.lower()  # the title is not said twice
    assert "not measured" not in page.locator("body").inner_text()
    handle.stop()
    wait_for(page, lambda: page.locator("#server-gone").inner_text() != "", timeout=10)
    assert page.locator("#phase").inner_text() == "finished"  # not "server unreachable"
    assert "run the command below" in page.locator("#server-gone").inner_text()


def test_an_agreement_a_short_run_could_not_measure_is_not_promised_at_its_end(
    rating_run, page
) -> None:
    """Twelve grades hold out too few clips to measure the grade agreement: at the end the page
    says so, never "not measured yet" (there is no later)."""
    store, handle = rating_run
    page.goto(handle.url)
    wait_playing(page, 1)
    page.keyboard.press("1")
    wait_for(page, lambda: _grades(store) == {1: 1})
    summary = TrainerStatus(
        Phase.FINISHED, iteration=4, labels_used=1, feedback_kind="ratings", final=True
    )
    store.set_meta(STATUS_KEY, summary.to_json())
    handle.state.begin_closing()
    page.wait_for_selector("#finished:not([hidden])", timeout=8000)
    text = page.locator("#accuracy-text")
    wait_for(page, lambda: "not measured" in (text.text_content() or ""))
    assert text.text_content() == (
        "Grade agreement on held-out clips: not measured (this run held out too few answers)."
    )
    assert page.locator("#final-accuracy").inner_text() == "-"
