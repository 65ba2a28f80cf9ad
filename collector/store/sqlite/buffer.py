"""The trace buffer of the SQLite store: requests kept whole on disk, a per-trace index in memory.

Decision timing: a trace with a run candidate is decided ``decision_wait`` after its
root span arrived (the root ends, and is exported, last), or after its latest candidate
when the root has not arrived, waiting at least ``rootless_wait`` then. A decided trace
stays as context (so late run spans are decided again with the whole trace) until
``max_trace_age`` or eviction; decided traces are evicted first and do not count as lost
(one waiting for a late run's decision is undecided again: evicted in age order, and counted).

Layout: the ingest path writes one ``received`` row per request and nothing per trace:
the request's protobuf bytes as they arrived, and a summary of 21 bytes per trace (trace
id, span count, flags; see `collector.store.split.summarize_spans`). A request is cut by
trace only when one of its traces is decided. Chunks appended one by one
(`BufferTables.append`: logs, and callers that cut requests themselves) are rows of one
trace each, returned as stored. Which rows hold which trace, and every trace's timing,
live in memory (`TraceIndex`): one process owns the file, and the index is rebuilt from
the rows' summaries at start and after a failed commit. A row is deleted once no buffered
trace needs it. ``decided`` records each decision and the last row it covered, so a
restart does not decide a trace again (rows that came after it are decided again).
"""

from __future__ import annotations

import errno
import json
import sqlite3
import sys
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from collector.common.errors import QueueFull, UnreadableTrace
from collector.common.types import CANDIDATE, ROOT, AppendResult, SummaryEntry, TraceChunk
from collector.store.interface import ForwardItem
from collector.store.split import split_logs, split_traces
from collector.store.sqlite.body_log import BodyLog
from collector.store.sqlite.forward import ForwardTables
from collector.store.sqlite.index import TraceIndex
from collector.store.sqlite.schema import pack_summary, summary_entry, unpack_summary

_TRANSIENT = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EINTR})
_IN_BATCH = 500  # ids per IN (...) statement, far below SQLite's limit on parameters
_CACHED_REQUESTS = 16  # requests kept cut by trace: a decision batch mostly reads a few



