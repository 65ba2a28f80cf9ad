"""The trace-buffer tables of the SQLite store (``traces``, ``chunks``): the SQL, run on the store's thread.

Decision timing: a trace with a run candidate is decided ``decision_wait`` after its
root span arrived (the root ends, and is exported, last), or after its latest candidate
when the root has not arrived, waiting at least ``rootless_wait`` then. A decided trace
stays as context (so late run spans are decided again with the whole trace) until
``max_trace_age`` or eviction; decided traces are evicted first and do not count as lost.

Layout: one ``traces`` row per trace, keyed by a sequential id, holding the trace's first
spans chunk (later chunks are ``chunks`` rows). The trace id -> row id map lives in
memory (one process owns the file; it is read back at start and after a failed commit):
an index on random trace ids would rewrite about one page per new trace at every commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.assembly_types import AppendResult, TraceChunk

_IN_BATCH = 500  # ids per IN (...) lookup, far below SQLite's limit on parameters


def insert_rows(db: sqlite3.Connection, head: str, width: int, rows: Sequence[Sequence[Any]]) -> None:
    """Insert rows with one multi-row ``VALUES`` statement per 500 rows.

    Not ``executemany``: that takes the GIL back for every row, and a thread waiting for
    the GIL behind the event loop makes each row cost a switch interval.

    Example:
        >>> db = sqlite3.connect(":memory:"); db.execute("CREATE TABLE t(a, b)")  # doctest: +ELLIPSIS
        <sqlite3.Cursor object at ...>
        >>> insert_rows(db, "INSERT INTO t(a, b) VALUES ", 2, [(1, "x"), (2, "y")])
        >>> db.execute("SELECT count(*) FROM t").fetchone()
        (2,)
    """
    one = "(" + ",".join("?" * width) + ")"
    for i in range(0, len(rows), _IN_BATCH):
        part = rows[i:i + _IN_BATCH]
        db.execute(head + ",".join([one] * len(part)), [value for row in part for value in row])


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
    # Touched only on the store's thread: trace id -> row id of every stored trace.
    rows: dict[bytes, int] = field(default_factory=dict)
    next_id: int = 1
    stale: bool = True  # rows must be read from the file before use

    @property
    def count(self) -> int:
        """Traces stored (undecided and decided).

        Example:
            >>> BufferTables().count
            0
        """
        return len(self.rows)

    def invalidate(self) -> None:
        """Forget the in-memory map (after a rolled-back commit); the next call reads it back.

        Example:
            >>> BufferTables().invalidate()
        """
        self.stale = True

    def reload(self, db: sqlite3.Connection) -> int:
        """Read the trace id map back from the file; returns how many traces are stored.

        Example:
            >>> from collector._sqlite import SCHEMA
            >>> db = sqlite3.connect(":memory:"); db.executescript(SCHEMA)  # doctest: +ELLIPSIS
            <sqlite3.Cursor object at ...>
            >>> BufferTables().reload(db)
            0
        """
        self.stale = True
        self._fresh(db)
        return len(self.rows)

    def _fresh(self, db: sqlite3.Connection) -> None:
        if self.stale:
            self.rows = {t: i for i, t in db.execute("SELECT id, trace_id FROM traces")}
            self.next_id = db.execute("SELECT coalesce(max(id), 0) + 1 FROM traces").fetchone()[0]
            self.stale = False

    def append(self, db: sqlite3.Connection, chunks: Sequence[TraceChunk], now: float) -> AppendResult:
        """Store chunks, evicting the oldest traces and dropping spans over the bounds.

        One read of the touched traces, then one ``executemany`` per table: the cost is
        per row, not per statement. Traces evicted to make room are never among those
        this call appends to (decided traces go first, then the oldest).

        Example:
            >>> BufferTables().append.__name__
            'append'
        """
        self._fresh(db)
        rows = self.rows
        ids = list(dict.fromkeys(c.trace_id for c in chunks))
        # [row id, span_count, decide_at, has_candidate, root_seen, new, no chunk stored yet]
        state: dict[bytes, list[Any]] = {}
        known = [rows[t] for t in ids if t in rows]
        for i in range(0, len(known), _IN_BATCH):
            part = known[i:i + _IN_BATCH]
            for row in db.execute(
                "SELECT id, trace_id, span_count, decide_at, has_candidate, root_seen FROM traces"
                f" WHERE id IN ({','.join('?' * len(part))})", part,
            ):
                state[row[1]] = [row[0], *row[2:], False, False]
        fresh = [t for t in ids if t not in state]
        need = len(rows) + len(fresh) - self.max_traces
        victims = self._victims(db, need, set(ids)) if need > 0 else []
        next_id = self.next_id
        for trace_id in fresh:
            state[trace_id] = [next_id, 0, None, 0, 0, True, True]
            next_id += 1
        rootless = max(self.decision_wait, self.rootless_wait)
        dropped = 0
        later = []
        first: dict[bytes, bytes] = {}  # a new trace's first spans chunk lives in its traces row
        for chunk in chunks:
            st = state[chunk.trace_id]
            span_count, decide_at, has_candidate, root_seen = st[1], st[2], st[3], st[4]
            if span_count + chunk.span_count > self.max_spans:
                dropped += chunk.span_count
                continue
            if st[6] and st[5] and chunk.signal == "spans":
                first[chunk.trace_id] = chunk.data
            else:
                later.append((chunk.trace_id, chunk.signal, chunk.data))
            st[6] = False
            has_candidate = has_candidate or chunk.has_run_candidate
            root_seen = root_seen or chunk.has_root
            if chunk.has_root and has_candidate:
                decide_at = now + self.decision_wait
            elif chunk.has_run_candidate:
                wait = self.decision_wait if root_seen else rootless
                decide_at = max(decide_at or 0.0, now + wait)
            st[1], st[2], st[3], st[4] = span_count + chunk.span_count, decide_at, has_candidate, root_seen
        self._delete(db, victims)
        insert_rows(
            db, "INSERT INTO traces(id, trace_id, first_seen, span_count, decide_at, has_candidate,"
            " root_seen, data) VALUES ", 8,
            [(st[0], t, now, st[1], st[2], int(st[3]), int(st[4]), first.get(t))
             for t in fresh for st in (state[t],)],
        )
        db.executemany(
            "UPDATE traces SET span_count = ?, decide_at = ?, has_candidate = ?, root_seen = ?"
            " WHERE id = ?",
            [(st[1], st[2], int(st[3]), int(st[4]), st[0]) for st in state.values() if not st[5]],
        )
        insert_rows(db, "INSERT INTO chunks(trace_id, signal, data) VALUES ", 3, later)
        overflow: list[tuple[int, bytes, int]] = []
        if len(rows) - len(victims) + len(fresh) > self.max_traces:
            # More new traces than the buffer holds: the oldest of them go too.
            overflow = [(state[t][0], t, 0) for t in fresh[:len(rows) - len(victims) + len(fresh) - self.max_traces]]
            self._delete(db, overflow)
        # Every statement succeeded: the map follows the file.
        for _, trace_id, _ in victims:
            rows.pop(trace_id, None)
        for trace_id in fresh:
            rows[trace_id] = state[trace_id][0]
        for _, trace_id, _ in overflow:
            rows.pop(trace_id, None)
        self.next_id = next_id
        lost = sum(1 for _, _, decided in victims if not decided) + len(overflow)
        return AppendResult(evicted_traces=lost, dropped_spans=dropped)

    def _victims(self, db: sqlite3.Connection, n: int, keep: set[bytes]) -> list[tuple[int, bytes, int]]:
        """``n`` traces to evict (decided ones first, then the oldest), none of ``keep``."""
        rows = db.execute(
            "SELECT id, trace_id, decided FROM traces ORDER BY decided DESC, first_seen, id LIMIT ?",
            (n + len(keep),),
        ).fetchall()
        return [r for r in rows if r[1] not in keep][:n]

    @staticmethod
    def _delete(db: sqlite3.Connection, victims: Sequence[tuple[int, bytes, int]]) -> None:
        for i in range(0, len(victims), _IN_BATCH):
            part = victims[i:i + _IN_BATCH]
            marks = ",".join("?" * len(part))
            db.execute(f"DELETE FROM chunks WHERE trace_id IN ({marks})", [t for _, t, _ in part])
            db.execute(f"DELETE FROM traces WHERE id IN ({marks})", [i for i, _, _ in part])

    def drop(self, db: sqlite3.Connection, trace_id: bytes) -> None:
        """Delete a trace and its chunks.

        Example:
            >>> BufferTables().drop.__name__
            'drop'
        """
        self._fresh(db)
        row_id = self.rows.get(trace_id)
        if row_id is not None:
            self._delete(db, [(row_id, trace_id, 0)])
            del self.rows[trace_id]

    def due(self, db: sqlite3.Connection, now: float, limit: int) -> tuple[list[bytes], int]:
        """Traces to decide now, and how many run-less traces expired (and were dropped).

        Example:
            >>> BufferTables().due.__name__
            'due'
        """
        self._fresh(db)
        oldest = now - self.max_age
        # Index range scans only (``decided IN`` selects traces_evict; ``+`` keeps decide_at's off).
        expired = db.execute(
            "SELECT id, trace_id, has_candidate FROM traces"
            " WHERE decided IN (0, 1) AND first_seen <= ? AND +decide_at IS NULL",
            (oldest,),
        ).fetchall()
        self._delete(db, expired)
        for _, trace_id, _ in expired:
            self.rows.pop(trace_id, None)
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
        return [r[0] for r in rows[:limit]], sum(1 for _, _, candidate in expired if not candidate)

    def load(self, db: sqlite3.Connection, trace_id: bytes) -> list[TraceChunk]:
        """A trace's chunks in arrival order.

        Example:
            >>> BufferTables().load.__name__
            'load'
        """
        self._fresh(db)
        row_id = self.rows.get(trace_id)
        if row_id is None:
            return []
        head = db.execute("SELECT data FROM traces WHERE id = ?", (row_id,)).fetchone()
        rows = db.execute(
            "SELECT signal, data FROM chunks WHERE trace_id = ? ORDER BY id", (trace_id,)
        ).fetchall()
        if head is not None and head[0] is not None:
            rows.insert(0, ("spans", head[0]))
        return [TraceChunk(trace_id, signal, data, 0, False) for signal, data in rows]

    def finish(self, db: sqlite3.Connection, trace_id: bytes) -> None:
        """Mark a trace decided (kept as context).

        Example:
            >>> BufferTables().finish.__name__
            'finish'
        """
        self._fresh(db)
        row_id = self.rows.get(trace_id)
        if row_id is not None:
            db.execute("UPDATE traces SET decide_at = NULL, decided = 1 WHERE id = ?", (row_id,))
