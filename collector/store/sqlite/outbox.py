"""The SQLite store's score outbox (table ``outbox``): records settled jobs wrote, until exported.

`SqliteOutbox` is the `collector.store.interface.Outbox` half of `SqliteStore` (a mixin: it
runs on the store's connection thread, ``_runner``). A record this process settled is kept
in memory (`collector.store.kept`) until the exporter reads its row, so that read does not
parse the JSON this process just wrote.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence

from collector.common.types import OutboxItem, ScoreRecord
from collector.store.kept import KeptRecords
from collector.store.sqlite.runner import SqliteRunner


class SqliteOutbox:
    """The outbox of a `SqliteStore`: rows written by `settle` (`_add_to_outbox`), read by the exporter."""

    _runner: SqliteRunner
    _outbox: int  # rows not yet exported, as of the last write
    _kept_scores: KeptRecords[int, ScoreRecord]

    def _add_to_outbox(self, db: sqlite3.Connection, record: ScoreRecord, now: float) -> int:
        """Write a settled job's record (inside the settle's transaction); 1 if it was new."""
        payload = record.to_json()
        cur = db.execute("INSERT OR IGNORE INTO outbox(key, payload, available_at) VALUES (?, ?, ?)",
                         (record.key, payload, now))
        if cur.rowcount == 1 and cur.lastrowid is not None:
            self._kept_scores.keep(cur.lastrowid, record, chars=len(payload))
        return cur.rowcount

    async def pending(self, limit: int, within_s: float = 0.0) -> list[OutboxItem]:
        """Outbox records due for (another) export attempt (now, or within ``within_s``), oldest first."""
        now = time.time() + within_s

        def work(db: sqlite3.Connection) -> list[OutboxItem]:
            rows = db.execute(
                "SELECT id, key, payload, attempts FROM outbox WHERE available_at <= ? ORDER BY id LIMIT ?",
                (now, limit),
            ).fetchall()
            return [OutboxItem(i, self._kept_score(i, key) or ScoreRecord.from_json(p), a) for i, key, p, a in rows]

        return await self._runner.call(work)

    def _kept_score(self, item_id: int, key: str) -> ScoreRecord | None:
        """The record this process settled into outbox row ``item_id``, if kept and the row is its."""
        record = self._kept_scores.take(item_id)
        return record if record is not None and record.key == key else None

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete exported records."""
        await asyncio.shield(
            self._runner.call(
                lambda db: db.executemany("DELETE FROM outbox WHERE id = ?", [(i,) for i in item_ids])
            )
        )
        self._outbox = max(0, self._outbox - len(item_ids))

    async def defer(self, item_ids: Sequence[int], delay_s: float) -> None:
        """Postpone records whose export failed."""
        until = time.time() + delay_s
        await self._runner.call(
            lambda db: db.executemany(
                "UPDATE outbox SET attempts = attempts + 1, available_at = ? WHERE id = ?",
                [(until, i) for i in item_ids],
            )
        )
