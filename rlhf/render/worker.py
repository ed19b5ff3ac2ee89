"""Background render worker: keeps ``ready_ahead`` pair videos ready ahead of the human labeller.

It runs in its own process (``spawn``), so its GL context is its own and the trainer's core stays
free. It talks to the rest of the app only through the label store: it claims pending pairs,
renders them to ``videos_dir/<pair_id>.mp4`` and marks them 'ready' (or 'failed' with a one-line
reason). A pair that cannot be rendered never stops the worker, and the worker never outlives
the process that started it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from multiprocessing.synchronize import Event
from pathlib import Path
from types import TracebackType

from rlhf.config import VideoConfig
from rlhf.envs.make import ENV_KWARGS_META
from rlhf.render.video import Renderer, render_pair_video
from rlhf.store import VIDEO_FAILED, VIDEO_PENDING, VIDEO_READY, LabelStore, PairRecord

log = logging.getLogger(__name__)

META_KEY = "render_worker"
"""Store meta key where the worker reports its pid and GL backend (for status displays)."""

_PROBE = (
    "from mujoco.{name} import GLContext\nctx = GLContext(16, 16)\nctx.make_current()\nctx.free()\n"
)


def probe_gl_backend(name: str, timeout: float = 60.0) -> str | None:
    """Try to make a GL context with backend ``name`` in a fresh process; None if it works.

    A fresh process, because PyOpenGL fixes its platform at first import: after a failed EGL
    attempt this process could no longer switch to OSMesa.

    Returns:
        None on success, else the last line of the error.
    """
    env = {**os.environ, "MUJOCO_GL": name, "PYOPENGL_PLATFORM": name}
    try:
        result = subprocess.run(
            [sys.executable, "-c", _PROBE.format(name=name)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if result.returncode == 0:
        return None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {result.returncode}"


def select_gl_backend(
    environ: Mapping[str, str], probe: Callable[[str], str | None] = probe_gl_backend
) -> tuple[str | None, str]:
    """Choose the MuJoCo GL backend for a headless worker: EGL, else OSMesa.

    Returns:
        (backend to set as MUJOCO_GL, or None to leave the environment alone; a note for humans).
    """
    if environ.get("MUJOCO_GL"):
        return None, f"MUJOCO_GL={environ['MUJOCO_GL']} (given)"
    if environ.get("DISPLAY"):
        return None, "MUJOCO_GL unset with a DISPLAY: gymnasium picks glfw, egl or osmesa"
    egl_error = probe("egl")
    if egl_error is None:
        return "egl", "MUJOCO_GL=egl (no DISPLAY)"
    osmesa_error = probe("osmesa")
    if osmesa_error is None:
        return "osmesa", f"MUJOCO_GL=osmesa: EGL failed ({egl_error})"
    return "egl", f"no working GL backend: egl: {egl_error}; osmesa: {osmesa_error}"


def _settle_gl_backend() -> str:
    backend, note = select_gl_backend(os.environ)
    if backend is not None:
        os.environ["MUJOCO_GL"] = backend
        if backend == "osmesa":
            os.environ["PYOPENGL_PLATFORM"] = "osmesa"
    if backend == "osmesa" or note.startswith("no working"):
        log.warning("render worker: %s", note)
    return note


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, cut to ``limit`` characters (for the store and the UI)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_one(
    store: LabelStore,
    record: PairRecord,
    videos_dir: Path,
    cfg: VideoConfig,
    renderers: dict[str, Renderer],
) -> bool:
    """Render one claimed pair and mark it 'ready', or 'failed' with the reason; True if ready."""
    path = (videos_dir / f"{record.id}.mp4").resolve()
    try:
        # The run's env kwargs (e.g. another model file) make the renderer draw the same robot.
        kwargs = store.get_meta(ENV_KWARGS_META)
        render_pair_video(
            store.get_pair(record.id), path, cfg, renderers, env_kwargs=kwargs or None
        )
    except Exception as exc:  # whatever is wrong with one pair is recorded, never fatal
        store.mark_video(record.id, VIDEO_FAILED, error=one_line(exc))
        return False
    store.mark_video(record.id, VIDEO_READY, path=str(path))
    return True


def render_round(
    store: LabelStore,
    videos_dir: Path,
    cfg: VideoConfig,
    renderers: dict[str, Renderer],
    should_stop: Callable[[], bool] = lambda: False,
) -> int:
    """Top the queue of ready, unlabelled pairs up to ``cfg.ready_ahead``; returns pairs claimed.

    Pairs claimed but not rendered because ``should_stop()`` turned true go back to 'pending'.
    """
    missing = cfg.ready_ahead - store.counts().ready_unlabelled
    if missing <= 0:
        return 0
    records = store.claim_for_render(missing)
    for i, record in enumerate(records):
        if should_stop():
            for left_over in records[i:]:
                store.mark_video(left_over.id, VIDEO_PENDING)
            break
        render_one(store, record, videos_dir, cfg, renderers)
    return len(records)


def _worker_main(
    store_path: str,
    videos_dir: str,
    cfg: VideoConfig,
    poll_interval: float,
    stop: Event,
    parent_pid: int,
) -> None:
    """Entry point of the worker process."""
    # Ctrl-C reaches the whole process group; the parent decides when the worker stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    note = _settle_gl_backend()
    from rlhf.envs import quiet_mujoco_warnings

    quiet_mujoco_warnings()  # MuJoCo 4's deprecation notes would spam the trainer's terminal
    store = LabelStore(store_path)
    renderers: dict[str, Renderer] = {}

    def should_stop() -> bool:
        # A new parent pid means ours died (we were re-parented): never linger as an orphan.
        return stop.is_set() or os.getppid() != parent_pid

    try:
        store.set_meta(META_KEY, {"pid": os.getpid(), "gl": note, "started_at": time.time()})
        store.reset_stale_renders()
        while not should_stop():
            try:
                claimed = render_round(store, Path(videos_dir), cfg, renderers, should_stop)
            except Exception as exc:  # e.g. a database locked past its timeout: retry later
                log.warning("render worker: %s", one_line(exc))
                claimed = 0
            if not claimed:
                stop.wait(poll_interval)
    finally:
        for renderer in renderers.values():
            renderer.close()
        store.close()


class RenderWorker:
    """Handle on the render worker process.

    Args:
        store_path: the run's ``labels.sqlite``.
        videos_dir: where ``<pair_id>.mp4`` files go (created if missing).
        cfg: video settings, including ``ready_ahead``.
        poll_interval: seconds between looks at the store when there is nothing to do.

    Example:
        with RenderWorker(run_dir / "labels.sqlite", run_dir / "videos", cfg.video):
            ...  # train; the page always has the next pairs ready
    """

    def __init__(
        self,
        store_path: str | os.PathLike,
        videos_dir: str | os.PathLike,
        cfg: VideoConfig,
        poll_interval: float = 0.2,
    ) -> None:
        self.store_path = Path(store_path).resolve()
        self.videos_dir = Path(videos_dir).resolve()
        self.cfg = cfg
        self.poll_interval = poll_interval
        self._ctx = mp.get_context("spawn")
        self._stop: Event | None = None
        self._process: mp.process.BaseProcess | None = None

    def start(self) -> RenderWorker:
        """Start the process (no-op if it is already running); returns self."""
        if self.is_alive():
            return self
        self.videos_dir.mkdir(parents=True, exist_ok=True)
        self._stop = self._ctx.Event()
        self._process = self._ctx.Process(
            target=_worker_main,
            args=(
                str(self.store_path),
                str(self.videos_dir),
                self.cfg,
                self.poll_interval,
                self._stop,
                os.getpid(),
            ),
            name="rlhf-render-worker",
            daemon=True,  # multiprocessing also ends it when the parent exits normally
        )
        self._process.start()
        return self

    @property
    def pid(self) -> int | None:
        """The worker's process id, or None before start."""
        return self._process.pid if self._process is not None else None

    def is_alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def exitcode(self) -> int | None:
        """The process's exit code once it has ended (negative: killed by that signal)."""
        return self._process.exitcode if self._process is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the worker to finish its current pair and exit; terminate it if it does not."""
        process, self._process = self._process, None
        if process is None:
            return
        assert self._stop is not None
        self._stop.set()
        process.join(timeout)
        if process.is_alive():
            log.warning("render worker did not stop within %.1f s; terminating it", timeout)
            process.terminate()
            process.join(2.0)
        if process.is_alive():
            process.kill()
            process.join()
        process.close()

    def __enter__(self) -> RenderWorker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
