"""Background render workers: keep pair videos ready ahead of the human labeller, at least
``ready_ahead`` and more for a fast labeller or a slow render (see :mod:`rlhf.render.pace`).

A small pool of processes (``spawn``), so each GL context is its own and the trainer's core stays
free; on a fast labeller one process cannot keep up (about one pair per 0.3-0.8 s on software
GL). They talk to the rest of the app only through the label store: each claims one pending
pair at a time (freshest first), renders it to ``videos_dir/<pair_id>.mp4`` and marks it
'ready' (or 'failed' with a one-line reason). A pair that cannot be rendered never stops a
worker, and no worker outlives the process that started it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.synchronize import Event
from pathlib import Path

from rlhf.config import VideoConfig
from rlhf.core.service import Service
from rlhf.render.errors import one_line
from rlhf.render.gl import _settle_gl_backend, probe_gl_backend, select_gl_backend
from rlhf.render.pace import ANSWERS_SEEN, RenderPace
from rlhf.render.video import Renderer, render_clip_video, render_pair_video
from rlhf.store import RATING, VIDEO_FAILED, VIDEO_PENDING, VIDEO_READY, LabelStore, PairRecord
from rlhf.store.errors import is_disk_full
from rlhf.store.meta import ENV_KWARGS_META, RENDER_WORKER_META
from rlhf.store.protocols import RenderStore

log = logging.getLogger(__name__)

__all__ = ["RenderWorker", "pool_size", "probe_gl_backend", "render_round", "select_gl_backend"]

MAX_PROCESSES = 4
"""More render processes than this only compete with the trainer and the browser."""


def pool_size(cfg: VideoConfig, cpus: int | None = None) -> int:
    """Render processes for ``cfg``: ``render_processes``, or (0) one per core but the trainer's,
    at least 2 (on 2 cores the renders share the core a browser and the trainer also use: two
    processes still keep a GL pipeline busy while the other encodes), at most
    :data:`MAX_PROCESSES`."""
    if cfg.render_processes > 0:
        return cfg.render_processes
    cpus = cpus or os.cpu_count() or 1
    return max(2, min(MAX_PROCESSES, cpus - 1))


def render_one(
    store: RenderStore,
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
        if record.kind == RATING:  # one clip to grade: left and right are the same segment
            segment = store.get_segment(record.left_segment)
            render_clip_video(segment, path, cfg, renderers, env_kwargs=kwargs or None)
        else:
            render_pair_video(
                store.get_pair(record.id), path, cfg, renderers, env_kwargs=kwargs or None
            )
    except Exception as exc:  # whatever is wrong with one pair is recorded, never fatal
        store.mark_video(record.id, VIDEO_FAILED, error=one_line(exc))
        return False
    store.mark_video(record.id, VIDEO_READY, path=str(path))
    return True


def render_round(
    store: RenderStore,
    videos_dir: Path,
    cfg: VideoConfig,
    renderers: dict[str, Renderer],
    should_stop: Callable[[], bool] = lambda: False,
    batch: int | None = None,
    pace: RenderPace | None = None,
) -> int:
    """Top the queue of ready (or rendering), unlabelled pairs up to ``cfg.ready_ahead`` (with
    ``pace``: up to what the labellers' pace and its measured render time ask for) with up to
    ``batch`` claims (None: as many as are missing); returns pairs claimed.

    Pairs claimed but not rendered because ``should_stop()`` turned true go back to 'pending'.
    """
    keep = cfg.ready_ahead
    if pace is not None:
        keep = pace.target(store.answer_times(ANSWERS_SEEN), time.time())
    records = store.claim_for_render(batch or keep, keep_ready=keep)
    for i, record in enumerate(records):
        if should_stop():
            for left_over in records[i:]:
                store.mark_video(left_over.id, VIDEO_PENDING)
            break
        started = time.monotonic()
        if render_one(store, record, videos_dir, cfg, renderers) and pace is not None:
            pace.observe(time.monotonic() - started)
    return len(records)


def _worker_main(
    store_path: str,
    videos_dir: str,
    cfg: VideoConfig,
    poll_interval: float,
    stop: Event,
    parent_pid: int,
    index: int = 0,
    processes: int = 1,
) -> None:
    """Entry point of worker process ``index`` of the pool."""
    # Ctrl-C reaches the whole process group; the parent decides when the worker stops. So
    # does a SIGTERM sent to the group (timeout, a service manager): a worker killed inside the
    # stop event's wait would leave the parent's Event.set() blocked forever. A worker that
    # does not stop when asked is killed by stop() (SIGKILL), and one whose parent died exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note = _settle_gl_backend()
    from rlhf.envs import quiet_mujoco_warnings

    quiet_mujoco_warnings()  # MuJoCo 4's deprecation notes would spam the trainer's terminal
    store = LabelStore(store_path)
    renderers: dict[str, Renderer] = {}
    pace = RenderPace(cfg.ready_ahead, cfg.ready_ahead_max, processes)

    def should_stop() -> bool:
        # A new parent pid means ours died (we were re-parented): never linger as an orphan.
        return stop.is_set() or os.getppid() != parent_pid

    try:
        if index == 0:
            store.set_meta(
                RENDER_WORKER_META, {"pid": os.getpid(), "gl": note, "started_at": time.time()}
            )
        while not should_stop():
            try:
                # One pair per claim: the pool's processes render different pairs side by side.
                claimed = render_round(
                    store, Path(videos_dir), cfg, renderers, should_stop, batch=1, pace=pace
                )
            except Exception as exc:  # e.g. a database locked past its timeout: retry later
                if not is_disk_full(exc):  # a full disk: the trainer says so, in one line
                    log.warning("render worker: %s", one_line(exc))
                claimed = 0
            if not claimed and index == 0:  # idle: the agent in view, one process is enough
                claimed = _render_policy(store, Path(videos_dir), cfg, renderers)
            if not claimed:
                stop.wait(poll_interval)
    finally:
        for renderer in renderers.values():
            renderer.close()
        store.close()


def _render_policy(
    store: RenderStore, videos_dir: Path, cfg: VideoConfig, renderers: dict[str, Renderer]
) -> int:
    """Render the newest pending policy clip, if any; returns how many were claimed (0 or 1)."""
    from rlhf.render.policy import render_policy_clip

    try:
        clip = store.claim_policy_clip()
        if clip is None:
            return 0
        render_policy_clip(
            store, clip, videos_dir, cfg, renderers, store.get_meta(ENV_KWARGS_META) or None
        )
    except Exception as exc:  # e.g. a database locked past its timeout: retry later
        if not is_disk_full(exc):
            log.warning("render worker (policy clip): %s", one_line(exc))
        return 0
    return 1


class RenderWorker(Service):
    """Handle on the pool of render processes.

    Args:
        store_path: the run's ``labels.sqlite``.
        videos_dir: where ``<pair_id>.mp4`` files go (created if missing).
        cfg: video settings, including ``ready_ahead`` and ``render_processes``.
        poll_interval: seconds between looks at the store when there is nothing to do.
        processes: how many render processes (default: :func:`pool_size`).

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
        processes: int | None = None,
    ) -> None:
        self.store_path = Path(store_path).resolve()
        self.videos_dir = Path(videos_dir).resolve()
        self.cfg = cfg
        self.poll_interval = poll_interval
        self.processes = processes or pool_size(cfg)
        self._ctx = mp.get_context("spawn")
        self._stop: Event | None = None
        self._pool: list[mp.process.BaseProcess] = []

    def start(self) -> RenderWorker:
        """Start the processes (no-op if they are running); returns self."""
        if self.is_alive():
            return self
        self.videos_dir.mkdir(parents=True, exist_ok=True)
        # Pairs a previous worker left half-rendered go back to the queue, here, once: a process
        # of this pool doing it could take back a pair another one has just claimed.
        store = LabelStore(self.store_path)
        try:
            store.reset_stale_renders()
            store.reset_stale_policy_clips()
        finally:
            store.close()
        self._stop = self._ctx.Event()
        self._pool = []
        for index in range(self.processes):
            process = self._ctx.Process(
                target=_worker_main,
                args=(
                    str(self.store_path),
                    str(self.videos_dir),
                    self.cfg,
                    self.poll_interval,
                    self._stop,
                    os.getpid(),
                    index,
                    self.processes,
                ),
                name=f"rlhf-render-worker-{index}",
                daemon=True,  # multiprocessing also ends it when the parent exits normally
            )
            process.start()
            self._pool.append(process)
        return self

    @property
    def pid(self) -> int | None:
        """The first worker's process id (it reports to the store), or None before start."""
        return self._pool[0].pid if self._pool else None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._pool if p.pid is not None]

    def is_alive(self) -> bool:
        """True while any process of the pool runs (one is enough to show pairs)."""
        return any(p.is_alive() for p in self._pool)

    @property
    def exitcode(self) -> int | None:
        """Once every process has ended, the first one's exit code (negative: killed by that
        signal); None while any runs or before start."""
        if not self._pool or self.is_alive():
            return None
        return self._pool[0].exitcode

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the workers to finish their current pair and exit; terminate those that do not."""
        pool, self._pool = self._pool, []
        if not pool:
            return
        assert self._stop is not None
        self._stop.set()
        deadline = time.monotonic() + timeout
        for process in pool:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in pool:
            if process.is_alive():
                log.warning("render worker did not stop within %.1f s; terminating it", timeout)
                process.terminate()
                process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join()
            process.close()
