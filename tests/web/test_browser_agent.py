"""The labelling page in Chromium: the policy clip and the learning curve, two named labellers
on one run (each with their own undo, an overlap pair shown to both), the finished screen."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlhf.config import WebConfig
from rlhf.core.labellers import shows_twice
from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
from rlhf.server import serve_in_thread
from rlhf.store import VIDEO_READY, LabelStore
from rlhf.store.meta import TARGET_META
from rlhf.store.policy import CurvePoint
from tests.web.pages import Server, wait_for, wait_playing

pytestmark = pytest.mark.browser


def test_the_policy_clip_and_learning_curve_are_on_the_page(
    serve: Server, page, pair_assets
) -> None:
    store, videos, handle = serve(ready=2)
    pair, video = pair_assets
    page.goto(handle.url)
    wait_playing(page, 1)
    assert page.locator("#agent").is_hidden()  # nothing to show yet
    for i in range(1, 6):
        store.add_curve_point(CurvePoint(i, 2048 * i, -50.0 + 20 * i, 0.1 * i, 0.6 + 0.05 * i))
    clip_id = store.add_policy_clip(pair.left, iteration=5, env_step=10240)
    (videos / "policy").mkdir()
    path = videos / "policy" / f"{clip_id}.mp4"
    path.write_bytes(video)
    store.mark_policy_clip(clip_id, VIDEO_READY, path=str(path))
    page.wait_for_selector("#agent:not([hidden])", timeout=10_000)
    page.wait_for_function(
        "() => { const v = document.getElementById('policy-video');"
        " return v.readyState >= 2 && !v.paused && v.currentTime > 0.05; }",
        timeout=10_000,
    )
    assert page.get_attribute("#policy-video", "data-clip-id") == str(clip_id)
    assert page.locator("#curve polyline.line-true").count() == 1
    assert page.locator("#curve polyline.line-predicted").count() == 1
    points = page.get_attribute("#curve polyline.line-true", "points") or ""
    assert len(points.split()) == 5
    # The figures beside the curve are the header's (the status's): the curve's last point is
    # one rollout's mean, and would disagree with it.
    assert page.text_content("#curve-true") == page.text_content("#latest-return") == "-41.7"
    assert "not measured yet" in (page.text_content("#accuracy-text") or "")
    status = TrainerStatus.from_json(store.get_meta(STATUS_KEY))
    store.set_meta(STATUS_KEY, status.with_(iteration=7, reward_accuracy=0.85).to_json())
    page.wait_for_function(
        "() => document.getElementById('accuracy-text').textContent.includes('85%')"
    )
    caption = page.text_content("#policy-caption") or ""
    assert caption.startswith("Iteration 5") and "the run is at iteration 7" in caption


@pytest.fixture
def two_labellers(tmp_path: Path, pair_assets) -> Iterator[tuple[LabelStore, dict[str, str]]]:
    """Eight ready pairs served to alice and bob; overlap 0.5 (pairs 2, 4, 5, 7 go to both)."""
    pair, video = pair_assets
    store = LabelStore(tmp_path / "labels.sqlite")
    videos = tmp_path / "videos"
    videos.mkdir()
    for pair_id in store.add_pairs([pair] * 8):
        (videos / f"{pair_id}.mp4").write_bytes(video)
        store.mark_video(pair_id, VIDEO_READY, path=str(videos / f"{pair_id}.mp4"))
    cfg = WebConfig(labeller=("alice", "bob"), overlap=0.5)
    handle = serve_in_thread(store, videos, cfg, total_labels_hint=8)
    yield store, handle.labeller_urls
    handle.stop()
    store.close()


def _shown(pg) -> int:
    pg.wait_for_selector("#screen[data-pair-id]:not([data-pair-id=''])", timeout=8000)
    return int(pg.get_attribute("#screen", "data-pair-id"))


def test_two_named_labellers_label_one_run(browser, two_labellers) -> None:
    store, urls = two_labellers
    contexts = [browser.new_context(viewport={"width": 1000, "height": 900}) for _ in urls]
    try:
        alice, bob = (ctx.new_page() for ctx in contexts)
        alice.goto(urls["alice"])
        first = _shown(alice)
        assert first == 1 and not shows_twice(first, 0.5)
        wait_playing(alice, first)
        alice.keyboard.press("ArrowLeft")
        second = _shown(alice)
        wait_playing(alice, second)
        alice.keyboard.press("ArrowRight")  # pair 2: an overlap pair
        wait_for(alice, lambda: len(store.labels()) == 2)
        assert {lb.pair_id: lb.labeller for lb in store.labels()} == {1: "alice", 2: "alice"}

        bob.goto(urls["bob"])
        bob.wait_for_function("() => document.getElementById('you').textContent.includes('bob')")
        # bob is shown alice's overlap pair (to measure agreement), never her other one.
        assert _shown(bob) == 2
        wait_playing(bob, 2)
        bob.keyboard.press("ArrowRight")
        wait_for(bob, lambda: store.labeller_stats().compared == 1)
        assert _shown(bob) not in (1, 2)
        # bob's undo takes back his own answer only; alice's labels stay as they were.
        bob.wait_for_timeout(300)
        bob.keyboard.press("u")
        wait_for(bob, lambda: store.labeller_stats().compared == 0)
        assert [(lb.pair_id, lb.labeller) for lb in store.labels()] == [
            (1, "alice"),
            (2, "alice"),
        ]
        bob.wait_for_function("() => document.getElementById('screen').dataset.pairId === '2'")
        wait_playing(bob, 2)
        bob.keyboard.press("ArrowRight")
        wait_for(bob, lambda: store.labeller_stats().agreement == 1.0)
        # The stats view on each page: answers per labeller, never the agreement (it would
        # tell bob alice's answers).
        alice.wait_for_function(
            "() => document.getElementById('labeller-counts').textContent.includes('bob: 1')",
            timeout=8000,
        )
        assert "%" not in (alice.text_content("#agreement") or "")
        assert alice.text_content("#signed-in") == "Signed in as alice"
        counts = alice.locator("#labeller-counts li").all_text_contents()
        assert counts == ["alice: 2", "bob: 1"]
        assert alice.text_content("#labeller-counts li.me") == "alice: 2"
    finally:
        for ctx in contexts:
            ctx.close()


def test_two_labellers_tabs_in_one_browser_each_label_as_their_own(browser, two_labellers) -> None:
    """One browser keeps one token cookie: bob's link opened after alice's must not make
    alice's tab label as bob."""
    store, urls = two_labellers
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    try:
        alice = context.new_page()
        alice.goto(urls["alice"])
        first = _shown(alice)
        wait_playing(alice, first)
        bob = context.new_page()  # the same browser: the cookie is now bob's
        bob.goto(urls["bob"])
        bob.wait_for_function("() => document.getElementById('you').textContent.includes('bob')")
        alice.bring_to_front()
        alice.keyboard.press("ArrowLeft")
        wait_for(alice, lambda: len(store.labels()) == 1)
        assert [(lb.pair_id, lb.labeller) for lb in store.labels()] == [(first, "alice")]
        alice.wait_for_function(
            "() => document.getElementById('you').textContent.includes('alice')"
        )
        assert alice.text_content("#signed-in") == "Signed in as alice"
    finally:
        context.close()


