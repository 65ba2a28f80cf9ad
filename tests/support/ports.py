"""Holding a loopback TCP port for a test while nothing listens on it.

A port found free (bind to port 0, close) is anyone's again at once: tests run in parallel
(pytest-xdist), so a server bound to it only later (a daemon after its start-up, a backend
started again after an outage) can find it taken, by another test's server or by any
outgoing connection (both draw from the same ephemeral range). `hold_port` keeps it bound
instead:

* nobody else gets it: bind to port 0 and connect() never pick a bound port, and an explicit
  bind without ``SO_REUSEADDR`` fails;
* it behaves as a free port: nothing listens, so connections to it are refused;
* the test's own server still binds it: a listener that sets ``SO_REUSEADDR`` (gRPC, aiohttp
  and asyncio servers, redis-server) may share the address with a bound socket that does not
  listen, and a second listener still fails, as it would without the holder.
"""

from __future__ import annotations

import socket


def hold_port(port: int = 0) -> socket.socket:
    """A socket holding ``port`` (0: a free one) on 127.0.0.1; close it to let the port go.

    Example:
        >>> holder = hold_port()
        >>> port = holder.getsockname()[1]
        >>> try:
        ...     socket.create_connection(("127.0.0.1", port), timeout=5)
        ... except ConnectionRefusedError:
        ...     print("refused")
        refused
        >>> holder.close()
    """
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock
