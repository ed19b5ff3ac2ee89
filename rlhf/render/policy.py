"""The agent in view: a clip of the current policy, drawn by the render workers when idle.

The clip is one segment of the trainer's latest rollout, with its recorded physics states, so
no env is stepped again. It becomes ``videos/policy/<id>.mp4`` for the page and
``videos/policy/<id>.gif`` (half size, every other frame) that the trainer puts in TensorBoard
under ``videos/policy``: TensorBoard shows videos as animated GIFs, and writing one with
imageio's Pillow plugin (already installed with imageio) spares the moviepy dependency that
``SummaryWriter.add_video`` needs.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import numpy as np

from rlhf.config import VideoConfig
from rlhf.render.errors import one_line
from rlhf.render.paths import POLICY_DIR
from rlhf.render.video import Renderer, make_renderer, segment_frames, write_video
from rlhf.store import VIDEO_FAILED, VIDEO_READY
from rlhf.store.policy import PolicyClip
from rlhf.store.protocols import RenderStore


def gif_frames(frames: np.ndarray) -> np.ndarray:
    """Every other frame at half size: a TensorBoard GIF of a few hundred KiB at most."""
    return np.ascontiguousarray(frames[::2, ::2, ::2])


def write_gif(frames: np.ndarray, path: str | os.PathLike, fps: float) -> Path:
    """An endlessly looping animated GIF, written under a temporary name and moved into place."""
    return _write_image(frames, path, ".gif", duration=1000.0 / fps, loop=0)


def _write_image(pixels: np.ndarray, path: str | os.PathLike, extension: str, **kw: Any) -> Path:
    """Write with imageio under a temporary name, then move into place (never half a file)."""
    import imageio.v3 as iio

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    iio.imwrite(tmp, pixels, extension=extension, **kw)
    os.replace(tmp, path)
    return path


STRIP_FRAMES = 8
"""Frames in a film strip (``rlhf record --out FILE.png``)."""


def write_strip(frames: np.ndarray, path: str | os.PathLike, count: int = STRIP_FRAMES) -> Path:
    """``count`` frames spread evenly over the video, side by side with a white gap, as one PNG:
    a picture of what the agent does, for a page that cannot play a video."""
    picks = np.unique(np.linspace(0, len(frames) - 1, count).round().astype(int))
    gap = np.full((frames.shape[1], 4, frames.shape[3]), 255, frames.dtype)
    parts = [part for i in picks for part in (frames[i], gap)][:-1]
    return _write_image(np.concatenate(parts, axis=1), path, ".png")


def render_policy_clip(
    store: RenderStore,
    clip: PolicyClip,
    videos_dir: Path,
    cfg: VideoConfig,
    renderers: MutableMapping[str, Renderer],
    env_kwargs: dict[str, Any] | None = None,
) -> bool:
    """Render a claimed clip to MP4 and GIF and mark it 'ready' (or 'failed'); True if ready."""
    folder = Path(videos_dir) / POLICY_DIR
    try:
        segment = store.get_segment(clip.segment_id)
        renderer = renderers.get(segment.env_id)
        if renderer is None:
            renderer = renderers[segment.env_id] = make_renderer(segment.env_id, cfg, env_kwargs)
        frames = segment_frames(renderer, segment)
        height, width = frames.shape[1:3]
        frames = frames[:, : height - height % 2, : width - width % 2]  # yuv420p: even sizes
        folder.mkdir(parents=True, exist_ok=True)
        path = write_video(frames, folder / f"{clip.id}.mp4", renderer.fps)
        write_gif(gif_frames(frames), folder / f"{clip.id}.gif", renderer.fps / 2)
    except Exception as exc:  # a clip that cannot be drawn is recorded, never fatal
        store.mark_policy_clip(clip.id, VIDEO_FAILED, error=one_line(exc))
        return False
    store.mark_policy_clip(clip.id, VIDEO_READY, path=str(path.resolve()))
    return True
