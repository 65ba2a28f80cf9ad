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

import heapq
import itertools
import math
import sqlite3
import struct
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from collector.store.sqlite.body_log import BodyLog
from collector.types import AppendResult, TraceChunk
from collector.store.split import CANDIDATE, ROOT, split_logs, split_traces

_IN_BATCH = 500  # ids per IN (...) statement, far below SQLite's limit on parameters
_ENTRY = struct.Struct("<16sIB")  # summary entry: trace id, span count, flags
_CACHED_REQUESTS = 16  # requests kept cut by trace: a decision batch mostly reads a few

Entry = tuple[bytes, int, int]  # trace id, span count, flags


def pack_summary(entries: Iterable[Entry]) -> bytes:
    """A request's per-trace summary as stored beside it.

    Example:
        >>> unpack_summary(pack_summary([(b"t" * 16, 3, CANDIDATE)]))
        [(b'tttttttttttttttt', 3, 1)]
    """
    pack = _ENTRY.pack
    return b"".join([pack(t, n, f) for t, n, f in entries])


def unpack_summary(summary: bytes) -> list[Entry]:
    """The entries of a stored summary.

    Example:
        >>> unpack_summary(b"")
        []
    """
    return list(_ENTRY.iter_unpack(summary))


_DECIDED = 4  # index flag beside CANDIDATE and ROOT
_NEVER = math.inf  # decide_at of a trace not waiting for a decision


