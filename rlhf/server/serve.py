"""Serving the app with waitress from a daemon thread, and stopping it for good.

Waitress, not Flask's development server: remote labellers are supported, and waitress is built
for that (an async front end that buffers slow clients, a bounded pool of worker threads, limits
on connections and request sizes). It logs no line per request, so the trainer keeps its console.
"""

from __future__ import annotations

import logging
import resource
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import Flask
from waitress import wasyncore
from waitress.channel import HTTPChannel

from rlhf.config import WebConfig
from rlhf.core.labellers import labeller_names, labeller_tokens
from rlhf.server.access import is_loopback
from rlhf.server.app import create_app
from rlhf.server.guard import guarded_server
from rlhf.server.state import ServerState
from rlhf.store.meta import ACCESS_TOKEN_META, TOKENS_META
from rlhf.store.protocols import ServerStore

log = logging.getLogger(__name__)

THREADS = 8
"""Worker threads: the bounded pool every request is served from. A page keeps at most a few
requests going (status, next pair, one answer, two videos), each done in milliseconds; waitress
buffers slow and half-open clients in its event loop without holding a thread."""
CONNECTION_LIMIT = 1000
"""Open connections at most (Chromium keeps up to 6 per page). An open connection costs a socket,
not a thread, so this is high. Past it, and past a budget per client address, the server closes
the longest idle connection of the address holding the most rather than stop accepting: a flood
of half-open connections does not lock labellers out (see ``guard.py``)."""
CHANNEL_TIMEOUT_S = 60
"""Idle keep-alive connections are closed after this long (pages poll every 2 s)."""
CLEANUP_INTERVAL_S = 5
"""How often idle connections and stalled requests are looked for."""
MAX_REQUEST_BODY_BYTES = 64 * 1024
"""Waitress refuses bodies beyond this outright; up to it, the app answers a JSON 413 past 16 KiB."""
MAX_REQUEST_HEADER_BYTES = 32 * 1024
"""Request line plus headers (a token cookie and a page id are all the page sends)."""

# "Task queue depth is N" means only that a request waited for a thread for a moment: not worth
# a line on the trainer's console.
logging.getLogger("waitress.queue").setLevel(logging.ERROR)


