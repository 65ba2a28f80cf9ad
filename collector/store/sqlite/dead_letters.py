"""Dead letters of the SQLite store, read and acted on beside a running daemon.

`SqliteDeadLetters` opens the queue file with its own connection (WAL mode lets it work
while the daemon runs; it takes none of the daemon's locks) and runs each command in one
``BEGIN IMMEDIATE`` transaction. A replay re-queues the job under its idempotency key: the
key's "done" mark, set when the job was dead-lettered, is lifted for exactly that key, and
a failure span of it still waiting in the outbox is dropped (the replayed result takes its
place: the outbox holds one record per key). The queued job names the failure span it
replaces (``jobs.supersedes``), so its new outcome's span says so. The running daemon's
workers take the job at their next poll and score it once.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from collector.common.types import DeadLetter, RunRecord
from collector.store.sqlite.runner import run_beside

_COLUMNS = "id, key, payload, error, attempts, failed_at"


def _letter(row: tuple[Any, ...]) -> DeadLetter:
    letter_id, key, payload, error, attempts, failed_at = row
    return DeadLetter.from_stored(str(letter_id), key, RunRecord.from_json(payload), error, attempts, failed_at)


def _numeric(ids: Sequence[str]) -> list[int]:
    return [int(i) for i in ids if str(i).isdigit()]


def list_dead_letters(db: sqlite3.Connection) -> list[DeadLetter]:
    """Every dead letter, oldest first.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> list_dead_letters(db)
        []
    """
    return [_letter(row) for row in db.execute(f"SELECT {_COLUMNS} FROM dead_letters ORDER BY id")]


def replay_dead_letters(db: sqlite3.Connection, ids: Sequence[str] | None, now: float) -> list[str]:
    """Re-queue dead letters (all when ``ids`` is None) under their own keys; returns the ids replayed.

    Example:
        >>> import json
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> error = json.dumps({"scorer_id": "q", "scorer_version": "1", "evaluation_span_id": "ab" * 8})
        >>> _ = db.execute("INSERT INTO dead_letters(key, payload, error, attempts, failed_at)"
        ...                " VALUES ('t/s/q/1', ?, ?, 1, 0)", (RunRecord("t", "s").to_json(), error))
        >>> replay_dead_letters(db, ["1"], 0.0), replay_dead_letters(db, ["1"], 0.0)
        (['1'], [])
        >>> db.execute("SELECT key, supersedes FROM jobs").fetchall()
        [('t/s/q/1', 'abababababababab')]
    """
    if ids is None:
        rows = db.execute(f"SELECT {_COLUMNS} FROM dead_letters ORDER BY id").fetchall()
    else:
        numeric = _numeric(ids)
        marks = ",".join("?" * len(numeric))
        rows = db.execute(f"SELECT {_COLUMNS} FROM dead_letters WHERE id IN ({marks}) ORDER BY id",
                          numeric).fetchall() if numeric else []
    replayed = []
    for row in rows:
        letter = _letter(row)
        key = row[1]
        db.execute("DELETE FROM done WHERE key = ?", (key,))
        db.execute("DELETE FROM outbox WHERE key = ?", (key,))  # an unexported failure span of it
        db.execute(
            "INSERT OR IGNORE INTO jobs(key, payload, scorer_id, scorer_version, available_at, supersedes)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (key, row[2], letter.job.scorer_id, letter.job.scorer_version, now, letter.evaluation_span_id),
        )
        db.execute("DELETE FROM dead_letters WHERE id = ?", (row[0],))
        replayed.append(letter.id)
    return replayed


def purge_dead_letters(db: sqlite3.Connection, ids: Sequence[str] | None) -> int:
    """Delete dead letters (all when ``ids`` is None); their keys stay done. Returns how many.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> purge_dead_letters(db, None)
        0
    """
    if ids is None:
        return db.execute("DELETE FROM dead_letters").rowcount
    numeric = _numeric(ids)
    return db.execute(f"DELETE FROM dead_letters WHERE id IN ({','.join('?' * len(numeric))})",
                      numeric).rowcount if numeric else 0


class SqliteDeadLetters:
    """`DeadLetterAdmin` on a SQLite queue file (see the module docstring).

    Args:
        path: the queue file (``queue.url``'s path); it must exist.

    Example:
        >>> import asyncio, os, tempfile
        >>> asyncio.run(SqliteDeadLetters(os.path.join(tempfile.mkdtemp(), "none.db")).letters())
        Traceback (most recent call last):
        ...
        FileNotFoundError: no queue file at ...none.db (is queue.url the daemon's?)
    """

    def __init__(self, path: str) -> None:
        self._path = path

    async def letters(self) -> list[DeadLetter]:
        """Every dead letter, oldest first."""
        return list(await run_beside(self._path, list_dead_letters))

    async def replay(self, ids: Sequence[str] | None) -> list[str]:
        """Re-queue dead letters (all when ``ids`` is None); returns the ids replayed."""
        now = time.time()
        return list(await run_beside(self._path, lambda db: replay_dead_letters(db, ids, now)))

    async def purge(self, ids: Sequence[str] | None) -> int:
        """Delete dead letters (all when ``ids`` is None); returns how many."""
        return int(await run_beside(self._path, lambda db: purge_dead_letters(db, ids)))

    async def close(self) -> None:
        """Nothing to release (each command opens and closes its connection)."""
