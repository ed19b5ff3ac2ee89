"""One labelling session: the render worker, the web server and (optionally) the browser.

``rlhf train --feedback human`` and ``rlhf serve`` both run one. It starts the render worker
first (so videos are on their way before anyone can ask for them), then the server, then opens
the browser; it stops them in the reverse order. When a run ends, ``stop(grace=...)`` keeps the
server storing the answers still on their way while it hands out no new pairs, so nothing a
person answered is lost (see :meth:`rlhf.server.ServerHandle.stop`).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import webbrowser
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rlhf.config import VideoConfig, WebConfig
from rlhf.core.service import Service
from rlhf.core.shell import program, short_path
from rlhf.core.status import Phase, TrainerStatus
from rlhf.render.worker import RenderWorker
from rlhf.server import ServerHandle, serve_in_thread
from rlhf.server.pages import Pages
from rlhf.store import LabelStore
from rlhf.store.meta import STATUS_META, WEB_PORT_META

LABELS_FILE = "labels.sqlite"
VIDEOS_DIR = "videos"
NO_TRAINER_MESSAGE = "No trainer is running: your labels are kept for the next run or a resume."
FAREWELL_S = 3.0
"""After a drained run's last status, how long the server waits at most for every open page to
read it (pages poll every 2 s), so the finished page shows the final figures."""


class LabellingSession(Service):
    """The processes and threads that let a person label a run's pairs in the browser.

    Args:
        run_root: the run directory (``labels.sqlite``, ``videos/``).
        web: server settings (host, port, token, open_browser).
        video: render settings, for the worker.
        say: where the one line with the URL goes (the trainer passes its logger).
        total_labels_hint: labels the run asks for, shown until the trainer reports its own.

    Example:
        with LabellingSession(run.root, cfg.web, cfg.video) as session:
            ...  # queue pairs in the store; labels arrive in it
    """

    def __init__(
        self,
        run_root: Path,
        web: WebConfig,
        video: VideoConfig,
        say: Callable[[str], None] = print,
        total_labels_hint: int | None = None,
    ) -> None:
        self.run_root = Path(run_root)
        self.web = web
        self.video = video
        self.say = say
        self.total_labels_hint = total_labels_hint
        self._worker: RenderWorker | None = None
        self._server: ServerHandle | None = None
        self._store: LabelStore | None = None
        self._stopped = False
        self._drained = False
        self._lock = threading.Lock()

    def start(self) -> LabellingSession:
        """Start the render worker, then the server; say the URL; open the browser if asked.

        If anything fails, what was already started is stopped before the error propagates.
        """
        if self._stopped:
            raise RuntimeError("a labelling session cannot be started again once stopped")
        if self._server is not None:
            return self
        videos = self.run_root / VIDEOS_DIR
        try:
            self._worker = RenderWorker(self.run_root / LABELS_FILE, videos, self.video).start()
            self._store = LabelStore(self.run_root / LABELS_FILE)
            self._server = _serve_on_the_runs_port(
                self._store,
                videos,
                self.web,
                total_labels_hint=self.total_labels_hint,
                watch_command=watch_command(self.run_root.parent),
            )
        except BaseException:
            self.stop()
            raise
        links = self._running().labeller_urls
        if links:  # named labellers: one link each, nobody else's
            self.say(f"Label pairs of {self.run_root.name}: one link per labeller")
            for name, link in links.items():
                self.say(f"  {name}: {link}")
        else:
            self.say(f"Label pairs of {self.run_root.name} in your browser: {self.url}")
        if self.web.open_browser:
            with contextlib.suppress(Exception):  # no browser here: the printed URL still works
                webbrowser.open(self.url)
        return self

    @property
    def url(self) -> str:
        """The URL a person opens (with ``?token=`` when the server is exposed)."""
        return self._running().url

    @property
    def local_url(self) -> str:
        """``http://127.0.0.1:PORT``, for scripts and tests on this machine."""
        return self._running().local_url

    @property
    def server(self) -> ServerHandle:
        return self._running()

    @property
    def worker(self) -> RenderWorker | None:
        return self._worker

    def _running(self) -> ServerHandle:
        if self._server is None:
            raise RuntimeError("the labelling session is not running (call start())")
        return self._server

    def drain(self, grace: float) -> None:
        """Hand out no new pairs and store the answers still on their way, for up to ``grace``
        seconds (less once every open page says it has sent all it holds). The server stays up:
        the run writes its final figures next, and :meth:`stop` lets the pages read them."""
        if self._server is None or self._stopped:
            return
        state = self._server.state
        state.begin_closing()
        deadline = time.monotonic() + grace
        while (now := time.monotonic()) < deadline and not state.pages.all_delivered(now):
            time.sleep(0.05)
        self._drained = True

    def stop(self, grace: float = 0.0) -> None:
        """Stop the server (after ``grace`` seconds of taking late answers), then the worker.
        After :meth:`drain`, first wait (:data:`FAREWELL_S` at most) until every open page has
        read the status written since.

        Idempotent: a second call does nothing. Errors of one part never keep the others running.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        server, worker, store = self._server, self._worker, self._store
        try:
            if server is not None and self._drained:
                _farewell(server.state.pages, FAREWELL_S)
            if server is not None:
                server.stop(grace=grace)
        finally:
            try:
                if worker is not None:
                    worker.stop()
            finally:
                if store is not None:
                    store.close()


def _serve_on_the_runs_port(
    store: LabelStore, videos: Path, web: WebConfig, **kwargs: Any
) -> ServerHandle:
    """Serve on the port the run was served on before when ``web.port`` is 0 (any) and that
    port is free, so a resumed run is at the address its open tabs know; else on ``web.port``.
    The port is kept in the store for the next time."""
    saved = store.get_meta(WEB_PORT_META)
    handle = None
    known = isinstance(saved, int) and not isinstance(saved, bool) and 0 < saved < 65536
    if web.port == 0 and known:
        with contextlib.suppress(OSError):  # taken by now: any free port will do
            handle = serve_in_thread(store, videos, replace(web, port=saved), **kwargs)
    if handle is None:
        handle = serve_in_thread(store, videos, web, **kwargs)
    store.set_meta(WEB_PORT_META, handle.port)
    return handle


def _farewell(pages: Pages, seconds: float) -> None:
    since = time.monotonic()
    deadline = since + seconds
    while (now := time.monotonic()) < deadline and not pages.all_read_since(since, now):
        time.sleep(0.05)


def watch_command(runs_dir: Path) -> str:
    """``tensorboard --logdir RUNS``, with the path as short as it can be said from here."""
    return f"{program('tensorboard')} --logdir {short_path(runs_dir)}"


def labels_hint(run_root: Path) -> int | None:
    """Labels the run asks for over its budget, from its ``config.json`` (None if unknown)."""
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        config = json.loads((Path(run_root) / "config.json").read_text())
        total = config.get("query", {}).get("total_labels")
        return int(total) if total is not None else None
    return None


def mark_no_trainer(store: LabelStore) -> None:
    """Say on the page that no trainer is running, unless the stored status already ended."""
    status = TrainerStatus.from_json(store.get_meta(STATUS_META))
    if status is not None and status.phase.ended:
        return
    status = status or TrainerStatus(Phase.NO_TRAINER)
    store.set_meta(
        STATUS_META, status.with_(phase=Phase.NO_TRAINER, message=NO_TRAINER_MESSAGE).to_json()
    )


def serve_run(
    run_root: Path,
    web: WebConfig,
    video: VideoConfig,
    stop: threading.Event | None = None,
) -> None:
    """``rlhf serve``: label a run's pending pairs without training, until Ctrl-C, SIGTERM or
    ``stop`` is set."""
    run_root = Path(run_root)
    store_path = run_root / LABELS_FILE
    if not store_path.is_file():
        raise FileNotFoundError(f"{store_path} does not exist: is {run_root} a run directory?")
    store = LabelStore(store_path)
    try:
        mark_no_trainer(store)
    finally:
        store.close()
    stop = stop or threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lines: list[str] = []

    def say(line: str) -> None:  # the hint once, on the first line (named labellers get more)
        print(line if lines else f"{line}  (Ctrl-C to stop)", flush=True)
        lines.append(line)

    session = LabellingSession(
        run_root, web, video, say=say, total_labels_hint=labels_hint(run_root)
    )
    try:
        with session:
            while not stop.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