@dataclass
class TraceIndex:
    """Every buffered trace's timing and rows, and the bounds; no I/O.

    Mutations record the rows no trace needs any more (``freed_rows``) and the decided
    traces that left the buffer (``forgotten``) for the caller to delete. The state is
    kept in columns (arrays, and dicts of ints and bytes) indexed by a slot per trace: a
    hundred thousand buffered traces are no work for the garbage collector, which an
    object per trace would be (it doubled the cost of an append).

    Example:
        >>> index = TraceIndex(decision_wait=1.0)
        >>> index.add([(b"t" * 16, 2, CANDIDATE | ROOT)], now=0.0, rows=7)
        AppendResult(evicted_traces=0, dropped_spans=0)
        >>> index.due(now=1.0, limit=10)
        ([b'tttttttttttttttt'], 0)
        >>> index.finish(b"t" * 16), index.undecided
        (7, 0)
    """

    decision_wait: float = 5.0
    rootless_wait: float = 30.0
    max_traces: int = 100_000
    max_spans: int = 10_000
    max_age: float = 600.0
    traces: dict[bytes, int] = field(default_factory=dict)  # trace id -> slot, first seen first
    decided: dict[bytes, None] = field(default_factory=dict)  # in decision order: evicted first
    refs: dict[int, int] = field(default_factory=dict)  # row id -> buffered traces holding it
    freed_rows: list[int] = field(default_factory=list)
    forgotten: list[bytes] = field(default_factory=list)
    _first_seen: array[float] = field(default_factory=lambda: array("d"))
    _spans: array[int] = field(default_factory=lambda: array("q"))
    _decide_at: array[float] = field(default_factory=lambda: array("d"))
    _flags: bytearray = field(default_factory=bytearray)
    _rows: list[int | tuple[int, ...]] = field(default_factory=list)  # one row, or several
    _free: list[int] = field(default_factory=list)
    _heap: list[tuple[float, int, bytes]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def undecided(self) -> int:
        """Traces buffered and not decided yet.

        Example:
            >>> TraceIndex().undecided
            0
        """
        return len(self.traces) - len(self.decided)

    def _new_slot(self, now: float) -> int:
        if self._free:
            slot = self._free.pop()
            self._first_seen[slot], self._spans[slot], self._decide_at[slot] = now, 0, _NEVER
            self._flags[slot], self._rows[slot] = 0, ()
            return slot
        self._first_seen.append(now)
        self._spans.append(0)
        self._decide_at.append(_NEVER)
        self._flags.append(0)
        self._rows.append(())
        return len(self._rows) - 1

    def add(self, entries: Sequence[Entry], now: float, rows: int | Sequence[int]) -> AppendResult:
        """Add (trace id, span count, flags) entries that arrived at ``now``, held by ``rows``
        (one row for all, or one per entry).

        Traces evicted to make room are never among those this call adds to (decided
        traces go first, then the oldest); spans over ``max_spans`` per trace are dropped.

        Example:
            >>> index = TraceIndex(max_traces=1)
            >>> index.add([(b"a" * 16, 1, 0)], now=0.0, rows=1)
            AppendResult(evicted_traces=0, dropped_spans=0)
            >>> index.add([(b"b" * 16, 1, 0)], now=1.0, rows=[2]), list(index.traces), index.freed_rows
            (AppendResult(evicted_traces=1, dropped_spans=0), [b'bbbbbbbbbbbbbbbb'], [1])
        """
        traces = self.traces
        lost = 0
        fresh: list[bytes] = []
        if len(traces) + len(entries) > self.max_traces:  # room may have to be made
            ids = list(dict.fromkeys(e[0] for e in entries))
            fresh = [t for t in ids if t not in traces]
            need = len(traces) + len(fresh) - self.max_traces
            if need > 0:
                for victim in self._victims(need, set(ids)):
                    lost += victim not in self.decided
                    self._remove(victim)
        wait = self.decision_wait
        rootless = max(wait, self.rootless_wait)
        max_spans = self.max_spans
        refs, heap, seq, push = self.refs, self._heap, self._seq, heapq.heappush
        spans, decide_at, flags_of, rows_of = self._spans, self._decide_at, self._flags, self._rows
        dropped = 0
        by_entry = itertools.repeat(rows, len(entries)) if isinstance(rows, int) else rows
        for (trace_id, span_count, flags), row in zip(entries, by_entry, strict=True):
            slot = traces.get(trace_id)
            if slot is None:
                slot = traces[trace_id] = self._new_slot(now)
            total = spans[slot] + span_count
            if total > max_spans:
                dropped += span_count
                continue
            spans[slot] = total
            held = rows_of[slot]
            if isinstance(held, int):
                if held != row:
                    rows_of[slot] = (held, row)
                    refs[row] = refs.get(row, 0) + 1
            elif not held:
                rows_of[slot] = row
                refs[row] = refs.get(row, 0) + 1
            elif held[-1] != row:
                rows_of[slot] = (*held, row)
                refs[row] = refs.get(row, 0) + 1
            if not flags:
                continue
            state = flags_of[slot] | flags
            flags_of[slot] = state
            if flags & ROOT:
                if not state & CANDIDATE:
                    continue
                at = now + wait
            else:  # a candidate
                at = now + (wait if state & ROOT else rootless)
                if decide_at[slot] != _NEVER and decide_at[slot] > at:
                    continue
            if decide_at[slot] != at:
                decide_at[slot] = at
                push(heap, (at, next(seq), trace_id))
                if state & _DECIDED:  # a late run: undecided again until its decision
                    self.decided.pop(trace_id, None)
        overflow = len(traces) - self.max_traces
        if overflow > 0:  # more new traces than the buffer holds: the oldest of them go too
            for trace_id in fresh[:overflow]:
                self._remove(trace_id)
            lost += min(overflow, len(fresh))
        distinct = (rows,) if isinstance(rows, int) else set(rows)
        unheld = [row for row in distinct if row not in refs]
        if unheld:  # no trace kept them (dropped spans, or traces removed above: listed once)
            listed = set(self.freed_rows)
            self.freed_rows.extend(row for row in unheld if row not in listed)
        return AppendResult(evicted_traces=lost, dropped_spans=dropped)

    def _victims(self, n: int, keep: set[bytes]) -> list[bytes]:
        out = list(itertools.islice((t for t in self.decided if t not in keep), n))
        if len(out) < n:
            chosen = set(out)
            out += itertools.islice(
                (t for t in self.traces if t not in keep and t not in chosen), n - len(out))
        return out

    def _remove(self, trace_id: bytes) -> None:
        slot = self.traces.pop(trace_id)
        refs = self.refs
        held = self._rows[slot]
        for row in held if isinstance(held, tuple) else (held,):
            left = refs[row] - 1
            if left:
                refs[row] = left
            else:
                del refs[row]
                self.freed_rows.append(row)
        if self._flags[slot] & _DECIDED:  # its decision record goes too
            self.decided.pop(trace_id, None)
            self.forgotten.append(trace_id)
        self._rows[slot] = ()
        self._decide_at[slot] = _NEVER
        self._free.append(slot)

    def due(self, now: float, limit: int) -> tuple[list[bytes], int]:
        """Traces to decide now (until finished, each call returns them again), and how
        many run-less traces expired (they, and decided traces past the age limit, leave).

        Example:
            >>> TraceIndex().due(now=0.0, limit=10)
            ([], 0)
        """
        oldest = now - self.max_age
        expired: list[bytes] = []
        forced: list[tuple[float, int, bytes]] = []
        first_seen, decide_at = self._first_seen, self._decide_at
        for trace_id, slot in self.traces.items():  # oldest first
            if first_seen[slot] > oldest:
                break
            if decide_at[slot] == _NEVER:
                expired.append(trace_id)
            elif decide_at[slot] > now:  # past the age limit: decided now
                forced.append((decide_at[slot], 0, trace_id))
        runless = 0
        for trace_id in expired:
            runless += not self._flags[self.traces[trace_id]] & CANDIDATE
            self._remove(trace_id)
        heap, traces = self._heap, self.traces
        ready: list[tuple[float, int, bytes]] = []
        seen: set[bytes] = set()
        while heap and heap[0][0] <= now and len(ready) < limit:
            entry = heapq.heappop(heap)
            held = traces.get(entry[2])
            if held is None or decide_at[held] != entry[0] or entry[2] in seen:
                continue  # stale: rescheduled, decided or gone since
            seen.add(entry[2])
            ready.append(entry)
        for entry in ready:
            heapq.heappush(heap, entry)  # still due until finished
        ready += [f for f in forced if f[2] not in seen]
        ready.sort(key=lambda e: e[0])
        return [e[2] for e in ready[:limit]], runless

    def finish(self, trace_id: bytes) -> int | None:
        """Mark a trace decided (kept as context); returns the last row the decision covered.

        Example:
            >>> TraceIndex().finish(b"t" * 16) is None
            True
        """
        slot = self.traces.get(trace_id)
        if slot is None:
            return None
        self._decide_at[slot] = _NEVER
        self._flags[slot] |= _DECIDED
        if trace_id not in self.decided:
            self.decided[trace_id] = None
        rows = self.rows_of(trace_id)
        return rows[-1] if rows else 0

    def rows_of(self, trace_id: bytes) -> list[int]:
        """The rows holding a trace's spans and records, in arrival order.

        Example:
            >>> TraceIndex().rows_of(b"t" * 16)
            []
        """
        slot = self.traces.get(trace_id)
        if slot is None:
            return []
        held = self._rows[slot]
        return list(held) if isinstance(held, tuple) else [held]


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
    index: TraceIndex = field(init=False)
    log: BodyLog | None = None  # where whole requests' bytes go (None: inside the row)
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
            index.add(list(_ENTRY.iter_unpack(summary)), at, row)
        while decision is not None:
            index.finish(decision[1])
            decision = next(pending, None)
        self.index = index
        self.stale = False
        self._cut.clear()
        self._flush(db)  # rows and decisions the replayed bounds let go
        if self.log is not None:  # segments no row points into (a crash before a commit)
            self.log.delete([s for s in self.log.segments() if s not in self._segment_rows])

    def _hold(self, row: int, segment: int) -> None:
        self._segment_of[row] = segment
        self._segment_rows[segment] = self._segment_rows.get(segment, 0) + 1

    def append(self, db: sqlite3.Connection, chunks: Sequence[TraceChunk], now: float) -> AppendResult:
        """Store chunks as they are, one row each, evicting and dropping over the bounds.

        Example:
            >>> BufferTables().append.__name__
            'append'
        """
        self._fresh(db)
        entries: list[Entry] = []
        rows: list[int] = []
        for chunk in chunks:
            flags = (CANDIDATE if chunk.has_run_candidate else 0) | (ROOT if chunk.has_root else 0)
            entry = (chunk.trace_id, chunk.span_count, flags)
            rows.append(int(db.execute(
                "INSERT INTO received(at, signal, whole, summary, data) VALUES (?, ?, 0, ?, ?)",
                (now, chunk.signal, _ENTRY.pack(*entry), chunk.data),
            ).lastrowid or 0))
            entries.append(entry)
        result = self.index.add(entries, now, rows)
        self._flush(db)
        return result

    def append_request(
        self, db: sqlite3.Connection, signal: str, raw: bytes, entries: Sequence[Entry], now: float,
    ) -> AppendResult:
        """Store a whole request (``TracesData`` or ``LogsData`` encoding) and its summary.

        Example:
            >>> BufferTables().append_request.__name__
            'append_request'
        """
        self._fresh(db)
        if self.log is None:
            row = int(db.execute(
                "INSERT INTO received(at, signal, whole, summary, data) VALUES (?, ?, 1, ?, ?)",
                (now, signal, pack_summary(entries), raw),
            ).lastrowid or 0)
        else:
            writing = self.log.current
            segment, offset = self.log.append(raw)
            if segment != writing and not self._segment_rows.get(writing):
                self._segment_rows.pop(writing, None)  # rolled over a segment no row holds
                self._doomed.append(writing)
            row = int(db.execute(
                "INSERT INTO received(at, signal, whole, summary, data, segment, offset, length)"
                " VALUES (?, ?, 1, ?, x'', ?, ?, ?)",
                (now, signal, pack_summary(entries), segment, offset, len(raw)),
            ).lastrowid or 0)
            self._hold(row, segment)
        result = self.index.add(entries, now, row)
        self._flush(db)
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
                    left = self._segment_rows[segment] - 1
                    self._segment_rows[segment] = left
                    if not left and self.log is not None and segment != self.log.current:
                        del self._segment_rows[segment]
                        self._doomed.append(segment)
        for i in range(0, len(forgotten), _IN_BATCH):
            ids = forgotten[i:i + _IN_BATCH]
            db.execute(f"DELETE FROM decided WHERE trace_id IN ({','.join('?' * len(ids))})", ids)

    def drop(self, db: sqlite3.Connection, trace_id: bytes) -> None:
        """Forget a trace (its rows go once no other trace needs them).

        Example:
            >>> BufferTables().drop.__name__
            'drop'
        """
        self._fresh(db)
        if trace_id in self.index.traces:
            self.index._remove(trace_id)  # noqa: SLF001 (the index is this class's own)
            self._flush(db)

    def due(self, db: sqlite3.Connection, now: float, limit: int) -> tuple[list[bytes], int]:
        """Traces to decide now, and how many run-less traces expired (and were dropped).

        Example:
            >>> BufferTables().due.__name__
            'due'
        """
        self._fresh(db)
        result = self.index.due(now, limit)
        self._flush(db)
        return result

    def load(self, db: sqlite3.Connection, trace_id: bytes) -> list[TraceChunk]:
        """A trace's chunks in arrival order (whole requests are cut by trace here).

        Example:
            >>> BufferTables().load.__name__
            'load'
        """
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
                if segment is not None and self.log is not None:
                    data = self.log.read(segment, offset, length)
                if not whole:
                    out.append(TraceChunk(trace_id, signal, data, 0, False))
                    continue
                cut = self._cut[row] = _cut_by_trace(signal, data)
                while len(self._cut) > _CACHED_REQUESTS:
                    self._cut.popitem(last=False)
            else:
                self._cut.move_to_end(row)
            out.extend(cut.get(trace_id, ()))
        return out

    def finish(self, db: sqlite3.Connection, trace_id: bytes) -> None:
        """Mark a trace decided (kept as context).

        Example:
            >>> BufferTables().finish.__name__
            'finish'
        """
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


def upgrade_layout(db: sqlite3.Connection) -> None:
    """Move the traces of an earlier file layout (``traces`` and ``chunks`` tables, one row
    per trace) into ``received`` and ``decided``; a no-op on a current file.

    Example:
        >>> db = sqlite3.connect(":memory:")
        >>> upgrade_layout(db)
    """
    def exists(table: str) -> bool:
        return bool(db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone())

    if not exists("traces"):
        return
    columns = {row[1] for row in db.execute("PRAGMA table_info(traces)")}
    data = "data" if "data" in columns else "NULL"
    order = "id" if "id" in columns else "first_seen"
    db.execute("BEGIN IMMEDIATE")
    traces = db.execute(
        f"SELECT trace_id, first_seen, span_count, has_candidate, root_seen, decided, {data}"
        f" FROM traces ORDER BY {order}").fetchall()
    for trace_id, first_seen, span_count, candidate, root, decided, head in traces:
        stored: list[tuple[str, bytes]] = [("spans", head)] if head is not None else []
        if exists("chunks"):
            stored += db.execute(
                "SELECT signal, data FROM chunks WHERE trace_id = ? ORDER BY id", (trace_id,)).fetchall()
        if not stored:
            continue  # nothing of it was kept
        flags = (CANDIDATE if candidate else 0) | (ROOT if root else 0)
        last = 0
        for i, (signal, chunk) in enumerate(stored):
            entry = (trace_id, span_count, flags) if i == 0 else (trace_id, 0, 0)
            last = int(db.execute(
                "INSERT INTO received(at, signal, whole, summary, data) VALUES (?, ?, 0, ?, ?)",
                (first_seen, signal, _ENTRY.pack(*entry), chunk)).lastrowid or 0)
        if decided:
            db.execute("INSERT OR REPLACE INTO decided(trace_id, through_row) VALUES (?, ?)", (trace_id, last))
    db.execute("DROP TABLE traces")
    if exists("chunks"):
        db.execute("DROP TABLE chunks")
    db.execute("COMMIT")
