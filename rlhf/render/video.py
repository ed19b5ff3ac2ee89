"""Segment videos: render a segment from its recorded physics state, write a browser-playable pair.

A segment is shown exactly as it happened: each frame is drawn from the recorded MuJoCo state
(set qpos/qvel, ``mj_forward``, render), never by replaying actions, which would drift into a
different trajectory. The camera depends only on the state (the model's ``track`` camera follows
the centre of mass with a fixed offset; models without one get a fixed free camera), so the
same state always gives the same picture, whatever was rendered before.

Both clips of a pair go into one side-by-side H.264 video, so they always play in sync.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import MutableMapping, Sequence
from pathlib import Path

import numpy as np

from rlhf.config import VideoConfig
from rlhf.types import Pair

TRACK_CAMERA = "track"
"""Gymnasium's MuJoCo models name their body-following camera ``track``."""

SEPARATOR_PX = 4
"""Width of the dark bar between the two clips (even, so an even clip width stays even)."""

_SEPARATOR_RGB = (32, 32, 32)


class RenderError(RuntimeError):
    """A segment cannot be rendered (unknown env, not MuJoCo, state of the wrong size)."""


def _mujoco():
    # Imported lazily: MUJOCO_GL must be settled before mujoco picks its GL backend.
    import mujoco

    return mujoco


