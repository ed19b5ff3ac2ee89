"""Connections under a flood: a budget per client address, and slow requests timed out.

Waitress stops accepting once ``connection_limit`` connections are open, and it accepts a
connection before any request on it (and so the token) can be read: 1,000 connections that send
half a request and stall locked every labeller out, even on a server with a token. Here the
server always accepts, and keeps the budget by closing connections instead:

* each client address may hold :data:`PER_ADDRESS` connections; its next one closes its longest
  idle one (a browser keeps up to 6; a flood from one address only ever churns its own, and an
  honest client behind the same address, such as a proxy or loopback, still gets in);
* past the global ``connection_limit`` the address holding the most connections gives one up;
* a request whose head and body have not arrived :data:`REQUEST_TIMEOUT_S` after it began is
  dropped (slowloris), on top of waitress' ``channel_timeout`` for idle connections.

Connections with a request being served, or a response still being sent, are never closed for
the budget; with none to spare, the new connection is the one closed.
"""

from __future__ import annotations

import time
from typing import Any

from waitress.adjustments import Adjustments
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

from rlhf.server.wire import JsonErrorChannel

PER_ADDRESS = 64
"""Open connections per client address before its longest idle one is closed (Chromium keeps up
to 6 per page's host; several labellers behind one address share this)."""
REQUEST_TIMEOUT_S = 15.0
"""A request's head and body must arrive within this many seconds of its first byte (the page's
requests are a few hundred bytes)."""


class GuardedChannel(JsonErrorChannel):
    """A connection that remembers when the request it is receiving began, and leaves its
    client address's count when it closes (the server counts it in once it is made)."""

    request_started = 0.0

    def received(self, data: bytes) -> bool:
        if self.request is None and data:
            self.request_started = time.time()
        return super().received(data)

    def del_channel(self, map: Any = None) -> None:
        super().del_channel(map)
        host = _host(self)
        mine = self.server.by_host.get(host)
        if mine is not None:
            mine.discard(self)
            if not mine:
                del self.server.by_host[host]


def _host(channel: Any) -> str:
    addr = channel.addr
    return str(addr[0]) if isinstance(addr, tuple) else str(addr)


def _spare(channel: Any) -> bool:
    """Nothing would be lost by closing it: no request being served, no response being sent."""
    return not channel.requests and not channel.total_outbufs_len


class GuardedServer(TcpWSGIServer):
    """Waitress' TCP server, keeping the connection budget by closing connections rather than by
    no longer accepting them (see the module's docstring)."""

    channel_class = GuardedChannel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.by_host: dict[str, set[Any]] = {}
        """Open connections per client address (kept by :class:`GuardedChannel`)."""
        super().__init__(*args, **kwargs)

    def readable(self) -> bool:
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        return bool(self.accepting)

    def handle_accept(self) -> None:
        try:
            accepted = self.accept()
        except OSError:  # the peer went away before we got to it
            return
        if accepted is None:
            return
        conn, addr = accepted
        try:
            self.set_socket_options(conn)
        except OSError:
            conn.close()
            return
        channel = self.channel_class(self, conn, self.fix_addr(addr), self.adj, map=self._map)
        self.by_host.setdefault(_host(channel), set()).add(channel)
        self._keep_budget(channel)

    def _keep_budget(self, new: Any) -> None:
        mine = self.by_host.get(_host(new), set())
        if len(mine) > PER_ADDRESS:
            self._close_one(mine, new)
        if len(self.active_channels) > self.adj.connection_limit:
            # The address holding the most connections gives one up.
            crowd = max(self.by_host.values(), key=len, default=set())
            self._close_one(crowd, new)

    def _close_one(self, channels: set[Any], new: Any) -> None:
        """Close the longest idle of ``channels`` that can be spared, else the new one."""
        spare = [c for c in channels if c is not new and _spare(c)]
        victim = min(spare, key=lambda c: c.last_activity, default=new)
        if victim.connected:
            victim.handle_close()

    def maintenance(self, now: float) -> None:
        super().maintenance(now)  # idle connections: channel_timeout
        cutoff = now - REQUEST_TIMEOUT_S
        for channel in self.active_channels.values():
            started = getattr(channel, "request_started", now)
            if channel.request is not None and not channel.requests and started < cutoff:
                channel.will_close = True


def guarded_server(app: Any, sock: Any, socket_map: dict[int, Any], **kw: Any) -> GuardedServer:
    """``waitress.create_server(app, map=socket_map, sockets=[sock], **kw)``, guarded."""
    adj = Adjustments(**kw)
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    sockinfo = (sock.family, sock.type, sock.proto, sock.getsockname())
    return GuardedServer(
        app,
        socket_map,
        True,
        sock,
        dispatcher=dispatcher,
        adj=adj,
        bind_socket=False,
        sockinfo=sockinfo,
    )