@dataclass(frozen=True)
class ServerHandle:
    """A running server: open ``url`` in a browser; ``stop()`` releases the port."""

    url: str
    host: str
    port: int
    token: str | None
    app: Flask = field(repr=False)
    _server: Any = field(repr=False)
    _socket_map: dict[int, Any] = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _stop_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopped: threading.Event = field(default_factory=threading.Event, repr=False)
    labeller_urls: dict[str, str] = field(default_factory=dict, repr=False)
    """Named labellers: each one's own link (with their token)."""

    @property
    def local_url(self) -> str:
        """Base URL reachable from this machine (no token), for scripts and tests."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = "[::1]" if host == "::" else host
        return f"http://{_bracket(host)}:{self.port}"

    @property
    def state(self) -> ServerState:
        return self.app.extensions["rlhf"]

    def stop(self, grace: float = 0.0, timeout: float = 5.0) -> None:
        """Stop serving and release the port; a second call does nothing.

        Args:
            grace: seconds to keep storing answers still on their way after the run ended,
                handing out no new pairs meanwhile. It ends early once every open page reports
                that it has sent all its answers (see :mod:`rlhf.server.pages`).
            timeout: seconds to wait for the serving thread and for requests being handled.
        """
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
            state = self.state
            state.begin_closing()
            try:
                deadline = time.monotonic() + grace
                while (now := time.monotonic()) < deadline and not state.pages.all_delivered(now):
                    time.sleep(0.05)
            finally:  # a Ctrl-C during the grace period still releases the port
                state.stopped = True  # requests on connections still open get a 503
                _shut_down(self._server, self._socket_map, self._thread, timeout)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _shut_down(
    server: Any, socket_map: dict[int, Any], thread: threading.Thread, timeout: float
) -> None:
    """Close every connection, end the loop and the worker threads, then the wake-up pipe.

    The pipe closes last, from this thread: whoever writes to it after it closed (a worker
    finishing a request, or this thread waking the loop) would write into whatever file has
    since been given its descriptor number, a socket or the label store.
    """
    trigger = server.trigger

    def close_connections() -> None:
        for channel in list(socket_map.values()):
            if channel is trigger:
                continue
            if isinstance(channel, HTTPChannel):
                channel.handle_close()  # also wakes a worker thread waiting to write to it
            else:  # the listening socket (the server's own close() would close the pipe too)
                wasyncore.dispatcher.close(channel)

    def leave_loop() -> None:
        close_connections()
        trigger.del_channel()  # the map is empty now, which ends waitress' loop

    if thread.is_alive():
        # Sockets belong to the loop's thread: ask it to close them between two polls.
        trigger.pull_trigger(leave_loop)
        thread.join(timeout)
    if thread.is_alive() or socket_map:
        log.warning("web server loop did not stop in %.1f s; closing its sockets", timeout)
        close_connections()
        socket_map.clear()
    server.task_dispatcher.shutdown(timeout=timeout)
    trigger.close()


def _bind(host: str, port: int) -> socket.socket:
    """A bound socket for ``host`` (a name resolves to IPv4, as Flask's server did)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # A restarted server may bind the port while old connections are in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except BaseException:
        sock.close()
        raise
    return sock


def connection_limit() -> int:
    """:data:`CONNECTION_LIMIT`, or less where the process may not open that many files (each
    connection is one; the store, videos and the trainer need some too)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return CONNECTION_LIMIT
    return max(16, min(CONNECTION_LIMIT, soft // 2))


def _public_address() -> str:
    """This machine's name, for the printed URL when bound to every interface."""
    return socket.gethostname()


def serve_in_thread(
    store: ServerStore,
    videos_dir: Path,
    cfg: WebConfig,
    total_labels_hint: int | None = None,
    watch_command: str | None = None,
) -> ServerHandle:
    """Serve the labelling app with waitress from a daemon thread.

    A token is generated when ``cfg.host`` is not loopback and ``cfg.token`` is None (once per
    store: a resumed run keeps it); it is part of ``handle.url``. Port 0 picks a free port (``handle.port``).
    """
    token = cfg.token
    if token is None and not is_loopback(cfg.host):
        kept = store.get_meta(ACCESS_TOKEN_META)  # the same link after a resume
        token = kept if isinstance(kept, str) and len(kept) >= 32 else secrets.token_urlsafe(24)
        store.set_meta(ACCESS_TOKEN_META, token)
    names = labeller_names(cfg.labeller, cfg.labellers_file)
    tokens = labeller_tokens(names, store.get_meta(TOKENS_META)) if names else {}
    if tokens:  # kept with the run: the links stay the same across serve and --resume
        store.set_meta(TOKENS_META, tokens)
    app = create_app(
        store,
        Path(videos_dir),
        token,
        total_labels_hint,
        watch_command=watch_command,
        labellers={tok: name for name, tok in tokens.items()} if tokens else None,
        overlap=cfg.overlap,
    )
    sock = _bind(cfg.host, cfg.port)
    socket_map: dict[int, Any] = {}
    try:
        server = guarded_server(  # waitress' server, answering its own errors in JSON too
            app,
            sock,
            socket_map,
            threads=THREADS,
            connection_limit=connection_limit(),
            channel_timeout=CHANNEL_TIMEOUT_S,
            cleanup_interval=CLEANUP_INTERVAL_S,
            max_request_body_size=MAX_REQUEST_BODY_BYTES,
            max_request_header_size=MAX_REQUEST_HEADER_BYTES,
            asyncore_use_poll=True,  # select() cannot watch descriptors above 1023
            server_name=cfg.host or "localhost",  # SERVER_NAME for HTTP/1.0 requests without Host
        )
    except BaseException:
        sock.close()
        raise
    port = int(sock.getsockname()[1])
    thread = threading.Thread(target=server.run, name="rlhf-web", daemon=True)
    thread.start()
    shown = _public_address() if cfg.host in ("0.0.0.0", "::", "") else cfg.host
    base = f"http://{_bracket(shown)}:{port}/"
    url = base + (f"?token={token}" if token and not tokens else "")
    urls = {name: f"{base}?token={tok}" for name, tok in tokens.items()}
    return ServerHandle(
        url, cfg.host, port, token, app, server, socket_map, thread, labeller_urls=urls
    )
