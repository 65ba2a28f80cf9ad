"""`TcpRelay`: a loopback TCP relay in front of a real server, which a test can cut and restore.

A backend outage seen from the daemon is a server that refuses connections and drops the ones
it had: that is what `TcpRelay.cut` makes of the relay's port, with the server itself left
running (a real Phoenix or MLflow takes seconds of CPU to start again). `TcpRelay.restore`
listens again on the same port. The relay runs its own event loop in a thread, so both sync
and async tests use it; bytes pass through unchanged.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

from ports import hold_port

_CALL_S = 30.0  # how long a cut or a restore may take (it is immediate on an idle loop)


class TcpRelay:
    """Relays connections made to ``127.0.0.1:port`` to ``target_port`` on the same host.

    Example:
        >>> import socket
        >>> server = socket.create_server(("127.0.0.1", 0))
        >>> relay = TcpRelay(server.getsockname()[1]).start()
        >>> client = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
        >>> accepted, _ = server.accept()
        >>> client.sendall(b"ping"); accepted.recv(4)
        b'ping'
        >>> relay.cut()  # the open connection is dropped, a new one refused
        >>> client.recv(4)
        b''
        >>> try:
        ...     socket.create_connection(("127.0.0.1", relay.port), timeout=5)
        ... except ConnectionRefusedError:
        ...     print("refused")
        refused
        >>> relay.restore()
        >>> again = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
        >>> accepted_again, _ = server.accept()
        >>> again.sendall(b"back"); accepted_again.recv(4)
        b'back'
        >>> relay.close()
        >>> for sock in (client, again, accepted, accepted_again, server): sock.close()
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._holder = hold_port()  # the port stays the relay's while it is cut
        self.port = int(self._holder.getsockname()[1])
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"tcp-relay-{self.port}", daemon=True)
        self._server: asyncio.Server | None = None
        self._relaying: dict[asyncio.Task[None], asyncio.StreamWriter] = {}  # each with its client's side

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the relayed server's URL, through the relay."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TcpRelay:
        """Start the relay's thread and listen."""
        self._thread.start()
        self.restore()
        return self

    def restore(self) -> None:
        """Listen again on the relay's port (the end of an outage)."""
        self._call(self._listen())

    def cut(self) -> None:
        """Stop listening and drop every relayed connection (the start of an outage)."""
        self._call(self._cut())

    def close(self) -> None:
        """Cut, stop the thread, let the port go."""
        if self._thread.is_alive():
            self.cut()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_CALL_S)
        self._loop.close()
        self._holder.close()

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(_CALL_S)

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._accepted, "127.0.0.1", self.port, reuse_address=True)

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task, client_writer in list(self._relaying.items()):
            task.cancel()  # a started relay drops its connection to the server too
            client_writer.transport.abort()
        await asyncio.gather(*self._relaying, return_exceptions=True)

    def _accepted(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        """A client connected: relay it (the task is known at once, so a cut right now ends it)."""
        task = self._loop.create_task(self._relay(client_reader, client_writer))
        self._relaying[task] = client_writer
        task.add_done_callback(lambda done: self._relaying.pop(done, None))

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_writer: asyncio.StreamWriter | None = None
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))
        except OSError:  # the server itself is down: so is the relayed connection
            client_writer.transport.abort()
        except asyncio.CancelledError:  # cut
            for writer in (client_writer, server_writer):
                if writer is not None:
                    writer.transport.abort()
            raise


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until either side ends; then end the other direction too."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()  # what was written is still sent; the other direction then reads its end
