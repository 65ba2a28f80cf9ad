"""The native sinks' outboxes in the SQLite file: table ``sink_outbox``, one row per (sink, score).

Rows are written by `SqliteStore.settle` in the job's own transaction (`add_sink_rows`),
so a score reaches every configured sink's outbox exactly when it reaches the OTLP
outbox. The rows count in the store's depth like the OTLP outbox's (unexported results):
a sink that stays away makes receivers refuse data before the file grows without bound. A row leaves only through `SqliteSinkOutbox.release`: once its backend accepted
it, or once it was given up (its span never arrived within ``span_wait_s``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence

from collector.common.types import OutboxItem, ScoreRecord
from collector.store.sqlite.runner import SqliteRunner


def add_sink_rows(db: sqlite3.Connection, sinks: Sequence[str], record: ScoreRecord, now: float) -> int:
    """Queue ``record`` for every sink, inside the caller's transaction (a key is queued once per
    sink); returns the rows added.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); db.executescript(SCHEMA)  # doctest: +ELLIPSIS
        <sqlite3.Cursor object at ...>
        >>> rec = ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "q")
        >>> add_sink_rows(db, ["phoenix", "mlflow"], rec, 0.0), add_sink_rows(db, ["phoenix"], rec, 0.0)
        (2, 0)
        >>> db.execute("SELECT sink FROM sink_outbox ORDER BY id").fetchall()
        [('phoenix',), ('mlflow',)]
    """
    if not sinks:
        return 0
    payload = record.to_json()
    return db.executemany(
        "INSERT OR IGNORE INTO sink_outbox(sink, key, payload, available_at) VALUES (?, ?, ?, ?)",
        [(sink, record.key, payload, now) for sink in sinks],
    ).rowcount


class SqliteSinkOutbox:
    """One sink's view of the ``sink_outbox`` table (a `collector.store.interface.SinkOutbox`).

    Args:
        runner: the store's connection thread.
        sink: the sink's name (``phoenix``, ``mlflow``, ``langfuse``).
        on_release: told how many rows left (the store's depth counts them).
    """

    def __init__(self, runner: SqliteRunner, sink: str, on_release: Callable[[int], None] | None = None) -> None:
        self._runner = runner
        self.sink = sink
        self._on_release = on_release

    async def pending(self, limit: int) -> list[OutboxItem]:
        """Records due for (another) attempt, oldest first."""
        now = time.time()

        def work(db: sqlite3.Connection) -> list[OutboxItem]:
            rows = db.execute(
                "SELECT id, payload, attempts, waiting_since FROM sink_outbox"
                " WHERE sink = ? AND available_at <= ? ORDER BY id LIMIT ?",
                (self.sink, now, limit),
            ).fetchall()
            return [OutboxItem(i, ScoreRecord.from_json(p), a, w) for i, p, a, w in rows]

        return await self._runner.call(work)

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete records the backend accepted or that were given up."""
        removed = await asyncio.shield(self._runner.call(
            lambda db: db.executemany("DELETE FROM sink_outbox WHERE id = ?", [(i,) for i in item_ids]).rowcount))
        if self._on_release is not None:
            self._on_release(removed)

    async def defer(self, item_ids: Sequence[int], delay_s: float, *, span_missing: bool = False) -> None:
        """Postpone records (``span_missing``: remember when the backend first did not know the span)."""
        now = time.time()
        waiting = now if span_missing else None
        await self._runner.call(lambda db: db.executemany(
            "UPDATE sink_outbox SET attempts = attempts + 1, available_at = ?,"
            " waiting_since = COALESCE(waiting_since, ?) WHERE id = ?",
            [(now + delay_s, waiting, i) for i in item_ids]))

    async def backlog(self) -> int:
        """Records waiting for this sink."""
        return await self._runner.call(lambda db: int(db.execute(
            "SELECT count(*) FROM sink_outbox WHERE sink = ?", (self.sink,)).fetchone()[0]))
