"""The SQLite trace buffer's in-memory index: every buffered trace's timing, rows and bounds.

Pure bookkeeping, no I/O: `collector.store.sqlite.buffer` applies what it decides (rows
to delete, decisions to forget) to the file.
"""

from __future__ import annotations

import heapq
import itertools
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from collector.common.types import CANDIDATE, ROOT, AppendResult, SummaryEntry

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

    def add(self, entries: Sequence[SummaryEntry], now: float, rows: int | Sequence[int]) -> AppendResult:
        """Add (trace id, span count, flags) entries that arrived at ``now``, held by ``rows``
        (one row for all, or one per entry).

        Over ``max_traces``, decided traces are evicted first, then the newest undecided
        traces without a run span, then the newest with one (see `_victims`); spans over
        ``max_spans`` per trace are dropped, except those of a chunk carrying a run span.

        Example:
            >>> index = TraceIndex(max_traces=1)
            >>> index.add([(b"a" * 16, 1, CANDIDATE)], now=0.0, rows=1)
            AppendResult(evicted_traces=0, dropped_spans=0)
            >>> index.add([(b"b" * 16, 1, 0)], now=1.0, rows=[2]), list(index.traces), index.freed_rows
            (AppendResult(evicted_traces=1, dropped_spans=0), [b'aaaaaaaaaaaaaaaa'], [2])
        """
        traces = self.traces
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
            # Over the limit, children are dropped; a chunk carrying a run span is kept
            # (up to twice the limit: the run span is what the adapters need most).
            if total > max_spans and not (flags & CANDIDATE and total <= 2 * max_spans):
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
        lost = 0
        overflow = len(traces) - self.max_traces
        if overflow > 0:
            for victim in self._victims(overflow):
                lost += victim not in self.decided
                self._remove(victim)
        distinct = (rows,) if isinstance(rows, int) else set(rows)
        unheld = [row for row in distinct if row not in refs]
        if unheld:  # no trace kept them (dropped spans, or traces removed above: listed once)
            listed = set(self.freed_rows)
            self.freed_rows.extend(row for row in unheld if row not in listed)
        return AppendResult(evicted_traces=lost, dropped_spans=dropped)

    def _victims(self, n: int) -> list[bytes]:
        """The ``n`` traces to evict: decided ones (oldest decision first), then undecided
        traces without a run span, then those with one, newest first: a flood of new
        traces evicts its own, never runs that were accepted before it."""
        out = list(itertools.islice(self.decided, n))
        if len(out) < n:
            flags_of, traces = self._flags, self.traces
            runless = (t for t in reversed(traces) if not flags_of[traces[t]] & (CANDIDATE | _DECIDED))
            out += itertools.islice(runless, n - len(out))
        if len(out) < n:
            chosen = set(out)
            out += itertools.islice((t for t in reversed(traces) if t not in chosen), n - len(out))
        return out

    def trim(self) -> int:
        """Evict down to ``max_traces`` after a replay of the file (which runs unbounded):
        decided traces first, then the oldest, as a trace evicted before the restart whose
        request is still held by others comes back as the oldest; returns how many went.

        Example:
            >>> index = TraceIndex(max_traces=10)
            >>> index.add([(b"a" * 16, 1, CANDIDATE), (b"b" * 16, 1, CANDIDATE)], now=0.0, rows=1)
            AppendResult(evicted_traces=0, dropped_spans=0)
            >>> index.max_traces = 1
            >>> index.trim(), list(index.traces)
            (1, [b'bbbbbbbbbbbbbbbb'])
        """
        overflow = len(self.traces) - self.max_traces
        if overflow <= 0:
            return 0
        victims = list(itertools.islice(self.decided, overflow))
        chosen = set(victims)
        victims += itertools.islice((t for t in self.traces if t not in chosen), overflow - len(victims))
        for victim in victims:
            self._remove(victim)
        return len(victims)

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

    def next_due(self) -> float | None:
        """The earliest time a trace may be due (None: no decision pending). It may be early (a
        trace rescheduled since), never late.

        Example:
            >>> index = TraceIndex()
            >>> index.next_due() is None
            True
        """
        heap, traces, decide_at = self._heap, self.traces, self._decide_at
        while heap:
            when, _, trace_id = heap[0]
            held = traces.get(trace_id)
            if held is not None and decide_at[held] == when:
                return when
            heapq.heappop(heap)  # stale: rescheduled, decided or gone since
        return None

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
