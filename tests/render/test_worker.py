"""The background render worker: renders ahead, survives bad pairs, never outlives its parent."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import imageio_ffmpeg
import numpy as np
import pytest

from rlhf.config import VideoConfig
from rlhf.core.types import Answer, Pair, Segment
from rlhf.render.video import SegmentRenderer
from rlhf.render.worker import (
    RenderWorker,
    probe_gl_backend,
    render_round,
    select_gl_backend,
)
from rlhf.store import LabelStore
from tests.support.children import gone
from tests.support.helpers import random_states, state_segment

CFG = VideoConfig(width=48, height=48, fps=10, ready_ahead=10)
STEPS = 4


def _segment(qpos: np.ndarray, qvel: np.ndarray, env_id: str = "HalfCheetah-v5") -> Segment:
    return state_segment(qpos, qvel, env_id, obs_dim=17, act_dim=6)


def _good_pairs(count: int) -> list[Pair]:
    qpos, qvel = random_states("HalfCheetah-v5", 2 * STEPS * count, seed=0)
    segs = [_segment(qpos[i : i + STEPS], qvel[i : i + STEPS]) for i in range(0, len(qpos), STEPS)]
    return [Pair(segs[2 * i], segs[2 * i + 1]) for i in range(count)]


def _wait_for(cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.05)


def _decoded_frames(path: str) -> int:
    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    assert meta["codec"] == "h264"
    return sum(1 for _ in reader)


def test_worker_renders_queue_marks_bad_pairs_failed_and_stops_cleanly(tmp_path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    good = _good_pairs(3)
    qpos, qvel = good[0].left.qpos, good[0].left.qvel
    unknown_env = Pair(_segment(qpos, qvel, "NoSuchEnv-v0"), _segment(qpos, qvel, "NoSuchEnv-v0"))
    wrong_width = Pair(_segment(qpos[:, :3], qvel), _segment(qpos[:, :3], qvel))
    ids = store.add_pairs([good[0], unknown_env, good[1], wrong_width, good[2]])
    # A pair left 'rendering' by a worker that died is picked up again on start.
    assert [r.id for r in store.claim_for_render(1)] == [ids[0]]

    worker = RenderWorker(tmp_path / "labels.sqlite", tmp_path / "videos", CFG, poll_interval=0.05)
    with worker:
        pid = worker.pid
        assert worker.is_alive()
        _wait_for(lambda: store.counts().pending_video == 0)
        assert worker.is_alive(), "bad pairs must not kill the worker"
    assert not worker.is_alive()
    assert pid not in [p.pid for p in mp.active_children()]
    assert gone(pid)

    records = {i: store.get_pair_record(i) for i in ids}
    for i in (ids[0], ids[2], ids[4]):
        assert records[i].video_status == "ready", records[i].video_error
        assert records[i].video_path == str(tmp_path.resolve() / "videos" / f"{i}.mp4")
        assert _decoded_frames(records[i].video_path) == STEPS
    assert records[ids[1]].video_status == "failed"
    assert "NoSuchEnv-v0" in records[ids[1]].video_error
    assert records[ids[3]].video_status == "failed"
    assert "qpos" in records[ids[3]].video_error and "\n" not in records[ids[3]].video_error
    assert store.get_meta("render_worker")["pid"] == pid


def test_worker_keeps_only_ready_ahead_pairs_ready(tmp_path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = store.add_pairs(_good_pairs(5))
    cfg = VideoConfig(width=48, height=48, fps=10, ready_ahead=2)
    with RenderWorker(store.path, tmp_path / "videos", cfg, poll_interval=0.05):
        _wait_for(lambda: store.counts().ready_unlabelled == 2)
        time.sleep(1.0)  # many polls: it must not render further
        counts = store.counts()
        assert (counts.ready_unlabelled, counts.pending_video) == (2, 3)
        # A label frees a slot: the worker tops the queue up again, with the oldest pair.
        store.add_label(ids[0], Answer.LEFT)
        _wait_for(lambda: store.counts().ready_unlabelled == 2)
        assert store.get_pair_record(ids[2]).video_status == "ready"
        assert store.counts().pending_video == 2
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == [f"{i}.mp4" for i in ids[:3]]


def test_stop_mid_round_returns_claimed_pairs_to_pending(tmp_path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = store.add_pairs(_good_pairs(3))
    calls = iter([False, True, True])
    renderers: dict[str, SegmentRenderer] = {}
    try:
        claimed = render_round(store, tmp_path, CFG, renderers, should_stop=lambda: next(calls))
    finally:
        for renderer in renderers.values():
            renderer.close()
    assert claimed == 3
    assert [store.get_pair_record(i).video_status for i in ids] == ["ready", "pending", "pending"]


_PARENT = """
import sys, time
from rlhf.config import VideoConfig
from rlhf.render.worker import RenderWorker
worker = RenderWorker(sys.argv[1], sys.argv[2], VideoConfig(), poll_interval=0.05).start()
print(worker.pid, flush=True)
time.sleep(120)
"""


def test_worker_exits_when_its_parent_is_killed(tmp_path) -> None:
    LabelStore(tmp_path / "labels.sqlite").close()
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(_PARENT),
            str(tmp_path / "labels.sqlite"),
            str(tmp_path / "v"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")},
    )
    try:
        worker_pid = int(parent.stdout.readline())
        _wait_for(
            lambda: LabelStore(tmp_path / "labels.sqlite").get_meta("render_worker") is not None
        )
        assert not gone(worker_pid)
        parent.send_signal(signal.SIGKILL)  # no cleanup, no atexit: only the worker can notice
        parent.wait()
        _wait_for(lambda: gone(worker_pid), timeout=10.0)
    finally:
        parent.kill()
        parent.wait()
        if not gone(worker_pid):
            os.kill(worker_pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("environ", "broken", "expected"),
    [
        ({"MUJOCO_GL": "osmesa"}, set(), None),
        ({"DISPLAY": ":0"}, set(), None),
        ({}, set(), "egl"),
        ({}, {"egl"}, "osmesa"),
    ],
)
def test_gl_backend_choice(environ: dict, broken: set, expected: str | None) -> None:
    probed: list[str] = []

    def probe(name: str) -> str | None:
        probed.append(name)
        return "EGLError: no device" if name in broken else None

    backend, note = select_gl_backend(environ, probe)
    assert backend == expected
    if expected == "osmesa":
        assert "no device" in note, "the EGL failure is reported"
    if not probed:
        assert "MUJOCO_GL" in note or "DISPLAY" in note


def test_probe_tells_a_working_backend_from_a_broken_one() -> None:
    assert probe_gl_backend("egl") is None  # libegl1 is a required system package
    error = probe_gl_backend("nosuchgl")
    assert error is not None and "nosuchgl" in error


def test_render_round_renders_a_clip_to_rate_alone(tmp_path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    pair = _good_pairs(1)[0]
    [clip] = store.add_rating_queries([pair.left])
    assert render_round(store, tmp_path / "videos", CFG, {}) == 1
    rec = store.get_pair_record(clip)
    assert rec.kind == "rating" and rec.video_status == "ready"
    assert _decoded_frames(rec.video_path) == STEPS
    reader = imageio_ffmpeg.read_frames(rec.video_path)
    assert next(reader)["size"] == (CFG.width, CFG.height)  # one clip, not two side by side
    reader.close()


def test_a_sigterm_to_the_whole_group_never_hangs_the_stop(tmp_path) -> None:
    """``timeout`` or a service manager sends SIGTERM to the process group: the workers must
    not die inside the stop event's wait, which would leave the parent's stop() blocked."""
    store = LabelStore(tmp_path / "labels.sqlite")
    worker = RenderWorker(tmp_path / "labels.sqlite", tmp_path / "videos", CFG, poll_interval=0.05)
    worker.start()
    time.sleep(3.0)  # the workers are up, waiting on the stop event between polls
    for pid in worker.pids:
        os.kill(pid, signal.SIGTERM)
    done = threading.Event()
    stopper = threading.Thread(target=lambda: (worker.stop(), done.set()), daemon=True)
    stopper.start()
    assert done.wait(30), "stop() hung after the workers got SIGTERM"
    store.close()