class SegmentRenderer:
    """Draws frames of one environment from recorded physics states.

    Makes the gymnasium env once and keeps its GL context, so it must be used in the thread (or
    process) that created it (EGL refuses a context current elsewhere).

    Args:
        env_id: gymnasium id of a MuJoCo environment.
        cfg: frame size, shadow/reflection switches and frame rate.
    """

    def __init__(self, env_id: str, cfg: VideoConfig) -> None:
        import gymnasium as gym

        if env_id not in gym.registry:
            raise RenderError(f"unknown environment id {env_id!r}")
        self.env_id = env_id
        self.cfg = cfg
        try:
            env = gym.make(
                env_id,
                render_mode="rgb_array",
                width=cfg.width,
                height=cfg.height,
                camera_name=TRACK_CAMERA,
            )
        except TypeError as exc:  # non-MuJoCo envs reject the camera/size arguments
            raise RenderError(f"{env_id} is not a MuJoCo environment ({exc})") from exc
        self._env = env
        self._sim = env.unwrapped
        if not hasattr(self._sim, "mujoco_renderer"):
            env.close()
            raise RenderError(f"{env_id} is not a MuJoCo environment")
        self.model = self._sim.model
        self.data = self._sim.data
        self.has_track_camera = self._sim.mujoco_renderer.camera_id != -1
        self._configure_viewer()

    @property
    def fps(self) -> float:
        """Frames per second of the video: ``cfg.fps``, or real time (1 / env dt)."""
        return float(self.cfg.fps) if self.cfg.fps is not None else 1.0 / float(self._sim.dt)

    def _configure_viewer(self) -> None:
        mujoco = _mujoco()
        self._sim.render()  # creates the offscreen viewer (and its GL context) here
        viewer = self._viewer = self._sim.mujoco_renderer.viewer
        flags = viewer.scn.flags
        # Shadow maps and the reflection pass cost ~10x on software GL; mjv_updateScene keeps
        # these scene flags, so setting them once is enough.
        flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(self.cfg.shadows)
        flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = int(self.cfg.reflections)
        if not self.has_track_camera:
            set_fixed_camera(viewer.cam, self.model)

    def render(self, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """Frames for the states ``(qpos[t], qvel[t])``: (T, H, W, 3) uint8.

        Raises:
            RenderError: the arrays do not fit the model.
        """
        mujoco = _mujoco()
        if self._viewer is None:
            raise RenderError(f"the {self.env_id} renderer is closed")
        qpos, qvel = self._check_state(qpos, qvel)
        frames = np.empty((len(qpos), self.cfg.height, self.cfg.width, 3), dtype=np.uint8)
        # Start from a clean MjData so nothing but qpos/qvel (time, ctrl, warm starts) carries
        # over from whatever was rendered before.
        mujoco.mj_resetData(self.model, self.data)
        # Several renderers can live in one thread; each draws with its own GL context.
        self._viewer.make_context_current()
        for t in range(len(qpos)):
            self.data.qpos[:] = qpos[t]
            self.data.qvel[:] = qvel[t]
            mujoco.mj_forward(self.model, self.data)
            frames[t] = self._sim.render()
        return frames

    def _check_state(self, qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        qpos = np.asarray(qpos, dtype=np.float64)
        qvel = np.asarray(qvel, dtype=np.float64)
        nq, nv = self.model.nq, self.model.nv
        if qpos.ndim != 2 or qpos.shape[1] != nq:
            raise RenderError(f"qpos has shape {qpos.shape}; {self.env_id} needs (T, {nq})")
        if qvel.shape != (len(qpos), nv):
            raise RenderError(
                f"qvel has shape {qvel.shape}; {self.env_id} needs ({len(qpos)}, {nv})"
            )
        if len(qpos) == 0:
            raise RenderError("a segment needs at least one state")
        return qpos, qvel

    def close(self) -> None:
        """Release the GL objects, the GL context and the env (idempotent).

        MuJoCo frees a render context's GL objects in whichever GL context is current, and GL
        object ids are per context: freed later by the garbage collector, with another
        renderer's context current, they would delete *that* renderer's framebuffers (it then
        draws black). So free them here, with our own context current.
        """
        viewer = getattr(self, "_viewer", None)
        if viewer is None:
            return
        self._viewer = None
        viewer.make_context_current()
        viewer.con.free()
        self._env.close()

    def __del__(self) -> None:
        # At interpreter exit EGL may already be torn down; nothing is left to protect then.
        with contextlib.suppress(Exception):
            self.close()


def set_fixed_camera(cam, model) -> None:
    """Point a free camera at the model's whole extent from a fixed pose.

    Gymnasium aims its free camera at the median geom position *when the viewer is created*,
    which makes frames depend on the first state rendered; a pose from the compiled model
    (``stat.center``/``stat.extent``, ``vis.global_`` angles) depends on nothing at run time.
    """
    mujoco = _mujoco()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.fixedcamid = -1
    cam.trackbodyid = -1
    cam.lookat[:] = model.stat.center
    cam.distance = 1.2 * float(model.stat.extent)
    cam.azimuth = float(model.vis.global_.azimuth)
    cam.elevation = float(model.vis.global_.elevation)


# -- captions: a hand-made 5x7 bitmap font, so no font package is needed ------------------------
_GLYPHS: dict[str, str] = {
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "####. #...# #...# #...# #...# #...# ####.",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    " ": "..... ..... ..... ..... ..... ..... .....",
}
_GLYPH_W, _GLYPH_H = 5, 7


def _glyph(char: str) -> np.ndarray:
    rows = _GLYPHS.get(char.upper())
    if rows is None:
        raise ValueError(f"no caption glyph for {char!r}; available: {''.join(sorted(_GLYPHS))!r}")
    return np.array([[c == "#" for c in row] for row in rows.split()], dtype=bool)


def text_mask(text: str, scale: int = 1) -> np.ndarray:
    """Bitmap of ``text`` (upper-cased) as a bool array, one blank column between glyphs."""
    gap = np.zeros((_GLYPH_H, 1), dtype=bool)
    parts: list[np.ndarray] = []
    for i, char in enumerate(text):
        if i:
            parts.append(gap)
        parts.append(_glyph(char))
    mask = np.concatenate(parts, axis=1) if parts else np.zeros((_GLYPH_H, 0), dtype=bool)
    return mask.repeat(scale, axis=0).repeat(scale, axis=1)


def _draw_caption(frames: np.ndarray, text: str, x0: int) -> None:
    """Draw ``text`` white on a darkened box at the top-left of the clip starting at column x0."""
    height, width = frames.shape[1:3]
    scale = max(1, height // 128)
    mask = text_mask(text, scale)
    pad = 2 * scale
    box_h = min(mask.shape[0] + 2 * pad, height)
    box_w = min(mask.shape[1] + 2 * pad, width - x0)
    box = frames[:, :box_h, x0 : x0 + box_w]
    box //= 3  # darken in place: readable on the light sky and on the dark floor
    glyphs = mask[: box_h - pad, : box_w - pad]
    box[:, pad : pad + glyphs.shape[0], pad : pad + glyphs.shape[1]][:, glyphs] = 255


def compose_pair(
    left: np.ndarray, right: np.ndarray, labels: Sequence[str] = ("left", "right")
) -> np.ndarray:
    """Side-by-side frames ``left | separator | right`` with a caption on each half.

    Returns:
        (T, H', W', 3) uint8 with H' and W' even (padded with the separator colour if needed),
        as yuv420p requires.
    """
    if left.shape != right.shape or left.ndim != 4 or left.shape[-1] != 3:
        raise ValueError(f"clips must both be (T, H, W, 3); got {left.shape} and {right.shape}")
    steps, height, width = left.shape[:3]
    out_w = 2 * width + SEPARATOR_PX
    out = np.empty((steps, height + height % 2, out_w + out_w % 2, 3), dtype=np.uint8)
    out[:] = _SEPARATOR_RGB
    out[:, :height, :width] = left
    out[:, :height, width + SEPARATOR_PX : out_w] = right
    _draw_caption(out, labels[0], 0)
    _draw_caption(out, labels[1], width + SEPARATOR_PX)
    return out


def write_pair_video(
    left_frames: np.ndarray,
    right_frames: np.ndarray,
    path: str | os.PathLike,
    fps: float,
    labels: Sequence[str] = ("left", "right"),
    crf: int = 23,
) -> Path:
    """Write one side-by-side H.264 MP4 (yuv420p, ``+faststart``) that browsers play.

    The file is written under a temporary name in the same directory and moved into place with
    ``os.replace``, so a reader never sees a half-written video.
    """
    import imageio_ffmpeg

    frames = compose_pair(left_frames, right_frames, labels)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp.mp4", dir=path.parent)
    os.close(fd)
    try:
        writer = imageio_ffmpeg.write_frames(
            tmp_name,
            (frames.shape[2], frames.shape[1]),
            fps=float(fps),
            codec="libx264",
            pix_fmt_out="yuv420p",
            quality=None,  # rate control via crf below
            macro_block_size=2,  # we already made the size even; don't let ffmpeg rescale
            output_params=["-crf", str(crf), "-preset", "veryfast", "-movflags", "+faststart"],
        )
        writer.send(None)
        for frame in frames:
            writer.send(np.ascontiguousarray(frame))
        writer.close()
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def render_pair_video(
    pair: Pair,
    path: str | os.PathLike,
    cfg: VideoConfig,
    renderers: MutableMapping[str, SegmentRenderer] | None = None,
    labels: Sequence[str] = ("left", "right"),
) -> Path:
    """Render both segments of ``pair`` from their states and write the side-by-side video.

    Args:
        renderers: cache of renderers by env id, filled on demand (keep it per process/thread).
    """
    renderers = renderers if renderers is not None else {}
    clips = []
    for segment in (pair.left, pair.right):
        renderer = renderers.get(segment.env_id)
        if renderer is None:
            renderer = renderers[segment.env_id] = SegmentRenderer(segment.env_id, cfg)
        clips.append(renderer.render(segment.qpos, segment.qvel))
    fps = renderers[pair.left.env_id].fps
    return write_pair_video(clips[0], clips[1], path, fps, labels)