@dataclass
class BufferTables:
    """The ``received`` and ``decided`` tables and the in-memory `TraceIndex`; every method
    takes the store's connection (and runs on the store's thread).

    Example:
        >>> from collector.store.sqlite.runner import SCHEMA
        >>> db = sqlite3.connect(":memory:"); db.executescript(SCHEMA)  # doctest: +ELLIPSIS
        <sqlite3.Cursor object at ...>
        >>> buf = BufferTables(decision_wait=1.0, rootless_wait=5.0)
        >>> buf.append(db, [TraceChunk(b"t" * 16, "spans", b"x", 1, True, True)], now=0.0)
        AppendResult(evicted_traces=0, dropped_spans=0)
        >>> buf.due(db, now=1.0, limit=10)
        ([b'tttttttttttttttt'], 0)
        >>> [c.data for c in buf.load(db, b"t" * 16)]
        [b'x']
    """

    decision_wait: float = 5.0
    rootless_wait: float = 30.0
    max_traces: int = 100_000
    max_spans: int = 10_000
    max_age: float = 600.0
    max_bytes: int = 0  # body log bytes on disk at most (0: no cap); over it, requests get 429
    index: TraceIndex = field(init=False)
    log: BodyLog | None = None  # where whole requests' bytes go (None: inside the row)
    forward: ForwardTables | None = None  # the forward log, written with the rows it forwards
    stale: bool = True  # the index must be rebuilt from the file before use
    _cut: OrderedDict[int, dict[bytes, list[TraceChunk]]] = field(default_factory=OrderedDict)
    _segment_of: dict[int, int] = field(default_factory=dict)  # row -> body log segment
    _segment_rows: dict[int, int] = field(default_factory=dict)  # segment -> rows in it
    _doomed: list[int] = field(default_factory=list)  # segments to delete once committed

    def __post_init__(self) -> None:
        self.index = self._new_index()

    def _new_index(self) -> TraceIndex:
        return TraceIndex(self.decision_wait, self.rootless_wait, self.max_traces, self.max_spans, self.max_age)

    @property
    def count(self) -> int:
        """Traces buffered and not decided yet.

        Example:
            >>> BufferTables().count
            0
        """
        return self.index.undecided

    def invalidate(self) -> None:
        """Forget the in-memory index (after a rolled-back commit); the next call rebuilds it.

        Example:
            >>> BufferTables().invalidate()
        """
        self.stale = True
        self._cut.clear()
        self._doomed.clear()  # their rows' deletion was rolled back

    def before_commit(self) -> None:
        """Flush the bodies the transaction's rows point at (the runner's pre-commit step).

        Example:
            >>> BufferTables().before_commit()
        """
        if self.log is not None:
            self.log.sync()

    def after_commit(self) -> None:
        """Delete the body segments whose last row the committed transaction deleted.

        Example:
            >>> BufferTables().after_commit()
        """
        if self._doomed and self.log is not None:
            self.log.delete(self._doomed)
        self._doomed.clear()

    def close(self) -> None:
        """Flush and close the body log.

        Example:
            >>> BufferTables().close()
        """
        if self.log is not None:
            self.log.close()

    def reload(self, db: sqlite3.Connection) -> int:
        """Rebuild the index from the file; returns how many undecided traces are buffered.

        Example:
            >>> from collector.store.sqlite.runner import SCHEMA
            >>> db = sqlite3.connect(":memory:"); db.executescript(SCHEMA)  # doctest: +ELLIPSIS
            <sqlite3.Cursor object at ...>
            >>> BufferTables().reload(db)
            0
        """
        self.stale = True
        self._fresh(db)
        return self.count

    def _fresh(self, db: sqlite3.Connection) -> None:
        if not self.stale:
            return
        index = self._new_index()
        index.max_traces = sys.maxsize  # replayed unbounded, then trimmed (see TraceIndex.trim)
        if self.log is not None and self.log.current == 0:
            self.log.open()
        self._segment_of, self._segment_rows = {}, {}
        decisions = sorted((through, trace_id) for trace_id, through in db.execute(
            "SELECT trace_id, through_row FROM decided"))
        pending = iter(decisions)
        decision = next(pending, None)
        for row, at, summary, segment in db.execute(
                "SELECT id, at, summary, segment FROM received ORDER BY id"):
            if segment is not None:
                self._hold(row, segment)
            while decision is not None and decision[0] < row:
                index.finish(decision[1])
                decision = next(pending, None)
            index.add(unpack_summary(summary), at, row)
        while decision is not None:
            index.finish(decision[1])
            decision = next(pending, None)
        if self.forward is not None:  # requests not forwarded yet hold their segments too
            for segment, rows in self.forward.reload(db).items():
                self._segment_rows[segment] = self._segment_rows.get(segment, 0) + rows
        index.max_traces = self.max_traces
        index.trim()
        self.index = index
        self.stale = False
        self._cut.clear()
        self._flush(db)  # rows and decisions the replayed bounds let go
        if self.log is not None:  # segments no row points into (a crash before a commit)
            self.log.delete([s for s in self.log.segments() if s not in self._segment_rows])

    def _hold(self, row: int, segment: int) -> None:
        self._segment_of[row] = segment
        self._segment_rows[segment] = self._segment_rows.get(segment, 0) + 1

    def let_go(self, segment: int, rows: int) -> None:
        """``rows`` rows (of this table or the forward log) no longer point into ``segment``:
        it is deleted once none does and it is not the one being written."""
        left = self._segment_rows.get(segment, 0) - rows
        self._segment_rows[segment] = left
        if left <= 0 and self.log is not None and segment != self.log.current:
            del self._segment_rows[segment]
            self._doomed.append(segment)

    def forward_append(self, db: sqlite3.Connection, signal: str, body: bytes) -> None:
        """Add a request to the forward log by itself (its bytes in the row)."""
        self._fresh(db)
        if self.forward is not None:
            self.forward.add(db, signal, body, None)

    def forward_pending(self, db: sqlite3.Connection, max_bytes: int, limit: int) -> list[ForwardItem]:
        """The oldest requests of the forward log (see `ForwardTables.pending`)."""
        self._fresh(db)
        return self.forward.pending(db, self.log, max_bytes, limit) if self.forward is not None else []

    def forward_release(self, db: sqlite3.Connection, through: int) -> None:
        """Forget forwarded requests up to ``through`` (their segments may go)."""
        self._fresh(db)
        if self.forward is not None:
            self.forward.release(db, through, self.let_go)

    def append(
        self, db: sqlite3.Connection, chunks: Sequence[TraceChunk], now: float,
        forward: tuple[str, bytes] | None = None,
    ) -> AppendResult:
        """Store chunks as they are, one row each, evicting and dropping over the bounds;
        ``forward``: (signal, request body) for the forward log, in the same transaction.
        """
        self._fresh(db)
        if forward is not None and self.forward is not None:
            self.forward.room(len(forward[1]))
        entries: list[SummaryEntry] = []
        rows: list[int] = []
        for chunk in chunks:
            flags = (CANDIDATE if chunk.has_run_candidate else 0) | (ROOT if chunk.has_root else 0)
            entry = (chunk.trace_id, chunk.span_count, flags)
            rows.append(int(db.execute(
                "INSERT INTO received(at, signal, whole, summary, data) VALUES (?, ?, 0, ?, ?)",
                (now, chunk.signal, summary_entry(*entry), chunk.data),
            ).lastrowid or 0))
            entries.append(entry)
        result = self.index.add(entries, now, rows) if chunks else AppendResult()
        self._flush(db)
        if forward is not None and self.forward is not None:
            self.forward.add(db, forward[0], forward[1], None)
        return result

    def append_request(
        self, db: sqlite3.Connection, signal: str, raw: bytes, entries: Sequence[SummaryEntry], now: float,
        forward: str | None = None,
    ) -> AppendResult:
        """Store a whole request (``TracesData`` or ``LogsData`` encoding) and its summary;
        ``forward``: the signal under which the forward log takes it too (same bytes, same
        transaction).
        """
        self._fresh(db)
        forwards = self.forward if forward is not None else None
        if forwards is not None:
            forwards.room(len(raw))
        where: tuple[int, int] | None = None
        if self.log is None:
            row = int(db.execute(
                "INSERT INTO received(at, signal, whole, summary, data) VALUES (?, ?, 1, ?, ?)",
                (now, signal, pack_summary(entries), raw),
            ).lastrowid or 0)
        else:
            if self.max_bytes and self.log.disk_bytes + len(raw) > self.max_bytes:
                raise QueueFull(f"the trace buffer holds assembly.max_buffer_bytes ({self.max_bytes} bytes)"
                                " of request bodies")
            writing = self.log.current
            try:
                segment, offset = self.log.append(raw)
            finally:
                if self.log.current != writing and not self._segment_rows.get(writing):
                    self._segment_rows.pop(writing, None)  # rolled over a segment no row holds
                    self._doomed.append(writing)
            row = int(db.execute(
                "INSERT INTO received(at, signal, whole, summary, data, segment, offset, length)"
                " VALUES (?, ?, 1, ?, x'', ?, ?, ?)",
                (now, signal, pack_summary(entries), segment, offset, len(raw)),
            ).lastrowid or 0)
            self._hold(row, segment)
            where = (segment, offset)
        result = self.index.add(entries, now, row)
        self._flush(db)
        if forwards is not None and forward is not None:
            forwards.add(db, forward, raw, where)
            if where is not None:
                self._segment_rows[where[0]] = self._segment_rows.get(where[0], 0) + 1
        return result

    def _flush(self, db: sqlite3.Connection) -> None:
        """Delete the rows no trace needs and the decisions of traces that left."""
        index = self.index
        freed, index.freed_rows = index.freed_rows, []
        forgotten, index.forgotten = index.forgotten, []
        for i in range(0, len(freed), _IN_BATCH):
            part = freed[i:i + _IN_BATCH]
            db.execute(f"DELETE FROM received WHERE id IN ({','.join('?' * len(part))})", part)
            for row in part:
                self._cut.pop(row, None)
                segment = self._segment_of.pop(row, None)
                if segment is not None:
                    self.let_go(segment, 1)
        for i in range(0, len(forgotten), _IN_BATCH):
            ids = forgotten[i:i + _IN_BATCH]
            db.execute(f"DELETE FROM decided WHERE trace_id IN ({','.join('?' * len(ids))})", ids)

    def drop(self, db: sqlite3.Connection, trace_id: bytes) -> None:
        """Forget a trace (its rows go once no other trace needs them)."""
        self._fresh(db)
        if trace_id in self.index.traces:
            self.index._remove(trace_id)  # noqa: SLF001 (the index is this class's own)
            self._flush(db)

    def discard(self, db: sqlite3.Connection, trace_id: bytes, error: str, now: float) -> None:
        """Dead-letter a trace that cannot be read (key ``trace/<id>``) and forget it."""
        payload = json.dumps({"trace_id": trace_id.hex(), "span_id": ""})
        db.execute(
            "INSERT INTO dead_letters(key, payload, error, attempts, failed_at) VALUES (?, ?, ?, 1, ?)",
            (f"trace/{trace_id.hex()}", payload, json.dumps({"type": "UnreadableTrace", "message": error, "scorer_id": ""}), now),
        )
        self.drop(db, trace_id)

    def due(self, db: sqlite3.Connection, now: float, limit: int) -> tuple[list[bytes], int]:
        """Traces to decide now, and how many run-less traces expired (and were dropped)."""
        self._fresh(db)
        result = self.index.due(now, limit)
        self._flush(db)
        return result

    def next_due(self, db: sqlite3.Connection) -> float | None:
        """The earliest time a trace may be due for a decision (None: none pending)."""
        self._fresh(db)
        return self.index.next_due()

    def load(self, db: sqlite3.Connection, trace_id: bytes) -> list[TraceChunk]:
        """A trace's chunks in arrival order (whole requests are cut by trace here)."""
        self._fresh(db)
        out: list[TraceChunk] = []
        for row in self.index.rows_of(trace_id):
            cut = self._cut.get(row)
            if cut is None:
                found = db.execute(
                    "SELECT signal, whole, data, segment, offset, length FROM received WHERE id = ?", (row,),
                ).fetchone()
                if found is None:
                    continue
                signal, whole, data, segment, offset, length = found
                try:
                    if segment is not None and self.log is not None:
                        data = self.log.read(segment, offset, length)
                    if not whole:
                        out.append(TraceChunk(trace_id, signal, data, 0, False))
                        continue
                    cut = _cut_by_trace(signal, data)
                except (OSError, DecodeError) as err:
                    if isinstance(err, OSError) and err.errno in _TRANSIENT:
                        raise  # out of file descriptors or memory: retried, not dead-lettered
                    raise UnreadableTrace(trace_id, f"row {row}: {err}") from err
                self._cut[row] = cut
                while len(self._cut) > _CACHED_REQUESTS:
                    self._cut.popitem(last=False)
            else:
                self._cut.move_to_end(row)
            out.extend(cut.get(trace_id, ()))
        return out

    def finish(self, db: sqlite3.Connection, trace_id: bytes) -> None:
        """Mark a trace decided (kept as context)."""
        self._fresh(db)
        through = self.index.finish(trace_id)
        if through is not None:
            db.execute("INSERT OR REPLACE INTO decided(trace_id, through_row) VALUES (?, ?)", (trace_id, through))


def _cut_by_trace(signal: str, data: bytes) -> dict[bytes, list[TraceChunk]]:
    """A whole stored request cut into its traces' chunks."""
    out: dict[bytes, list[TraceChunk]] = {}
    if signal == "logs":
        chunks = split_logs(LogsData.FromString(data).resource_logs)
    else:
        chunks, _ = split_traces(TracesData.FromString(data).resource_spans, _never, data)
    for chunk in chunks:
        out.setdefault(chunk.trace_id, []).append(chunk)
    return out


def _never(name: str, keys: Any) -> bool:
    return False