def test_the_finished_screen_shows_the_run_summary(serve: Server, page) -> None:
    store, _, handle = serve(ready=2)
    page.goto(handle.url)
    wait_playing(page, 1)
    page.keyboard.press("ArrowLeft")
    wait_for(page, lambda: len(store.labels()) == 1)
    status = TrainerStatus(
        Phase.FINISHED, message="Run finished.", iteration=40, labels_used=1
    ).with_(latest_true_return=1234.5)
    store.set_meta(STATUS_KEY, status.to_json())
    handle.state.begin_closing()
    page.wait_for_selector("#finished:not([hidden])", timeout=8000)
    assert page.text_content("#finished-title") == "Training has finished"
    assert page.text_content("#final-return") == "1234.5"
    assert page.text_content("#final-labels-done") == "1"
    assert page.locator(".choices").is_hidden()


def test_after_the_end_the_page_reads_the_final_figures_at_once(serve: Server, page) -> None:
    """The run ends, then fits its last labels and writes summary.json; its server waits 3 s
    at most for the pages to read those final figures. Polling every 2 s, a page on a busy
    machine missed them (a real ratings run's finished page said 11 labels used, summary.json
    12): until they come, the page asks every 0.4 s."""
    store, _, handle = serve(ready=1)
    asked: list[float] = []
    page.on("request", lambda r: "/api/status" in r.url and asked.append(time.monotonic()))
    store.add_curve_point(CurvePoint(1, 1024, -50.0, 0.1, 0.6))
    page.goto(handle.url)
    wait_playing(page, 1)
    page.wait_for_function("() => document.getElementById('curve-x').textContent.includes('1,024')")
    page.wait_for_timeout(300)  # the agent view's next read is 5 s away
    # The run's last iterations, then its end: the curve is read again at once, while the
    # server is still up (a real run's finished page showed its curve up to iteration 2 of 4).
    store.add_curve_point(CurvePoint(2, 2048, -40.0, 0.2, 0.7))
    ended = TrainerStatus(Phase.FINISHED, message="training has finished", labels_used=1)
    store.set_meta(STATUS_KEY, ended.to_json())
    handle.state.begin_closing()
    page.wait_for_selector("#finished:not([hidden])", timeout=8000)
    wait_for(page, lambda: "2,048" in (page.text_content("#curve-x") or ""), timeout=2.0)
    start = len(asked)
    page.wait_for_timeout(2500)
    gaps = [b - a for a, b in zip(asked[start:], asked[start + 1 :], strict=False)]
    assert len(gaps) >= 3 and max(gaps) < 1.0, gaps
    store.set_meta(STATUS_KEY, ended.with_(labels_used=2, final=True).to_json())
    wait_for(page, lambda: page.text_content("#final-labels-used") == "2", timeout=1.5)
    # Once they are read, the page is back at its pace.
    page.wait_for_timeout(500)
    settled = len(asked)
    page.wait_for_timeout(1500)
    assert len(asked) - settled <= 1


def test_the_page_says_which_targets_return_it_shows(serve: Server, page) -> None:
    """--teacher.target: the header's return, the finished screen and the curve name the target."""
    store, _, handle = serve(ready=1)
    page.goto(handle.url)
    wait_playing(page, 1)
    assert page.text_content("#latest-return-label") == "Latest return"
    assert page.text_content("#legend-true-name") == "true return"
    store.set_meta(TARGET_META, "backward")
    wait_for(page, lambda: page.text_content("#latest-return-label") == "Latest backward return")
    assert page.text_content("#legend-true-name") == "target return (backward)"
    assert page.text_content("#final-return-label") == "Final backward return"
