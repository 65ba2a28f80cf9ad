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

from collector.assembly_types import AppendResult, TraceChunk


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

        Example:
            >>> BufferTables().append.__name__
            'append'
        """
        evicted = dropped = 0
        rootless = max(self.decision_wait, self.rootless_wait)
        for chunk in chunks:
            row = db.execute(
                "SELECT span_count, decide_at, has_candidate, root_seen FROM traces WHERE trace_id = ?",
                (chunk.trace_id,),
            ).fetchone()
            if row is None:
                while self.count >= self.max_traces:
                    old = db.execute(
                        "SELECT trace_id, decided FROM traces ORDER BY decided DESC, first_seen LIMIT 1"
                    ).fetchone()
                    if old is None:
                        break
                    self.drop(db, old[0])
                    evicted += 0 if old[1] else 1  # a decided trace is only retained context
                db.execute(
                    "INSERT INTO traces(trace_id, first_seen, span_count) VALUES (?, ?, 0)",
                    (chunk.trace_id, now),
                )
                self.count += 1
                row = (0, None, 0, 0)
            span_count, decide_at, has_candidate, root_seen = row
            if span_count + chunk.span_count > self.max_spans:
                dropped += chunk.span_count
                continue
            db.execute(
                "INSERT INTO chunks(trace_id, signal, data) VALUES (?, ?, ?)",
                (chunk.trace_id, chunk.signal, chunk.data),
            )
            has_candidate = has_candidate or chunk.has_run_candidate
            root_seen = root_seen or chunk.has_root
            if chunk.has_root and has_candidate:
                decide_at = now + self.decision_wait
            elif chunk.has_run_candidate:
                wait = self.decision_wait if root_seen else rootless
                decide_at = max(decide_at or 0.0, now + wait)
            db.execute(
                "UPDATE traces SET span_count = span_count + ?, decide_at = ?, has_candidate = ?,"
                " root_seen = ? WHERE trace_id = ?",
                (chunk.span_count, decide_at, int(has_candidate), int(root_seen), chunk.trace_id),
            )
        return AppendResult(evicted_traces=evicted, dropped_spans=dropped)

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
        expired = db.execute(
            "SELECT trace_id, has_candidate FROM traces WHERE decide_at IS NULL AND first_seen <= ?",
            (now - self.max_age,),
        ).fetchall()
        for trace_id, _ in expired:
            self.drop(db, trace_id)
        rows = db.execute(
            "SELECT trace_id FROM traces WHERE decide_at <= ? OR"
            " (decide_at IS NOT NULL AND first_seen <= ?) ORDER BY decide_at LIMIT ?",
            (now, now - self.max_age, limit),
        ).fetchall()
        return [r[0] for r in rows], sum(1 for _, candidate in expired if not candidate)

    @staticmethod
    def load(db: sqlite3.Connection, trace_id: bytes) -> list[TraceChunk]:
        """A trace's chunks in arrival order.

        Example:
            >>> BufferTables.load.__name__
            'load'
        """
        rows = db.execute(
            "SELECT signal, data FROM chunks WHERE trace_id = ? ORDER BY id", (trace_id,)
        ).fetchall()
        return [TraceChunk(trace_id, signal, data, 0, False) for signal, data in rows]

    @staticmethod
    def finish(db: sqlite3.Connection, trace_id: bytes) -> None:
        """Mark a trace decided (kept as context).

        Example:
            >>> BufferTables.finish.__name__
            'finish'
        """
        db.execute("UPDATE traces SET decide_at = NULL, decided = 1 WHERE trace_id = ?", (trace_id,))
