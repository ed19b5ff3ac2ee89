"""Segment videos: frames drawn from recorded state match the live env; files play in browsers."""

from __future__ import annotations

import gymnasium as gym
import imageio_ffmpeg
import mujoco
import numpy as np
import pytest

from rlhf.config import VideoConfig
from rlhf.core.types import Pair, Segment
from rlhf.render.captions import text_mask
from rlhf.render.video import (
    SEPARATOR_PX,
    RenderError,
    SegmentRenderer,
    compose_pair,
    render_pair_video,
    write_pair_video,
)
from tests.support.helpers import random_states, state_segment

# Not square, so a swapped width/height shows up.
CFG = VideoConfig(width=96, height=64)


def _live_frames(env_id: str, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step a live env with random actions; render it (after mj_forward) like SegmentRenderer does.

    The live renderer is configured here by hand (track camera, shadows and reflections off), so
    a SegmentRenderer that used another camera or other flags would not match.
    """
    env = gym.make(
        env_id, render_mode="rgb_array", width=CFG.width, height=CFG.height, camera_name="track"
    )
    env.reset(seed=seed)
    env.action_space.seed(seed)
    sim = env.unwrapped
    sim.model.vis.quality.offsamples = 4 if CFG.antialias else 0  # as SegmentRenderer sets it
    sim.render()
    viewer = sim.mujoco_renderer.viewer
    viewer.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
    viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
    qpos, qvel, frames = [], [], []
    for _ in range(steps):
        env.step(env.action_space.sample())
        # gymnasium's step leaves the kinematics one substep stale; mj_forward brings them level
        mujoco.mj_forward(sim.model, sim.data)
        qpos.append(sim.data.qpos.copy())
        qvel.append(sim.data.qvel.copy())
        frames.append(sim.render())
    # Free this context's GL objects now, while it is current (see SegmentRenderer.close).
    viewer.make_context_current()
    viewer.con.free()
    env.close()
    return np.array(qpos), np.array(qvel), np.array(frames)


@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Hopper-v5"])
def test_frame_from_recorded_state_equals_live_frame(env_id: str) -> None:
    qpos, qvel, live = _live_frames(env_id, steps=8, seed=3)
    renderer = SegmentRenderer(env_id, CFG)
    try:
        frames = renderer.render(qpos, qvel)
    finally:
        renderer.close()
    assert frames.shape == (8, CFG.height, CFG.width, 3)
    assert frames.dtype == np.uint8
    assert live.std() > 10, "the live frames are blank; the comparison would prove nothing"
    assert not np.array_equal(live[0], live[-1]), "the robot should move between steps"
    np.testing.assert_array_equal(frames, live)


@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Reacher-v5"])
def test_frame_does_not_depend_on_render_history(env_id: str) -> None:
    qpos, qvel = random_states(env_id, steps=12, seed=1)
    target = (qpos[-1:], qvel[-1:])
    fresh = SegmentRenderer(env_id, CFG)
    try:
        alone = fresh.render(*target)
        after_early = fresh.render(
            np.concatenate([qpos[:3], target[0]]), np.concatenate([qvel[:3], target[1]])
        )
        after_late = fresh.render(qpos[6:], qvel[6:])
    finally:
        fresh.close()
    assert alone.std() > 10
    np.testing.assert_array_equal(after_early[-1], alone[0])
    np.testing.assert_array_equal(after_late[-1], alone[0])
    assert not np.array_equal(after_early[0], alone[0]), "distinct states should look distinct"


def test_track_camera_used_when_the_model_has_one() -> None:
    cheetah, reacher = SegmentRenderer("HalfCheetah-v5", CFG), SegmentRenderer("Reacher-v5", CFG)
    try:
        assert cheetah.has_track_camera and not reacher.has_track_camera
        assert cheetah.fps == pytest.approx(20.0)  # real time: 1 / dt
        assert reacher.fps == pytest.approx(50.0)
        # Two renderers in one thread each draw with their own GL context.
        q, v = random_states("HalfCheetah-v5", 2, 0)
        first = cheetah.render(q, v)
        reacher.render(*random_states("Reacher-v5", 2, 0))
        np.testing.assert_array_equal(cheetah.render(q, v), first)
    finally:
        cheetah.close()
        reacher.close()
    assert SegmentRenderer("HalfCheetah-v5", VideoConfig(fps=7.5)).fps == 7.5


def test_bad_state_and_unknown_env_raise_render_error() -> None:
    renderer = SegmentRenderer("HalfCheetah-v5", CFG)
    try:
        with pytest.raises(RenderError, match="qpos"):
            renderer.render(np.zeros((3, 5)), np.zeros((3, 9)))
    finally:
        renderer.close()
    with pytest.raises(RenderError, match="unknown"):
        SegmentRenderer("NoSuchEnv-v0", CFG)


def test_compose_pair_layout_is_even_and_captioned(rng: np.random.Generator) -> None:
    left = rng.integers(0, 255, (2, 21, 33, 3), dtype=np.uint8)
    right = rng.integers(0, 255, (2, 21, 33, 3), dtype=np.uint8)
    out = compose_pair(left, right, labels=("A", "B"))
    assert out.shape == (2, 22, 2 * 33 + SEPARATOR_PX, 3)  # odd height padded to even
    # Clips sit untouched outside the caption boxes, on either side of the separator.
    np.testing.assert_array_equal(out[:, 12:21, :33], left[:, 12:])
    np.testing.assert_array_equal(
        out[:, 12:21, 33 + SEPARATOR_PX : 66 + SEPARATOR_PX], right[:, 12:]
    )
    # The caption "A" is drawn in white at the top-left of the left clip.
    glyph = text_mask("A")
    assert (out[:, 2 : 2 + glyph.shape[0], 2 : 2 + glyph.shape[1]][:, glyph] == 255).all()


def test_written_video_decodes_as_browser_playable_h264(tmp_path, rng: np.random.Generator) -> None:
    left = rng.integers(0, 255, (12, 64, 96, 3), dtype=np.uint8)
    left[:] = left[:1]  # still frames compress well, so the decoded picture can be checked
    right = np.full_like(left, 200)
    path = write_pair_video(left, right, tmp_path / "pair.mp4", fps=20.0)
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    decoded = [np.frombuffer(f, np.uint8).reshape(64, -1, 3) for f in reader]
    assert meta["codec"] == "h264"
    assert meta["pix_fmt"].startswith("yuv420p")
    assert meta["size"] == (2 * 96 + SEPARATOR_PX, 64)
    assert meta["fps"] == pytest.approx(20.0)
    assert len(decoded) == 12
    assert abs(decoded[5][40:, 100 + SEPARATOR_PX :].astype(int) - 200).mean() < 3
    data = path.read_bytes()
    assert data.find(b"moov") < data.find(b"mdat"), "+faststart puts the index first"
    assert [p.name for p in tmp_path.iterdir()] == ["pair.mp4"], "no temporary file left behind"


def test_failed_write_leaves_no_file(tmp_path) -> None:
    frames = np.zeros((3, 8, 8, 3), np.uint8)
    with pytest.raises(ValueError):
        write_pair_video(frames, frames[:, :4], tmp_path / "x.mp4", fps=10)
    assert list(tmp_path.iterdir()) == []


def test_render_pair_video_from_segments(tmp_path) -> None:
    qpos, qvel = random_states("Hopper-v5", steps=6, seed=2)

    def segment(q: np.ndarray, v: np.ndarray) -> Segment:
        return state_segment(q, v, "Hopper-v5", obs_dim=11, act_dim=3)

    cache: dict[str, SegmentRenderer] = {}
    cfg = VideoConfig(width=64, height=64, fps=10)
    path = render_pair_video(
        Pair(segment(qpos[:3], qvel[:3]), segment(qpos[3:], qvel[3:])),
        tmp_path / "p.mp4",
        cfg,
        cache,
    )
    try:
        assert set(cache) == {"Hopper-v5"}
        reader = imageio_ffmpeg.read_frames(str(path))
        meta = next(reader)
        assert meta["size"] == (2 * 64 + SEPARATOR_PX, 64) and meta["fps"] == pytest.approx(10)
        assert sum(1 for _ in reader) == 3
    finally:
        for renderer in cache.values():
            renderer.close()
