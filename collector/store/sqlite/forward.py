"""The SQLite store's forward log: received requests kept, in order, until the export
endpoint accepted them (the Collector's persistent sending queue).

A row of ``forward`` is written in the same transaction as the request's ``received`` row
(`ForwardTables.add`, called by `collector.store.sqlite.buffer.BufferTables`; the store's
`ForwardLog` role over them is `collector.store.sqlite.forward_log`), so a request
the receiver answered success for is forwarded even after a crash. A whole trace request
is not written twice: its row points at the same bytes of the body log as the
``received`` row, and holds that segment until the request was forwarded. Rows are read
in ``id`` order and deleted up to the position the backend accepted (`release`).

The backlog is bounded in bytes: a request that would take it over ``max_bytes`` is refused
with `collector.common.errors.QueueFull` (the receivers answer 429 / RESOURCE_EXHAUSTED) before
anything of it is stored; an empty log always takes one request.

Counters kept in memory (size, rows, head, sent) are rebuilt from the table by `reload`,
which the buffer runs at start and after a failed commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from collector.common.errors import forward_backlog_full
from collector.store.interface import ForwardItem, ForwardState
from collector.store.sqlite.body_log import BodyLog


@dataclass
class ForwardTables:
    """The ``forward`` table and its counters; every method takes the store's connection.

    Args:
        max_bytes: request bytes waiting at most (``export.max_forward_backlog_bytes``).
        retry_after_s: the retry delay a refused request is told.

    Example:
        >>> from collector.store.sqlite.runner import SCHEMA
        >>> db = sqlite3.connect(":memory:"); db.executescript(SCHEMA)  # doctest: +ELLIPSIS
        <sqlite3.Cursor object at ...>
        >>> log = ForwardTables(max_bytes=10)
        >>> log.add(db, "traces", b"first", None)
        >>> log.add(db, "traces", b"second!", None)
        Traceback (most recent call last):
        ...
        collector.common.errors.QueueFull: the forward backlog is full (5 of export.max_forward_backlog_bytes = 10 bytes): the export endpoint is down or not keeping up
        >>> [(i.position, i.body) for i in log.pending(db, None, 1 << 20, 10)]
        [(1, b'first')]
        >>> log.release(db, 1, None)
        >>> log.state()
        ForwardState(head=1, sent=1, requests=0, bytes=0)
    """

    max_bytes: int = 1 << 30
    retry_after_s: float = 5.0
    requests: int = 0
    size: int = 0  # bytes waiting
    head: int = 0
    sent: int = 0

    def reload(self, db: sqlite3.Connection) -> dict[int, int]:
        """Recount from the table; returns the body log segments its rows hold (segment -> rows)."""
        count, total, first, last = db.execute(
            "SELECT count(*), coalesce(sum(length), 0), min(id), max(id) FROM forward").fetchone()
        seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'forward'").fetchone()
        self.requests, self.size = int(count), int(total)
        self.head = max(int(seq[0]) if seq else 0, int(last or 0))
        self.sent = int(first) - 1 if first is not None else self.head
        return {int(s): int(n) for s, n in db.execute(
            "SELECT segment, count(*) FROM forward WHERE segment IS NOT NULL GROUP BY segment")}

    def room(self, size: int) -> None:
        """Refuse a request of ``size`` bytes that would take the backlog over its bound.

        Raises:
            QueueFull: the backlog holds ``max_bytes`` already (retry later).
        """
        if self.requests and self.size + size > self.max_bytes:
            raise forward_backlog_full(self.size, self.max_bytes, self.retry_after_s)

    def add(self, db: sqlite3.Connection, signal: str, body: bytes, where: tuple[int, int] | None) -> None:
        """Append a request: its bytes inline, or at ``where`` (segment, offset) of the body log.

        Raises:
            QueueFull: see `room` (checked here too).
        """
        self.room(len(body))
        if where is None:
            cursor = db.execute("INSERT INTO forward(signal, data, length) VALUES (?, ?, ?)",
                                (signal, body, len(body)))
        else:
            cursor = db.execute("INSERT INTO forward(signal, data, segment, offset, length) VALUES (?, x'', ?, ?, ?)",
                                (signal, where[0], where[1], len(body)))
        self.head = int(cursor.lastrowid or 0)
        self.requests += 1
        self.size += len(body)

    def pending(self, db: sqlite3.Connection, log: BodyLog | None, max_bytes: int, limit: int) -> list[ForwardItem]:
        """The oldest requests, in order: up to ``limit``, stopping once ``max_bytes`` are read."""
        items: list[ForwardItem] = []
        size = 0
        for position, signal, data, segment, offset, length in db.execute(
                "SELECT id, signal, data, segment, offset, length FROM forward WHERE id > ? ORDER BY id LIMIT ?",
                (self.sent, limit)):
            if items and size + length > max_bytes:
                break
            if segment is not None and log is not None:
                data = log.read(segment, offset, length)
            items.append(ForwardItem(int(position), str(signal), bytes(data)))
            size += length
        return items

    def release(self, db: sqlite3.Connection, through: int, let_go: Callable[[int, int], None] | None) -> None:
        """Delete the rows up to ``through``; ``let_go(segment, rows)`` frees the body log
        segments they held."""
        if through <= self.sent:
            return
        held = db.execute("SELECT segment, count(*) FROM forward WHERE id <= ? AND segment IS NOT NULL"
                          " GROUP BY segment", (through,)).fetchall()
        count, total = db.execute("SELECT count(*), coalesce(sum(length), 0) FROM forward WHERE id <= ?",
                                  (through,)).fetchone()
        db.execute("DELETE FROM forward WHERE id <= ?", (through,))
        self.requests -= int(count)
        self.size -= int(total)
        self.sent = max(self.sent, through)
        if let_go is not None:
            for segment, rows in held:
                let_go(int(segment), int(rows))

    def state(self) -> ForwardState:
        """The log's head, sent position and backlog, as of the last write."""
        return ForwardState(head=self.head, sent=self.sent, requests=self.requests, bytes=self.size)
