"""The trace-buffer tables of the SQLite store (``traces``, ``chunks``): the SQL, run on the store's thread.

Decision timing: a trace with a run candidate is decided ``decision_wait`` after its
root span arrived (the root ends, and is exported, last), or after its latest candidate
when the root has not arrived, waiting at least ``rootless_wait`` then. A decided trace
stays as context (so late run spans are decided again with the whole trace) until
``max_trace_age`` or eviction; decided traces are evicted first and do not count as lost.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collector.assembly_types import AppendResult, TraceChunk

_IN_BATCH = 500  # ids per IN (...) lookup, far below SQLite's limit on parameters


@dataclass
class BufferTables:
    """Bounds and bookkeeping of the trace buffer; every method takes the store's connection.

    Example:
        >>> from collector._sqlite import SCHEMA
        >>> db = sqlite3.connect(":memory:"); db.executescript(SCHEMA)  # doctest: +ELLIPSIS
        <sqlite3.Cursor object at ...>
        >>> buf = BufferTables(decision_wait=1.0, rootless_wait=5.0)
        >>> buf.append(db, [TraceChunk(b"t" * 16, "spans", b"x", 1, True, True)], now=0.0)
        AppendResult(evicted_traces=0, dropped_spans=0)
        >>> buf.due(db, now=1.0, limit=10)
        ([b'tttttttttttttttt'], 0)
    """

    decision_wait: float = 5.0
    rootless_wait: float = 30.0
    max_traces: int = 100_000
    max_spans: int = 10_000
    max_age: float = 600.0
    count: int = 0  # undecided + decided traces stored; touched only on the store's thread

    def append(self, db: sqlite3.Connection, chunks: Sequence[TraceChunk], now: float) -> AppendResult:
        """Store chunks, evicting the oldest traces and dropping spans over the bounds.

        One read of the touched traces, then one ``executemany`` per table: the cost is
        per row, not per statement. Traces evicted to make room are never among those
        this call appends to (decided traces go first, then the oldest).

        Example:
            >>> BufferTables().append.__name__
            'append'
        """
        ids = list(dict.fromkeys(c.trace_id for c in chunks))
        # [span_count, decide_at, has_candidate, root_seen, new, no chunk stored yet]
        state: dict[bytes, list[Any]] = {}
        for i in range(0, len(ids), _IN_BATCH):
            part = ids[i:i + _IN_BATCH]
            rows = db.execute(
                "SELECT trace_id, span_count, decide_at, has_candidate, root_seen FROM traces"
                f" WHERE trace_id IN ({','.join('?' * len(part))})", part,
            ).fetchall()
            for trace_id, *row in rows:
                state[trace_id] = [*row, False, False]
        fresh = [t for t in ids if t not in state]
        evicted = self._make_room(db, len(fresh), set(ids))
        rootless = max(self.decision_wait, self.rootless_wait)
        for trace_id in fresh:
            state[trace_id] = [0, None, 0, 0, True, True]
        dropped = 0
        rows_out = []
        first: dict[bytes, bytes] = {}  # a new trace's first spans chunk lives in its traces row
        for chunk in chunks:
            st = state[chunk.trace_id]
            span_count, decide_at, has_candidate, root_seen = st[0], st[1], st[2], st[3]
            if span_count + chunk.span_count > self.max_spans:
                dropped += chunk.span_count
                continue
            if st[4] and st[5] and chunk.signal == "spans":
                first[chunk.trace_id] = chunk.data
            else:
                rows_out.append((chunk.trace_id, chunk.signal, chunk.data))
            st[5] = False
            has_candidate = has_candidate or chunk.has_run_candidate
            root_seen = root_seen or chunk.has_root
            if chunk.has_root and has_candidate:
                decide_at = now + self.decision_wait
            elif chunk.has_run_candidate:
                wait = self.decision_wait if root_seen else rootless
                decide_at = max(decide_at or 0.0, now + wait)
            st[0], st[1], st[2], st[3] = span_count + chunk.span_count, decide_at, has_candidate, root_seen
        db.executemany(
            "INSERT INTO traces(trace_id, first_seen, span_count, decide_at, has_candidate, root_seen, data)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(t, now, st[0], st[1], int(st[2]), int(st[3]), first.get(t)) for t in fresh for st in (state[t],)],
        )
        self.count += len(fresh)
        db.executemany(
            "UPDATE traces SET span_count = ?, decide_at = ?, has_candidate = ?, root_seen = ?"
            " WHERE trace_id = ?",
            [(st[0], st[1], int(st[2]), int(st[3]), t) for t, st in state.items() if not st[4]],
        )
        db.executemany("INSERT INTO chunks(trace_id, signal, data) VALUES (?, ?, ?)", rows_out)
        if self.count > self.max_traces:  # more new traces than the buffer holds: the oldest go
            evicted += self._evict(db, self.count - self.max_traces, set())
        return AppendResult(evicted_traces=evicted, dropped_spans=dropped)

    def _make_room(self, db: sqlite3.Connection, incoming: int, keep: set[bytes]) -> int:
        need = self.count + incoming - self.max_traces
        return self._evict(db, need, keep) if need > 0 else 0

    def _evict(self, db: sqlite3.Connection, n: int, keep: set[bytes]) -> int:
        """Drop ``n`` traces (decided ones first, then the oldest) not in ``keep``; returns
        how many of them were undecided (lost)."""
        rows = db.execute(
            "SELECT trace_id, decided FROM traces ORDER BY decided DESC, first_seen, rowid LIMIT ?",
            (n + len(keep),),
        ).fetchall()
        victims = [(t, d) for t, d in rows if t not in keep][:n]
        db.executemany("DELETE FROM chunks WHERE trace_id = ?", [(t,) for t, _ in victims])
        before = db.total_changes
        db.executemany("DELETE FROM traces WHERE trace_id = ?", [(t,) for t, _ in victims])
        self.count -= db.total_changes - before
        return sum(1 for _, decided in victims if not decided)

    def drop(self, db: sqlite3.Connection, trace_id: bytes) -> None:
        """Delete a trace and its chunks.

        Example:
            >>> BufferTables().drop.__name__
            'drop'
        """
        db.execute("DELETE FROM chunks WHERE trace_id = ?", (trace_id,))
        self.count -= db.execute("DELETE FROM traces WHERE trace_id = ?", (trace_id,)).rowcount

    def due(self, db: sqlite3.Connection, now: float, limit: int) -> tuple[list[bytes], int]:
        """Traces to decide now, and how many run-less traces expired (and were dropped).

        Example:
            >>> BufferTables().due.__name__
            'due'
        """
        oldest = now - self.max_age
        # Index range scans only (``decided IN`` selects traces_evict; ``+`` keeps decide_at's off).
        expired = db.execute(
            "SELECT trace_id, has_candidate FROM traces"
            " WHERE decided IN (0, 1) AND first_seen <= ? AND +decide_at IS NULL",
            (oldest,),
        ).fetchall()
        for trace_id, _ in expired:
            self.drop(db, trace_id)
        rows = db.execute(
            "SELECT trace_id, decide_at FROM traces WHERE decide_at <= ? ORDER BY decide_at LIMIT ?",
            (now, limit),
        ).fetchall()
        rows += db.execute(
            "SELECT trace_id, decide_at FROM traces"
            " WHERE decided IN (0, 1) AND first_seen <= ? AND +decide_at > ? ORDER BY decide_at LIMIT ?",
            (oldest, now, limit),
        ).fetchall()
        rows.sort(key=lambda r: r[1])
        return [r[0] for r in rows[:limit]], sum(1 for _, candidate in expired if not candidate)

    @staticmethod
    def load(db: sqlite3.Connection, trace_id: bytes) -> list[TraceChunk]:
        """A trace's chunks in arrival order.

        Example:
            >>> BufferTables.load.__name__
            'load'
        """
        head = db.execute("SELECT data FROM traces WHERE trace_id = ?", (trace_id,)).fetchone()
        rows = db.execute(
            "SELECT signal, data FROM chunks WHERE trace_id = ? ORDER BY id", (trace_id,)
        ).fetchall()
        if head is not None and head[0] is not None:
            rows.insert(0, ("spans", head[0]))
        return [TraceChunk(trace_id, signal, data, 0, False) for signal, data in rows]

    @staticmethod
    def finish(db: sqlite3.Connection, trace_id: bytes) -> None:
        """Mark a trace decided (kept as context).

        Example:
            >>> BufferTables.finish.__name__
            'finish'
        """
        db.execute("UPDATE traces SET decide_at = NULL, decided = 1 WHERE trace_id = ?", (trace_id,))
