"""A SQLite connection owned by one dedicated thread; coroutines submit work to it.

Every statement runs on that thread (never on the event loop). The database is in WAL
mode with ``synchronous=FULL``: a call that returned is on disk. Calls submitted while
the thread is busy are group-committed: the next drain runs them all in one
transaction, each inside its own savepoint (a failing call is rolled back alone), so
one fsync serves many concurrent receivers and workers.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import sqlite3
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, TypeVar

from collector.store.sqlite.schema import SCHEMA, add_missing_columns, upgrade_layout

logger = logging.getLogger(__name__)

T = TypeVar("T")



class SqliteRunner:
    """Runs callables against one connection on one thread.

    Example:
        >>> import asyncio, tempfile, os
        >>> async def demo():
        ...     runner = SqliteRunner(os.path.join(tempfile.mkdtemp(), "q.db"))
        ...     await runner.open()
        ...     n = await runner.call(lambda db: db.execute("SELECT count(*) FROM jobs").fetchone()[0])
        ...     await runner.close()
        ...     return n
        >>> asyncio.run(demo())
        0
    """

    def __init__(
        self, path: str, on_rollback: Callable[[], None] | None = None,
        before_commit: Callable[[], None] | None = None, after_commit: Callable[[], None] | None = None,
    ) -> None:
        self._path = path
        self._on_rollback = on_rollback  # state kept beside the file is reloaded after a failed commit
        self._before_commit = before_commit  # runs (on the store's thread) before each COMMIT; may raise
        self._after_commit = after_commit  # runs after each successful COMMIT
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracescore-sqlite")
        self._db: sqlite3.Connection | None = None
        self._lock_file: IO[bytes] | None = None
        # deque append/popleft are atomic: the loop never waits on a lock held by the thread.
        self._pending: deque[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = deque()
        self._drain_queued = False  # a drain is submitted and has not started taking calls yet

    def _open(self) -> None:
        if self._path not in ("", ":memory:"):
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            # One process per queue file: a second daemon would release the first one's leases.
            lock = open(self._path + ".lock", "a+b")  # held (locked) until close
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                raise RuntimeError(f"{self._path} is in use by another tracescore process") from None
            self._lock_file = lock
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA busy_timeout=5000")
        # Checkpoint the WAL every ~40 MB rather than 4 MB: index pages rewritten by many
        # commits are copied into the database once, not once per commit or two.
        db.execute("PRAGMA wal_autocheckpoint=10000")
        db.executescript(SCHEMA)
        upgrade_layout(db)  # a file of an earlier version keeps its traces
        add_missing_columns(db)
        self._db = db

    async def open(self) -> None:
        """Open the file (creating directories and tables) on the store's thread."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._open)

    def _drain(self) -> None:
        # Cleared before taking the calls: a call appended after this point submits a drain of
        # its own (it may find nothing left), a call appended before it is taken below.
        self._drain_queued = False
        batch = []
        while self._pending:
            batch.append(self._pending.popleft())
        if not batch:
            return  # an earlier drain already ran these calls
        db = self._db
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        if db is None:
            closed = RuntimeError("store is not open")
            outcomes = [(fut, None, closed) for _, fut in batch]
        else:
            try:
                outcomes = self._run_batch(db, batch, self._before_commit)
            except Exception as err:  # BEGIN/COMMIT failed (busy, I/O error): every call fails
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if self._on_rollback is not None:
                    self._on_rollback()
                outcomes = [(fut, None, err) for _, fut in batch]
            else:
                if self._after_commit is not None:
                    try:
                        self._after_commit()
                    except Exception:  # housekeeping: the calls themselves succeeded
                        logger.exception("after-commit step failed")
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        for outcome in outcomes:
            by_loop.setdefault(outcome[0].get_loop(), []).append(outcome)
        for loop, resolved in by_loop.items():  # one wake-up per loop and drain, not per call
            loop.call_soon_threadsafe(_resolve_all, resolved)

    @staticmethod
    def _run_batch(
        db: sqlite3.Connection, batch: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]],
        before_commit: Callable[[], None] | None = None,
    ) -> list[tuple[asyncio.Future[Any], Any, BaseException | None]]:
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        db.execute("BEGIN IMMEDIATE")
        for fn, fut in batch:
            db.execute("SAVEPOINT call")
            try:
                result = fn(db)
            except Exception as err:
                db.execute("ROLLBACK TO call")
                db.execute("RELEASE call")
                outcomes.append((fut, None, err))
            else:
                db.execute("RELEASE call")
                outcomes.append((fut, result, None))
        if before_commit is not None:
            before_commit()
        db.execute("COMMIT")
        return outcomes

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` on the store's thread, committed before this returns.

        The call runs (and commits) even if the awaiting coroutine is cancelled.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._pending.append((fn, fut))
        if not self._drain_queued:  # calls made while a drain is queued join it
            self._drain_queued = True
            try:
                self._executor.submit(self._drain)
            except RuntimeError:  # the store is closed
                self._drain_queued = False
                self._pending.remove((fn, fut))
                raise
        return await fut

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock_file is not None:
            self._lock_file.close()  # releases the flock
            self._lock_file = None

    async def close(self) -> None:
        """Close the connection and stop the thread; safe twice."""
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._close)
        except RuntimeError:
            pass  # executor already shut down
        await asyncio.to_thread(self._executor.shutdown, True)  # joins the (idle) thread


async def run_beside(path: str, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn(connection)`` in one ``BEGIN IMMEDIATE`` transaction on a connection of its own
    to the queue file ``path``, in a thread: a command working beside the running daemon (WAL
    mode lets it; it takes none of the daemon's locks). A file an earlier version wrote gets
    the columns and tables it lacks first.

    Example:
        >>> import os, tempfile
        >>> asyncio.run(run_beside(os.path.join(tempfile.mkdtemp(), "none.db"), lambda db: 1))
        Traceback (most recent call last):
        ...
        FileNotFoundError: no queue file at ...none.db (is queue.url the daemon's?)
    """
    def work() -> T:
        if not Path(path).is_file():
            raise FileNotFoundError(f"no queue file at {path} (is queue.url the daemon's?)")
        db = sqlite3.connect(path, isolation_level=None, timeout=10.0)
        try:
            db.execute("PRAGMA busy_timeout=10000")
            db.execute("BEGIN IMMEDIATE")
            add_missing_columns(db)
            result = fn(db)
            db.execute("COMMIT")
            return result
        finally:
            db.close()

    return await asyncio.to_thread(work)


def _resolve_all(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Hand each call's result or error to its waiter (in the waiter's loop)."""
    for fut, result, error in outcomes:
        if fut.done():
            continue
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)
