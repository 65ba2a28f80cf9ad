"""The embedded store: span buffer, job queue, dead letters and outbox in one SQLite file.

`SqliteStore` implements `TraceBuffer` (assembly), `JobQueue` (workers) and `Outbox`
(export). Invariants:

* a trace chunk is on disk before `append` returns (the receiver answers after it);
* decision timing and retention of the trace buffer: see `collector.store.sqlite.buffer`;
* a job key that is completed or dead-lettered (table ``done``) is never queued again;
* `settle` with a record writes the outbox row, records the key as done and deletes the
  job in one transaction, so a result is never lost and never produced twice;
* a leased job whose lease ran out is taken again (up to ``max_attempts`` takes).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from collector.common.errors import UnreadableTrace
from collector.common.types import (
    AppendResult,
    Dead,
    LeasedJob,
    RunRecord,
    ScoreJob,
    ScoreRecord,
    Settlement,
    StoreStats,
    TraceChunk,
    dead_letter_error,
)
from collector.store.interface import SessionRules
from collector.store.kept import KeptRecords
from collector.store.sqlite.body_log import BodyLog
from collector.store.sqlite.buffer import BufferTables
from collector.store.sqlite.faults import WriteHealth
from collector.store.sqlite.forward import ForwardTables
from collector.store.sqlite.forward_log import SqliteForwardLog
from collector.store.sqlite.jobs import lease_jobs, put_jobs, renew_leases, settle_job
from collector.store.sqlite.judge_ledger import SqliteJudgeLedger
from collector.store.sqlite.labels import SqliteLabels
from collector.store.sqlite.outbox import SqliteOutbox
from collector.store.sqlite.runner import SqliteRunner
from collector.store.sqlite.sessions import SqliteSessions
from collector.store.sqlite.sink_outbox import SqliteSinkOutbox, add_sink_rows
from collector.store.sqlite.totals import read_totals

logger = logging.getLogger(__name__)


class SqliteStore(SqliteOutbox, SqliteSessions, SqliteJudgeLedger, SqliteLabels):
    """The SQLite-backed trace buffer, job queue, outbox, session log (`SqliteSessions`), judge ledger
    and labels (`SqliteLabels`).

    Args:
        path: the database file (directories are created).
        decision_wait: seconds between a trace's root (or, without it, run) span arrival and
            its decision.
        rootless_wait: the least wait after a run span while the trace's root is missing.
        max_traces: traces buffered at most; the oldest is evicted beyond it.
        max_spans_per_trace: spans buffered per trace; later spans are dropped.
        max_trace_age: a trace is decided (or dropped) at most this long after its first span.
        visibility_timeout_s: how long a taken job stays leased.
        max_attempts: takes of one job before it is dead-lettered.
        sinks: the native score sinks configured: a settled record is written to each one's outbox.
        max_buffer_bytes: request bodies buffered on disk at most (0: no cap); requests
            beyond it are refused with `collector.common.errors.QueueFull` (429) before the disk fills.
        forward: keep received requests in the forward log (`forward_log`) until forwarded.
        max_forward_bytes: the forward log's bound; beyond it requests are refused (429).
        retry_after_s: the retry delay told with such a refusal.
        session_rules: when conversations are scored and how many are kept (default `SessionRules()`).

    Example:
        >>> import asyncio, tempfile, os
        >>> from collector.common.types import Done, RunRecord, ScoreJob
        >>> async def demo():
        ...     store = SqliteStore(os.path.join(tempfile.mkdtemp(), "q.db"))
        ...     await store.start()
        ...     job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "quality", "1")
        ...     first = await store.put([job, job])
        ...     leased = await store.take(10)
        ...     await store.settle(leased[0], Done(None))
        ...     again = await store.put([job])
        ...     await store.shutdown()
        ...     return first, len(leased), again
        >>> asyncio.run(demo())
        ([True, False], 1, [False])
    """

    def __init__(
        self,
        path: str,
        *,
        decision_wait: float = 5.0,
        rootless_wait: float = 30.0,
        max_traces: int = 100_000,
        max_spans_per_trace: int = 10_000,
        max_trace_age: float = 600.0,
        visibility_timeout_s: float = 300.0,
        max_attempts: int = 5,
        sinks: Sequence[str] = (),
        max_buffer_bytes: int = 0,
        forward: bool = False,
        max_forward_bytes: int = 1 << 30,
        retry_after_s: float = 5.0,
        session_rules: SessionRules | None = None,
    ) -> None:
        self.session_rules = session_rules or SessionRules()
        self._sinks = tuple(sinks)
        self._buffer = BufferTables(decision_wait, rootless_wait, max_traces, max_spans_per_trace, max_trace_age,
                                    max_buffer_bytes)
        if forward:
            self._buffer.forward = ForwardTables(max_forward_bytes, retry_after_s)
        on_disk = path not in ("", ":memory:")
        if on_disk:  # whole requests' bytes go to segment files beside it
            self._buffer.log = BodyLog(path + ".bodies")
        self._health = WriteHealth(str(Path(path).parent) if on_disk else None)
        # What this process queued and settled, read back without parsing (`collector.store.kept`).
        self._kept_runs, self._kept_scores = KeptRecords[str, RunRecord](), KeptRecords[int, ScoreRecord]()
        self._runner = SqliteRunner(path, on_rollback=self._rolled_back,
                                    before_commit=self._buffer.before_commit, after_commit=self._buffer.after_commit)
        self.forward_log = SqliteForwardLog(self._runner, self._buffer)
        self._visibility = visibility_timeout_s
        self._max_attempts = max_attempts
        self._depth = 0
        self._outbox = 0
        self._sink_backlog = 0  # rows of every sink's outbox: unexported results too, so part of depth
        self._started = False

    def _rolled_back(self) -> None:
        """A transaction failed: state kept beside the file no longer matches it."""
        self._buffer.invalidate()
        self._kept_runs.clear()
        self._kept_scores.clear()

    async def start(self) -> None:
        """Open the file; jobs and traces left by a previous process become available again."""
        await self._runner.open()
        self._started = True
        # Leases of a dead process cannot be renewed: release them now rather than waiting.
        await self._runner.call(lambda db: db.execute("UPDATE jobs SET lease = NULL, lease_until = NULL"))
        stats = await self.stats()
        self._depth, self._outbox = stats.queued + stats.in_flight, stats.outbox
        self._sink_backlog = await self._runner.call(
            lambda db: int(db.execute("SELECT count(*) FROM sink_outbox").fetchone()[0]))
        if self._buffer.forward is None:  # forwarding was turned off: what waited is not sent
            dropped = await self._runner.call(lambda db: db.execute("DELETE FROM forward").rowcount)
            if dropped:
                logger.warning("forwarding is off: %d received requests left unforwarded by the previous"
                               " process are not sent", dropped)
        await self._runner.call(self._buffer.reload)

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Close the database; safe before start and twice.

        Example:
            >>> import asyncio
            >>> asyncio.run(SqliteStore(":memory:").shutdown())
        """
        if self._started:
            self._started = False
            try:
                await self._runner.call(lambda db: self._buffer.close())
            finally:
                await self._runner.close()

    @property
    def reachable(self) -> bool:
        """False while the store cannot write (a full or failing disk): ``/readyz`` says 503."""
        return self._health.healthy

    # ----------------------------------------------------------------- trace buffer
    async def append(
        self, chunks: Sequence[TraceChunk], now: float | None = None, *, forward: tuple[str, bytes] | None = None,
    ) -> AppendResult:
        """Store trace chunks durably; returns what was evicted or dropped. ``forward``:
        (signal, request body) for the forward log, in the same transaction.

        Raises:
            StorageFault: the disk is full or failing (nothing was stored).
            QueueFull: the forward log is full.
        """
        at = time.time() if now is None else now
        return await self._health.guard(self._runner.call(lambda db: self._buffer.append(db, chunks, at, forward)))

    async def append_request(
        self, signal: str, raw: bytes, entries: Sequence[tuple[bytes, int, int]], now: float | None = None,
        *, forward: bool = False,
    ) -> AppendResult:
        """Store a whole request as received (``TracesData`` or ``LogsData`` encoding) with its
        per-trace summary (`collector.store.split.summarize_spans`); it is cut by trace
        only when one of its traces is decided. ``forward``: the forward log takes it too.

        Raises:
            StorageFault: the disk is full or failing (nothing was stored).
            QueueFull: the buffered bodies reached ``max_buffer_bytes``, or the forward log is full.
        """
        at = time.time() if now is None else now
        as_signal = ("logs" if signal == "logs" else "traces") if forward else None
        return await self._health.guard(
            self._runner.call(lambda db: self._buffer.append_request(db, signal, raw, entries, at, as_signal)))

    async def due(self, limit: int, now: float | None = None) -> tuple[list[bytes], int]:
        """Trace ids ready for a decision, and how many run-less traces expired (dropped)."""
        at = time.time() if now is None else now

        def work(db: sqlite3.Connection) -> tuple[list[bytes], int]:
            self._health.probe()  # while the disk is full: has space come back?
            return self._buffer.due(db, at, limit)

        return await self._runner.call(work)

    async def next_due(self) -> float | None:
        """When the next trace may be due for a decision (epoch seconds; None: none pending)."""
        return await self._runner.call(self._buffer.next_due)

    async def load(self, trace_id: bytes) -> list[TraceChunk]:
        """Every chunk stored for a trace, in arrival order."""

        return await self._runner.call(lambda db: self._buffer.load(db, trace_id))

    async def discard(self, trace_id: bytes, error: str) -> None:
        """Dead-letter a trace that cannot be read (key ``trace/<id>``, with ``error``) and forget it."""
        await self._runner.call(lambda db: self._buffer.discard(db, trace_id, error, time.time()))

    async def finish(self, trace_id: bytes) -> None:
        """Mark a trace decided; it is kept as context until it ages out or is evicted."""
        await self._runner.call(lambda db: self._buffer.finish(db, trace_id))

    async def load_many(self, trace_ids: Sequence[bytes]) -> list[list[TraceChunk] | UnreadableTrace]:
        """`load` for several traces in one call on the store's thread (an unreadable trace is
        returned as its error, the others are read)."""

        def work(db: sqlite3.Connection) -> list[list[TraceChunk] | UnreadableTrace]:
            loaded: list[list[TraceChunk] | UnreadableTrace] = []
            for trace_id in trace_ids:
                try:
                    loaded.append(self._buffer.load(db, trace_id))
                except UnreadableTrace as err:
                    loaded.append(err)
            return loaded

        return await self._runner.call(work)

    async def finish_many(self, trace_ids: Sequence[bytes]) -> None:
        """Mark several traces decided in one call on the store's thread."""

        def work(db: sqlite3.Connection) -> None:
            for trace_id in trace_ids:
                self._buffer.finish(db, trace_id)

        await self._runner.call(work)

    # -------------------------------------------------------------------- job queue
    def depth(self) -> int:
        """Jobs waiting or in flight plus unexported records, as of the last write (never blocks).

        Example:
            >>> SqliteStore(":memory:").depth()
            0
        """
        return self._depth + self._outbox + self._sink_backlog

    async def put(self, jobs: Sequence[ScoreJob]) -> list[bool]:
        """Queue jobs idempotently; False for a key already queued, done or dead."""
        now = time.time()
        flags = await self._runner.call(lambda db: put_jobs(db, jobs, now, self._kept_runs))
        self._depth += sum(flags)
        return flags

    async def take(self, limit: int) -> list[LeasedJob]:
        """Lease up to ``limit`` available jobs."""
        now, lease = time.time(), uuid.uuid4().hex
        taken, dead = await self._runner.call(
            lambda db: lease_jobs(db, limit, now, lease, self._visibility, self._max_attempts, self._kept_runs))
        self._depth -= dead
        return taken

    async def renew(self, leased: Sequence[LeasedJob]) -> int:
        """Renew the leases of running jobs (the worker's heartbeat); returns how many are still held."""
        until = time.time() + self._visibility
        return await self._runner.call(lambda db: renew_leases(db, leased, until))

    async def settle(self, leased: LeasedJob, outcome: Settlement) -> None:
        """Complete, retry or dead-letter a leased job (atomically with its outbox records)."""
        now = time.time()
        error = dead_letter_error(leased.job, outcome) if isinstance(outcome, Dead) else ""

        def work(db: sqlite3.Connection) -> tuple[int, int]:
            left, record = settle_job(db, leased, outcome, error, now)
            added = 0
            if record is not None:
                added = self._add_to_outbox(db, record, now)
                self._sink_backlog += add_sink_rows(db, self._sinks, record, now)
            return int(left), added

        removed, added = await asyncio.shield(self._runner.call(work))
        self._depth -= removed
        self._outbox += added

    # ---------------------------------------------------------------- judge replies
    async def judge_replies(self, job_key: str) -> dict[str, str]:
        """The judge replies kept for a job (request key -> reply JSON)."""
        return dict(await self._runner.call(lambda db: db.execute(
            "SELECT request_key, reply FROM judge_replies WHERE job_key = ?", (job_key,)).fetchall()))

    async def keep_judge_reply(self, job_key: str, request_key: str, reply: str) -> None:
        """Keep one judge reply of a job until the job settles done or dead."""
        await asyncio.shield(self._runner.call(lambda db: db.execute(
            "INSERT OR REPLACE INTO judge_replies(job_key, request_key, reply) VALUES (?, ?, ?)",
            (job_key, request_key, reply))))

    async def stats(self) -> StoreStats:
        """Row counts per table, for gauges and readiness."""
        now = time.time()

        def work(db: sqlite3.Connection) -> StoreStats:
            def one(sql: str, *args: object) -> int:
                return int(db.execute(sql, args).fetchone()[0])

            return StoreStats(
                queued=one("SELECT count(*) FROM jobs WHERE lease_until IS NULL OR lease_until <= ?", now),
                in_flight=one("SELECT count(*) FROM jobs WHERE lease_until > ?", now),
                dead=one("SELECT count(*) FROM dead_letters"),
                outbox=one("SELECT count(*) FROM outbox"),
                traces=self._buffer.reload(db) if self._buffer.stale else self._buffer.count,
                forward_requests=self._buffer.forward.requests if self._buffer.forward else 0,
                forward_bytes=self._buffer.forward.size if self._buffer.forward else 0,
            )

        stats = await self._runner.call(work)
        # Resynchronised: another connection (`tracescore dead-letters replay`) may have queued jobs.
        self._depth, self._outbox = stats.queued + stats.in_flight, stats.outbox
        return stats

    async def prune(self, older_than_s: float, now: float | None = None) -> int:
        """Forget idempotency keys and dead letters older than ``older_than_s``; returns rows removed.

        A batch replayed after that long would be scored again: keep it longer than any replay.
        """
        cutoff = (time.time() if now is None else now) - older_than_s

        def work(db: sqlite3.Connection) -> int:
            removed = db.execute("DELETE FROM done WHERE at < ?", (cutoff,)).rowcount
            return removed + db.execute("DELETE FROM dead_letters WHERE failed_at < ?", (cutoff,)).rowcount

        return await self._runner.call(work)

    async def totals(self) -> dict[str, float]:
        """The deployment's totals (`collector.store.sqlite.totals`): field -> amount."""
        return await self._runner.call(read_totals)

    def sink_outbox(self, sink: str) -> SqliteSinkOutbox:
        """The outbox of one configured sink.

        Example:
            >>> SqliteStore(":memory:", sinks=["phoenix"]).sink_outbox("phoenix").sink
            'phoenix'
        """
        return SqliteSinkOutbox(self._runner, sink, on_release=self._sink_rows_released)

    def _sink_rows_released(self, count: int) -> None:
        self._sink_backlog = max(0, self._sink_backlog - count)

    async def dead_letters(self) -> list[dict[str, object]]:
        """The dead-letter table as dicts (key, error, attempts)."""

        def work(db: sqlite3.Connection) -> list[dict[str, object]]:
            rows = db.execute("SELECT key, error, attempts FROM dead_letters ORDER BY id").fetchall()
            return [{"key": k, "error": json.loads(e), "attempts": a} for k, e, a in rows]

        return await self._runner.call(work)
