"""Connection limits of the listeners: a cap on open connections, header and body read
timeouts, the open-file limit, and accept errors logged at most once per interval.

Every connection takes a file descriptor, as do the store's files: without a cap, a
connection flood exhausts the process's open-file limit and the store can no longer open
its files. The cap per listener is ``[receiver] max_connections``, lowered to fit the
open-file limit (`connection_cap`). When the HTTP listener is full (`ConnectionGuard`), the oldest connection
that has not sent a request yet (a slow or idle client) is closed to make room; if every
connection is busy with a request, the new one is closed instead. A connection must send
its first request's headers within ``header_timeout_s``.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

logger = logging.getLogger(__name__)

FILES_RESERVED = 256
"""Open files kept out of the connection caps: the store, logs, exporters, libraries."""
OPEN_FILES_WANTED = 65536
"""The soft open-file limit the daemon raises itself to (within the hard limit)."""
ACCEPT_ERROR_LOG_S = 10.0
"""Accept errors (out of file descriptors) are logged at most once per this interval."""


def raise_open_file_limit(wanted: int = OPEN_FILES_WANTED) -> int:
    """Raise the soft open-file limit towards ``wanted`` (never above the hard limit);
    returns the soft limit in force.

    Example:
        >>> raise_open_file_limit() >= 1
        True
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            logger.debug("could not raise the open-file limit to %d", target, exc_info=True)
    return soft if soft != resource.RLIM_INFINITY else wanted


def connection_cap(configured: int, listeners: int, open_files: int) -> int:
    """Connections per listener: ``configured``, lowered so that all listeners together
    leave `FILES_RESERVED` files of ``open_files`` free.

    Example:
        >>> connection_cap(1000, 2, 65536), connection_cap(1000, 2, 1024)
        (1000, 384)
    """
    fits = max(16, (open_files - FILES_RESERVED) // max(1, listeners))
    return min(configured, fits)


class AcceptErrorFilter:
    """A loop exception handler that logs accept errors (EMFILE, ENFILE) at most once per
    interval, with how many were suppressed; other errors go to the previous handler.

    Example:
        >>> loop = asyncio.new_event_loop()
        >>> errors = AcceptErrorFilter(interval_s=60.0)
        >>> errors.install(loop)
        >>> for _ in range(3):
        ...     loop.call_exception_handler({"message": "socket.accept() out of system resource",
        ...                                  "exception": OSError(24, "Too many open files")})
        >>> errors.suppressed
        2
        >>> loop.close()
    """

    def __init__(self, interval_s: float = ACCEPT_ERROR_LOG_S) -> None:
        self._interval = interval_s
        self._last = -interval_s
        self.suppressed = 0
        self._previous: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Become ``loop``'s exception handler (keeping the previous one for other errors)."""
        self._previous = loop.get_exception_handler()
        loop.set_exception_handler(self._handle)

    def _handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if "accept" not in str(context.get("message", "")):
            if self._previous is not None:
                self._previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self._last < self._interval:
            self.suppressed += 1
            return
        self._last = now
        logger.error("accepting connections failed: %s (%d more since the last report; lower "
                     "[receiver] max_connections or raise the open-file limit)",
                     context.get("exception"), self.suppressed)
        self.suppressed = 0


class _Refused(asyncio.Protocol):
    """A connection over the cap: closed at once."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class ConnectionGuard:
    """The HTTP listener's cap on connections and its header timeout.

    Args:
        max_connections: open connections at most.
        header_timeout_s: a connection that sent no request within this is closed.
        on_refused: called with a reason for each connection closed by the cap or the timeout.
    """

    def __init__(self, max_connections: int, header_timeout_s: float,
                 on_refused: Callable[[str], None] = lambda reason: None) -> None:
        self._cap = max_connections
        self._header_timeout = header_timeout_s
        self._on_refused = on_refused
        self._waiting: dict[Any, None] = {}  # handlers that have not sent a request, oldest first
        self._connecting: dict[Any, float] = {}  # handlers created, not yet told of their connection

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """The aiohttp middleware that marks a connection as having sent a request."""
        self._waiting.pop(request.protocol, None)
        return await handler(request)

    def connection(self, server: web.Server) -> asyncio.BaseProtocol:
        """The protocol for a new connection: aiohttp's handler, or one that closes at once."""
        loop = asyncio.get_running_loop()
        if self._open(server, loop.time()) >= self._cap and not self._evict_waiting():
            self._on_refused("max_connections")
            return _Refused()
        handler = server()
        self._waiting[handler] = None
        self._connecting[handler] = loop.time()
        loop.call_later(self._header_timeout, self._expire, handler)
        return handler

    def _open(self, server: web.Server, now: float) -> int:
        """Open connections: aiohttp's, plus those accepted in this loop turn (the loop
        accepts a burst at once and announces them to aiohttp only afterwards)."""
        for handler, at in list(self._connecting.items()):
            if handler.transport is not None or now - at > 1.0:
                del self._connecting[handler]
        return len(server.connections) + len(self._connecting)

    def _evict_waiting(self) -> bool:
        """Close the oldest connection that has not sent a request; False when there is none."""
        for handler in list(self._waiting):
            if handler.transport is None:
                continue  # accepted in this loop turn, not connected yet (or closed since)
            del self._waiting[handler]
            self._on_refused("max_connections")
            handler.force_close()
            return True
        return False

    def _expire(self, handler: Any) -> None:
        if self._waiting.pop(handler, False) is None and handler.transport is not None:
            self._on_refused("header_timeout")
            handler.force_close()


class CappedSite(web.TCPSite):
    """A `web.TCPSite` whose connections go through a `ConnectionGuard`.

    Args:
        runner: the app runner (its application has ``guard.middleware``).
        host: the address to bind.
        port: the port (0: any).
        guard: the cap and header timeout.
        ssl_context: serve TLS with this context, or None.
    """

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: ConnectionGuard,
                 ssl_context: Any = None) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self._guard = guard

    async def start(self) -> None:
        """Bind and serve through the guard (never sharing the port: no ``SO_REUSEPORT``)."""
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            lambda: self._guard.connection(server), self._host, self._port,
            ssl=self._ssl_context, backlog=self._backlog, reuse_port=False,
        )
