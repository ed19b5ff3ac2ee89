"""Segment videos: both clips of a pair side by side in one browser-playable H.264 file.

Each clip is drawn from the segment's recorded state (:mod:`rlhf.render.frames`), so a person
sees exactly what happened. Both go into one video, so they always play in sync.
"""

from __future__ import annotations

import errno
import os
import struct
import tempfile
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlhf.config import VideoConfig
from rlhf.core.types import Pair, Segment
from rlhf.render.captions import draw_caption
from rlhf.render.frames import (
    ClassicRenderer,
    Renderer,
    RenderError,
    SegmentRenderer,
    make_renderer,
    set_camera,
)

__all__ = [
    "ClassicRenderer",
    "RenderError",
    "Renderer",
    "SegmentRenderer",
    "compose_pair",
    "make_renderer",
    "render_pair_video",
    "segment_frames",
    "set_camera",
    "write_pair_video",
    "write_video",
]

SEPARATOR_PX = 4
"""Width of the dark bar between the two clips (even, so an even clip width stays even)."""

_SEPARATOR_RGB = (32, 32, 32)


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
    draw_caption(out, labels[0], 0)
    draw_caption(out, labels[1], width + SEPARATOR_PX)
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
    return write_video(compose_pair(left_frames, right_frames, labels), path, fps, crf)


def write_video(frames: np.ndarray, path: str | os.PathLike, fps: float, crf: int = 23) -> Path:
    """Write (T, H, W, 3) uint8 frames (H and W even) as a browser-playable H.264 MP4, atomically."""
    import imageio_ffmpeg

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
            # ffmpeg writes to the trainer's terminal: on a full disk it printed ~50 lines before
            # the one that says so. What fails reaches the store as the exception's one line.
            ffmpeg_log_level="fatal",
        )
        writer.send(None)
        for frame in frames:
            writer.send(np.ascontiguousarray(frame))
        writer.close()
        if not _has_index(Path(tmp_name)):  # imageio-ffmpeg does not check ffmpeg's exit code
            raise OSError(
                errno.EIO, "ffmpeg did not finish the video (is the disk full?)", str(path)
            )
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def _has_index(path: Path) -> bool:
    """Whether an MP4 holds its index (the top-level ``moov`` box). ffmpeg writes it last (with
    ``+faststart`` it then moves it to the front), so a video cut short by a full disk or the
    file size limit has none and would play as a broken clip."""
    with path.open("rb") as f:
        while len(header := f.read(8)) == 8:
            size, kind = struct.unpack(">I4s", header)
            if kind == b"moov":
                return True
            if size == 1:  # a 64-bit size follows the header
                size = struct.unpack(">Q", f.read(8))[0] - 8
            if size < 8:  # 0: the box runs to the end of the file (never before the index)
                return False
            f.seek(size - 8, os.SEEK_CUR)
    return False


def render_pair_video(
    pair: Pair,
    path: str | os.PathLike,
    cfg: VideoConfig,
    renderers: MutableMapping[str, Renderer] | None = None,
    labels: Sequence[str] = ("left", "right"),
    env_kwargs: dict[str, Any] | None = None,
) -> Path:
    """Render both segments of ``pair`` from their states and write the side-by-side video.

    Args:
        renderers: cache of renderers by env id, filled on demand (keep it per process/thread).
        env_kwargs: the run's env keyword arguments (the same model as the one trained).
    """
    renderers = renderers if renderers is not None else {}
    clips = []
    for segment in (pair.left, pair.right):
        renderer = renderers.get(segment.env_id)
        if renderer is None:
            renderer = renderers[segment.env_id] = make_renderer(segment.env_id, cfg, env_kwargs)
        clips.append(segment_frames(renderer, segment))
    fps = renderers[pair.left.env_id].fps
    return write_pair_video(clips[0], clips[1], path, fps, labels)


def render_clip_video(
    segment: Segment,
    path: str | os.PathLike,
    cfg: VideoConfig,
    renderers: MutableMapping[str, Renderer] | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> Path:
    """Render one segment (a clip to grade) to its own video, captioned "RATE"."""
    renderers = renderers if renderers is not None else {}
    renderer = renderers.get(segment.env_id)
    if renderer is None:
        renderer = renderers[segment.env_id] = make_renderer(segment.env_id, cfg, env_kwargs)
    clip = segment_frames(renderer, segment)
    steps, height, width = clip.shape[:3]
    frames = np.zeros((steps, height + height % 2, width + width % 2, 3), dtype=np.uint8)
    frames[:, :height, :width] = clip
    draw_caption(frames, "RATE", 0)
    return write_video(frames, path, renderer.fps)


def segment_frames(renderer: Renderer, segment: Segment) -> np.ndarray:
    """A segment's frames; after its episode ended (absorbing steps), the last picture, dimmed
    and marked END, stands still for the rest of the clip."""
    real = segment.real_steps
    # Goal envs: the desired goal ends each observation (rlhf.envs.goals), and its marker is
    # not physics state, so each frame is told where to draw it.
    size = getattr(renderer, "goal_size", 0)
    goals = segment.obs[:real, -size:] if size else None
    frames = renderer.render(segment.qpos[:real], segment.qvel[:real], goals)
    if not segment.absorbing:
        return frames
    ended = frames[-1:] // 2
    width = ended.shape[2]
    draw_caption(ended, "END", max(0, width // 2 - 12 * max(1, ended.shape[1] // 128)))
    return np.concatenate([frames, np.repeat(ended, segment.absorbing, axis=0)])
