"""Shared fixtures. Every test process runs torch on one thread and renders headless."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
# Ray starts its workers at nice 15, so the suite's Ray tests (one xdist worker runs them all,
# tests/support/workers.py) got next to no CPU beside the other worker's tests and set the
# suite's length. At nice 0 they share the machine evenly; Ray reads RAY_<setting> at start.
os.environ.setdefault("RAY_worker_niceness", "0")

import numpy as np
import pytest
import torch
from flask import Flask
from flask.testing import FlaskClient

from rlhf.core.types import Pair
from rlhf.store import VIDEO_READY, LabelStore
from tests.support.segments import random_segment
from tests.support.workers import RAY

torch.set_num_threads(1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--learning-seed",
        type=int,
        default=None,
        help="run the learning tests on this seed instead of their own, to measure their margins"
        " (each records what it measured as the junitxml property 'measured')",
    )


@pytest.fixture
def learning_seed(request: pytest.FixtureRequest) -> Callable[[int], int]:
    """``learning_seed(default)``: the seed a learning test runs on (``--learning-seed`` wins)."""
    given = request.config.getoption("--learning-seed")
    return lambda default: default if given is None else given


@pytest.fixture
def rng(learning_seed: Callable[[int], int]) -> np.random.Generator:
    """A seeded generator, so every random test input is reproducible (``--learning-seed`` too)."""
    return np.random.default_rng(learning_seed(0))


@pytest.fixture(autouse=True)
def _ray_only_where_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A test that starts a Ray without ``tests.support.workers.RAY`` fails, and says so.

    Unmarked, it would still pass, only minutes slower beside a busy test worker (see RAY). Ray
    puts a local session under ``$RAY_TMPDIR``, which subprocesses (the benches) inherit too; so
    each unmarked test gets a fresh, short one (Ray's socket paths must stay under ~107 chars),
    which must still be empty when the test ends.
    """
    if RAY.mark in request.node.iter_markers(RAY.mark.name):
        yield
        return
    ray_dir = Path(tempfile.mkdtemp(prefix="rlhf-noray-"))
    monkeypatch.setenv("RAY_TMPDIR", str(ray_dir))
    yield
    started = any(ray_dir.iterdir())
    shutil.rmtree(ray_dir, ignore_errors=True)
    if started:
        pytest.fail("this test starts a Ray: mark it with tests.support.workers.RAY", pytrace=False)


# -- web fixtures (labelling server) ---------------------------------------------------------------
@pytest.fixture
def add_pairs(rng: np.random.Generator) -> Callable[[LabelStore, int], list[int]]:
    """Factory: store ``n`` tiny pairs (4 steps, 3-d obs) in a store; returns their ids."""

    def add(store: LabelStore, n: int) -> list[int]:
        return store.add_pairs([Pair(random_segment(rng), random_segment(rng)) for _ in range(n)])

    return add


@pytest.fixture(scope="session")
def mp4_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real, browser-playable H.264 MP4 (64x32, 12 frames of a moving square)."""
    import imageio_ffmpeg

    path = tmp_path_factory.mktemp("mp4") / "clip.mp4"
    writer = imageio_ffmpeg.write_frames(
        str(path), (64, 32), fps=12, codec="libx264", pix_fmt_out="yuv420p", macro_block_size=2,
        output_params=["-movflags", "+faststart"],
    )  # fmt: skip
    writer.send(None)
    for t in range(12):
        frame = np.zeros((32, 64, 3), dtype=np.uint8)
        frame[8:24, 4 * t : 4 * t + 8] = (240, 180, 40)
        writer.send(frame)
    writer.close()
    return path.read_bytes()


@pytest.fixture
def web_run(tmp_path: Path, add_pairs, mp4_bytes: bytes) -> Iterator[tuple[LabelStore, Path]]:
    """A run directory whose store has pairs 1-3 ready (videos written) and pair 4 pending."""
    store = LabelStore(tmp_path / "labels.sqlite")
    videos = tmp_path / "videos"
    videos.mkdir()
    ids = add_pairs(store, 4)
    for pair_id in ids[:3]:
        path = videos / f"{pair_id}.mp4"
        path.write_bytes(mp4_bytes)
        store.mark_video(pair_id, VIDEO_READY, path=str(path))
    yield store, videos
    store.close()


@pytest.fixture
def app(web_run: tuple[LabelStore, Path]) -> Flask:
    """The labelling app over ``web_run`` (loopback, no token, 10 labels requested)."""
    from rlhf.server import create_app

    store, videos = web_run
    flask_app = create_app(store, videos, total_labels_hint=10)
    flask_app.config["TESTING"] = True
    return flask_app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def pytest_configure(config: pytest.Config) -> None:
    from tests.support.toy_env import register

    register()
