"""The page fixtures of the browser tests (tests/web/conftest.py hands them to every module): one
Chromium per module, a pair and its side-by-side video, a served run, a page; and the waits."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from rlhf.config import WebConfig
from rlhf.core.chromium import CHROMIUM, CHROMIUM_ARGS
from rlhf.core.types import Pair, Segment
from rlhf.server import ServerHandle, serve_in_thread
from rlhf.store import VIDEO_READY, LabelStore

try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - the test script installs it
    sync_playwright = None  # type: ignore[assignment]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if sync_playwright is None:
        pytest.skip("the playwright package is not installed (pip install -e '.[test]')")
    if not CHROMIUM.exists():
        pytest.skip(
            "Debian's chromium is not installed at /usr/bin/chromium (apt install chromium)"
        )
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _cheetah_segments(length: int = 50) -> tuple[Segment, Segment]:
    """Two real HalfCheetah segments: a bounding open-loop gait and random flailing."""
    import gymnasium as gym

    env = gym.make("HalfCheetah-v5")
    rng = np.random.default_rng(0)
    segments = []
    for policy in ("gait", "random"):
        obs, _ = env.reset(seed=1)
        sim = env.unwrapped
        rows: dict[str, list] = {k: [] for k in ("obs", "actions", "true_rewards", "qpos", "qvel")}
        for t in range(length + 30):
            phase = 0.45 * t
            if policy == "gait":
                action = np.sin(phase + np.array([0.0, 0.6, 1.2, np.pi, np.pi + 0.6, np.pi + 1.2]))
            else:
                action = rng.uniform(-1, 1, size=6)
            qpos, qvel = sim.data.qpos.copy(), sim.data.qvel.copy()
            next_obs, reward, *_ = env.step(action)
            if t >= 30:  # skip the start, when both just stand there
                for key, value in zip(rows, (obs, action, reward, qpos, qvel), strict=True):
                    rows[key].append(value)
            obs = next_obs
        segments.append(
            Segment(
                obs=np.asarray(rows["obs"], np.float32),
                actions=np.asarray(rows["actions"], np.float32),
                true_rewards=np.asarray(rows["true_rewards"], np.float32),
                qpos=np.asarray(rows["qpos"]),
                qvel=np.asarray(rows["qvel"]),
                env_id="HalfCheetah-v5",
            )
        )
    env.close()
    return segments[0], segments[1]


def _synthetic_video(path: Path) -> None:
    """Fallback clip: two coloured balls bouncing at different heights, side by side."""
    import imageio_ffmpeg

    writer = imageio_ffmpeg.write_frames(
        str(path), (512, 256), fps=25, codec="libx264", pix_fmt_out="yuv420p",
        output_params=["-movflags", "+faststart"],
    )  # fmt: skip
    writer.send(None)
    yy, xx = np.mgrid[:256, :256]
    for t in range(50):
        frame = np.full((256, 512, 3), 235, np.uint8)
        frame[200:, :] = (120, 140, 120)
        for half, (height, colour) in enumerate(((140, (220, 80, 40)), (50, (40, 90, 220)))):
            cy = 190 - abs(np.sin(t * 0.2)) * height
            ball = (yy - cy) ** 2 + (xx - 128) ** 2 < 18**2
            frame[:, 256 * half : 256 * (half + 1)][ball] = colour
        writer.send(frame)
    writer.close()


@pytest.fixture(scope="module")
def pair_assets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pair, bytes]:
    """One pair of segments and its side-by-side video (real HalfCheetah frames when possible)."""
    path = tmp_path_factory.mktemp("media") / "pair.mp4"
    try:
        from rlhf.config import VideoConfig
        from rlhf.render.video import render_pair_video

        pair = Pair(*_cheetah_segments())
        render_pair_video(pair, path, VideoConfig())
    except Exception:  # no GL or no rlhf.render.video yet: the page is tested all the same
        rng = np.random.default_rng(0)
        seg = Segment(
            obs=rng.normal(size=(4, 3)).astype(np.float32),
            actions=np.zeros((4, 2), np.float32),
            true_rewards=np.zeros(4, np.float32),
            qpos=np.zeros((4, 2)),
            qvel=np.zeros((4, 2)),
            env_id="HalfCheetah-v5",
        )
        pair = Pair(seg, seg)
        _synthetic_video(path)
    return pair, path.read_bytes()


Server = Callable[..., tuple[LabelStore, Path, ServerHandle]]


@pytest.fixture
def serve(tmp_path: Path, pair_assets: tuple[Pair, bytes]) -> Iterator[Server]:
    """Factory: a run with ``ready`` pairs (videos written) served on loopback."""
    handles: list[tuple[LabelStore, ServerHandle]] = []
    pair, video = pair_assets

    def start(ready: int, broken: bool = False) -> tuple[LabelStore, Path, ServerHandle]:
        store = LabelStore(tmp_path / "labels.sqlite")
        videos = tmp_path / "videos"
        videos.mkdir()
        store.set_meta("run_name", "HalfCheetah-v5__learned__1")
        store.set_meta("env_id", "HalfCheetah-v5")
        store.set_meta(
            "trainer_status",
            {"iteration": 3, "env_steps": 6144, "total_timesteps": 1_000_000,
             "latest_true_return": -41.7, "labels_requested": 25, "phase": "waiting for labels"},
        )  # fmt: skip
        for pair_id in store.add_pairs([pair] * ready):
            path = videos / f"{pair_id}.mp4"
            path.write_bytes(b"this is not a video" if broken else video)
            store.mark_video(pair_id, VIDEO_READY, path=str(path))
        handle = serve_in_thread(store, videos, WebConfig(), total_labels_hint=25)
        handles.append((store, handle))
        return store, videos, handle

    yield start
    for store, handle in handles:
        handle.stop()
        store.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 860})
    pg = context.new_page()
    yield pg
    context.close()


def wait_for(page: Page, predicate: Callable[[], bool], timeout: float = 8.0) -> None:
    """Poll ``predicate``; waiting through the page lets Playwright run route handlers meanwhile."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        page.wait_for_timeout(50)


def wait_playing(page: Page, pair_id: int) -> None:
    page.wait_for_selector(f'#screen[data-pair-id="{pair_id}"]', timeout=8000)
    page.wait_for_function(
        "() => { const v = document.querySelector('video.active');"
        " return v.readyState >= 2 && !v.paused && v.currentTime > 0.05; }",
        timeout=8000,
    )
    page.wait_for_timeout(300)  # a key press sooner after a swap counts as a double press
