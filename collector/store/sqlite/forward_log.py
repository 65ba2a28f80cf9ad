"""The SQLite store's `collector.store.interface.ForwardLog`: the forward log's calls, each run on
the store's connection thread over the trace buffer's tables (`BufferTables`), which write the
``forward`` table (`collector.store.sqlite.forward.ForwardTables`) with the rows it forwards.

Apart from the tables it calls so that the buffer (which holds the forward table) and this role
(which holds the buffer) do not import each other.
"""

from __future__ import annotations

import asyncio

from collector.store.interface import ForwardItem, ForwardState
from collector.store.sqlite.buffer import BufferTables
from collector.store.sqlite.runner import SqliteRunner


class SqliteForwardLog:
    """`collector.store.interface.ForwardLog` over the SQLite store's connection thread.

    Args:
        runner: the store's connection.
        buffer: the store's trace buffer tables (they own the body log and the forward table).

    Example:
        >>> import asyncio, tempfile, os
        >>> from collector.store.sqlite.store import SqliteStore
        >>> async def demo():
        ...     store = SqliteStore(os.path.join(tempfile.mkdtemp(), "q.db"), forward=True)
        ...     await store.start()
        ...     await store.forward_log.forward_append("logs", b"request")
        ...     items = await store.forward_log.forward_pending(1 << 20, 10)
        ...     await store.forward_log.forward_release(items[-1].position)
        ...     state = await store.forward_log.forward_state()
        ...     await store.shutdown()
        ...     return [i.body for i in items], state
        >>> asyncio.run(demo())
        ([b'request'], ForwardState(head=1, sent=1, requests=0, bytes=0))
    """

    def __init__(self, runner: SqliteRunner, buffer: BufferTables) -> None:
        self._runner = runner
        self._buffer = buffer

    async def forward_append(self, signal: str, body: bytes) -> None:
        """Add one request to the log (its own transaction; trace requests come with the buffer's rows)."""
        await self._runner.call(lambda db: self._buffer.forward_append(db, signal, body))

    async def forward_pending(self, max_bytes: int, limit: int) -> list[ForwardItem]:
        """The oldest requests not forwarded yet (see `ForwardTables.pending`)."""
        forward = self._buffer.forward
        if forward is None:
            return []
        return await self._runner.call(lambda db: self._buffer.forward_pending(db, max_bytes, limit))

    async def forward_release(self, through: int) -> None:
        """Forget the requests up to ``through``."""
        await asyncio.shield(self._runner.call(lambda db: self._buffer.forward_release(db, through)))

    async def forward_state(self) -> ForwardState:
        """Head, sent position and backlog (from memory: never waits on the disk)."""
        forward = self._buffer.forward
        return forward.state() if forward is not None else ForwardState(0, 0, 0, 0)
