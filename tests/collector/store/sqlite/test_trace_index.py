"""The trace buffer's in-memory index alone: decision timing, due/finish, bounds, freed rows."""

from __future__ import annotations

from collector.common.types import AppendResult
from collector.store.split import CANDIDATE, ROOT
from collector.store.sqlite.buffer import TraceIndex

A, B, C, D, E = (bytes([n]) * 16 for n in range(1, 6))
BOTH = CANDIDATE | ROOT


def _first_due(index: TraceIndex, trace_id: bytes, start: float, stop: float, step: float = 0.5) -> float | None:
    """The first probe time in [start, stop] at which ``trace_id`` is due (probing never finishes it)."""
    t = start
    while t <= stop:
        if trace_id in index.due(now=t, limit=100)[0]:
            return t
        t += step
    return None


# ---------------------------------------------------------------------------- timing
def test_root_and_candidate_are_decided_decision_wait_after_arrival() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0)
    assert index.add([(A, 2, BOTH)], now=100.0, rows=1) == AppendResult(0, 0)
    assert index.due(now=104.9, limit=10) == ([], 0)
    assert index.due(now=105.0, limit=10) == ([A], 0)


def test_candidate_without_root_waits_rootless_wait() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0)
    index.add([(A, 1, CANDIDATE)], now=100.0, rows=1)
    assert index.due(now=129.9, limit=10)[0] == []
    assert index.due(now=130.0, limit=10)[0] == [A]


def test_rootless_wait_is_at_least_decision_wait() -> None:
    index = TraceIndex(decision_wait=20.0, rootless_wait=3.0)
    index.add([(A, 1, CANDIDATE)], now=100.0, rows=1)
    assert index.due(now=119.9, limit=10)[0] == []
    assert index.due(now=120.0, limit=10)[0] == [A]


def test_later_rootless_candidate_pushes_the_decision_back() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0)
    index.add([(A, 1, CANDIDATE)], now=100.0, rows=1)  # due at 130
    index.add([(A, 1, CANDIDATE)], now=110.0, rows=2)  # now+rootless = 140 > 130
    assert index.due(now=139.9, limit=10)[0] == []
    assert index.due(now=140.0, limit=10)[0] == [A]


def test_rootless_candidate_never_brings_the_decision_forward() -> None:
    # max(previous, now + rootless): a rootless candidate never moves a later decide_at earlier.
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0)
    index.add([(A, 1, CANDIDATE)], now=100.0, rows=1)  # due at 130
    index.add([(A, 1, CANDIDATE)], now=90.0, rows=2)  # clock went back: 120 < 130 is ignored
    assert index.due(now=129.9, limit=10)[0] == []
    assert index.due(now=130.0, limit=10)[0] == [A]


def test_root_arriving_later_reschedules_to_decision_wait_after_it() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0)
    index.add([(A, 3, CANDIDATE)], now=100.0, rows=1)  # rootless: 130
    index.add([(A, 1, ROOT)], now=102.0, rows=2)  # root: 107 (earlier than 130)
    assert index.due(now=106.9, limit=10)[0] == []
    assert index.due(now=107.0, limit=10)[0] == [A]


def test_root_arriving_after_rootless_deadline_moves_it_later() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=10.0)
    index.add([(A, 1, CANDIDATE)], now=100.0, rows=1)  # 110
    index.add([(A, 1, ROOT)], now=108.0, rows=2)  # 113
    assert index.due(now=112.0, limit=10)[0] == []
    assert index.due(now=113.0, limit=10)[0] == [A]


def test_root_first_then_candidate_uses_decision_wait() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0)
    index.add([(A, 1, ROOT)], now=100.0, rows=1)
    assert index.due(now=200.0, limit=10)[0] == []  # no candidate: never decided
    index.add([(A, 1, CANDIDATE)], now=201.0, rows=2)
    assert index.due(now=205.9, limit=10)[0] == []
    assert index.due(now=206.0, limit=10)[0] == [A]


def test_trace_without_candidate_is_never_due() -> None:
    index = TraceIndex(decision_wait=1.0, rootless_wait=1.0, max_age=1000.0)
    index.add([(A, 4, ROOT), (B, 1, 0)], now=0.0, rows=1)
    assert index.due(now=999.0, limit=10) == ([], 0)
    assert index.undecided == 2


# ------------------------------------------------------------------- due and finish
def test_due_returns_a_trace_on_every_call_until_finished() -> None:
    index = TraceIndex(decision_wait=1.0)
    index.add([(A, 1, BOTH)], now=0.0, rows=1)
    assert index.due(now=1.0, limit=10)[0] == [A]
    assert index.due(now=2.0, limit=10)[0] == [A]
    assert index.due(now=2.0, limit=10)[0] == [A]
    assert index.finish(A) == 1
    assert index.due(now=3.0, limit=10)[0] == []
    assert index.undecided == 0
    assert A in index.traces and list(index.decided) == [A]  # kept as context


def test_due_is_in_decide_at_order_and_at_most_limit() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0)
    index.add([(A, 1, CANDIDATE)], now=0.0, rows=1)  # 30
    index.add([(B, 1, BOTH)], now=1.0, rows=2)  # 6
    index.add([(C, 1, BOTH)], now=3.0, rows=3)  # 8
    index.add([(D, 1, BOTH)], now=2.0, rows=4)  # 7
    assert index.due(now=100.0, limit=10)[0] == [B, D, C, A]
    assert index.due(now=100.0, limit=2)[0] == [B, D]
    assert index.due(now=100.0, limit=3)[0] == [B, D, C]  # still due: nothing finished
    index.finish(B)
    assert index.due(now=100.0, limit=2)[0] == [D, C]
    assert index.due(now=7.5, limit=10)[0] == [D]  # only those whose time has come


def test_rescheduled_trace_is_returned_once() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=10.0)
    index.add([(A, 1, CANDIDATE)], now=0.0, rows=1)  # 10
    index.add([(A, 1, CANDIDATE)], now=1.0, rows=2)  # 11
    index.add([(A, 1, CANDIDATE)], now=2.0, rows=3)  # 12
    assert index.due(now=11.0, limit=10)[0] == []  # the stale schedules do not count
    assert index.due(now=12.0, limit=10)[0] == [A]


def test_late_candidate_after_finish_is_due_again() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0)
    index.add([(A, 2, BOTH)], now=0.0, rows=1)
    assert index.due(now=5.0, limit=10)[0] == [A]
    assert index.finish(A) == 1
    index.add([(A, 1, 0)], now=6.0, rows=2)  # late non-run spans: context, not a new decision
    assert index.due(now=50.0, limit=10)[0] == []
    index.add([(A, 1, CANDIDATE)], now=60.0, rows=3)  # a late run span: the root was seen
    assert index.due(now=64.9, limit=10)[0] == []
    assert index.due(now=65.0, limit=10)[0] == [A]
    assert index.rows_of(A) == [1, 2, 3]
    assert index.finish(A) == 3  # the last row the new decision covered
    assert index.due(now=70.0, limit=10)[0] == []


def test_finish_of_unknown_trace_is_none() -> None:
    index = TraceIndex()
    index.add([(A, 1, BOTH)], now=0.0, rows=1)
    assert index.finish(B) is None
    assert index.undecided == 1


# ---------------------------------------------------------------------------- bounds
def test_full_buffer_evicts_decided_traces_first_and_does_not_count_them() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=3)
    index.add([(A, 1, BOTH)], now=0.0, rows=1)
    index.add([(B, 1, BOTH)], now=1.0, rows=2)
    index.add([(C, 1, BOTH)], now=2.0, rows=3)
    index.finish(B)
    result = index.add([(D, 1, BOTH)], now=3.0, rows=4)
    assert result == AppendResult(evicted_traces=0, dropped_spans=0)  # a decided trace is no loss
    assert list(index.traces) == [A, C, D]
    assert index.freed_rows == [2]
    assert index.forgotten == [B]
    assert list(index.decided) == []


def test_decided_traces_are_evicted_in_decision_order() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=3)
    index.add([(A, 1, BOTH), (B, 1, BOTH), (C, 1, BOTH)], now=0.0, rows=[1, 2, 3])
    index.finish(C)
    index.finish(A)
    index.add([(D, 1, BOTH)], now=1.0, rows=4)
    assert index.forgotten == [C]
    index.add([(E, 1, BOTH)], now=2.0, rows=5)
    assert index.forgotten == [C, A]
    assert list(index.traces) == [B, D, E]


def test_full_buffer_without_decided_traces_evicts_the_newest_and_counts_it() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=2)
    index.add([(A, 1, BOTH)], now=0.0, rows=1)
    index.add([(B, 1, BOTH)], now=1.0, rows=2)
    result = index.add([(C, 1, BOTH)], now=2.0, rows=3)
    assert result.evicted_traces == 1  # runs accepted before are kept: the newcomer goes
    assert list(index.traces) == [A, B]
    assert index.freed_rows == [3]
    assert index.forgotten == []  # C was undecided: no decision to delete
    assert index.due(now=100.0, limit=10)[0] == [A, B]


def test_a_trace_flood_evicts_its_own_runless_traces_never_accepted_runs() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=3)
    index.add([(A, 1, BOTH)], now=0.0, rows=1)
    index.add([(B, 1, CANDIDATE)], now=1.0, rows=2)
    result = index.add([(C, 1, 0), (D, 1, 0), (E, 1, 0)], now=2.0, rows=3)
    assert result.evicted_traces == 2  # E and D, the newest traces without a run span
    assert list(index.traces) == [A, B, C]
    assert index.freed_rows == []  # C still holds the request
    assert index.due(now=100.0, limit=10)[0] == [A, B]


def test_runs_are_kept_over_older_traces_without_a_run_span() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=2)
    index.add([(A, 1, 0)], now=0.0, rows=1)  # the oldest, no run span
    index.add([(B, 1, BOTH)], now=1.0, rows=2)
    result = index.add([(C, 1, BOTH)], now=2.0, rows=3)
    assert result.evicted_traces == 1
    assert list(index.traces) == [B, C]
    assert index.freed_rows == [1]


def test_more_new_traces_than_max_traces_keeps_the_oldest() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=2)
    index.add([(E, 1, BOTH)], now=0.0, rows=1)
    result = index.add([(A, 1, BOTH), (B, 1, BOTH), (C, 1, BOTH), (D, 1, BOTH)], now=1.0, rows=[2, 3, 4, 5])
    assert result.evicted_traces == 3  # D, C and B of this very call
    assert list(index.traces) == [E, A]
    assert set(index.freed_rows) == {3, 4, 5}  # (each once: see test_freed_rows_lists_each_row_once)
    assert index.refs == {1: 1, 2: 1}
    assert index.undecided == 2
    assert index.due(now=10.0, limit=10)[0] == [E, A]


def test_more_new_traces_than_max_traces_in_one_shared_row_keeps_the_row() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=2)
    result = index.add([(A, 1, BOTH), (B, 1, BOTH), (C, 1, BOTH)], now=0.0, rows=7)
    assert result.evicted_traces == 1
    assert list(index.traces) == [A, B]
    assert index.freed_rows == []  # B and C still need the request
    assert index.refs == {7: 2}


def test_a_run_span_over_max_spans_is_kept_up_to_twice_the_limit() -> None:
    index = TraceIndex(decision_wait=1.0, max_spans=5)
    assert index.add([(A, 5, 0)], now=0.0, rows=1) == AppendResult(0, 0)  # the children filled it
    assert index.add([(A, 2, 0)], now=0.5, rows=2) == AppendResult(0, 2)  # more children: dropped
    assert index.add([(A, 1, CANDIDATE | ROOT)], now=1.0, rows=3) == AppendResult(0, 0)  # the run: kept
    assert index.rows_of(A) == [1, 3]
    assert index.due(now=2.0, limit=10)[0] == [A]
    assert index.add([(A, 5, CANDIDATE)], now=3.0, rows=4) == AppendResult(0, 5)  # past twice the limit


def test_spans_over_max_spans_are_dropped_and_the_row_not_held() -> None:
    index = TraceIndex(decision_wait=1.0, max_spans=5)
    assert index.add([(A, 4, CANDIDATE)], now=0.0, rows=1) == AppendResult(0, 0)
    assert index.add([(A, 3, ROOT)], now=1.0, rows=2) == AppendResult(0, 3)
    assert index.rows_of(A) == [1]
    assert index.freed_rows == [2]  # nobody else holds the row: it can go at once
    assert 2 not in index.refs
    assert index.add([(A, 1, 0)], now=2.0, rows=3) == AppendResult(0, 0)  # up to max_spans fits
    assert index.rows_of(A) == [1, 3]
    # The dropped root did not reschedule: still the rootless deadline of the candidate.
    assert index.due(now=29.9, limit=10)[0] == []
    assert index.due(now=30.0, limit=10)[0] == [A]


def test_dropped_spans_of_one_trace_leave_a_shared_row_to_the_others() -> None:
    index = TraceIndex(max_spans=2)
    result = index.add([(A, 3, ROOT), (B, 1, BOTH)], now=0.0, rows=1)
    assert result.dropped_spans == 3
    assert index.rows_of(A) == []
    assert index.rows_of(B) == [1]
    assert index.freed_rows == []
    assert index.refs == {1: 1}


# --------------------------------------------------------------------------- max_age
def test_runless_trace_expires_after_max_age_and_is_counted() -> None:
    index = TraceIndex(decision_wait=1.0, max_age=60.0)
    index.add([(A, 3, ROOT)], now=0.0, rows=1)
    index.add([(B, 1, 0)], now=10.0, rows=2)
    assert index.due(now=59.0, limit=10) == ([], 0)
    assert index.due(now=60.0, limit=10) == ([], 1)
    assert list(index.traces) == [B]
    assert index.freed_rows == [1]
    assert index.forgotten == []
    assert index.due(now=70.0, limit=10) == ([], 1)
    assert index.traces == {}


def test_decided_trace_past_max_age_leaves_silently() -> None:
    index = TraceIndex(decision_wait=1.0, max_age=60.0)
    index.add([(A, 2, BOTH)], now=0.0, rows=1)
    index.finish(A)
    assert index.due(now=60.0, limit=10) == ([], 0)  # not counted as run-less
    assert index.forgotten == [A]
    assert index.freed_rows == [1]
    assert A not in index.traces and list(index.decided) == []


def test_undecided_candidate_past_max_age_is_due_now() -> None:
    index = TraceIndex(decision_wait=5.0, rootless_wait=30.0, max_age=60.0)
    index.add([(A, 1, CANDIDATE)], now=0.0, rows=1)
    index.add([(A, 1, CANDIDATE)], now=50.0, rows=2)  # rootless: 80
    index.add([(B, 1, BOTH)], now=58.0, rows=3)  # 63
    assert index.due(now=59.0, limit=10)[0] == []
    assert index.due(now=60.0, limit=10) == ([A], 0)  # forced: 80 is past the age limit
    assert index.due(now=61.0, limit=10) == ([A], 0)  # until finished
    assert index.due(now=63.0, limit=10)[0] == [B, A]  # decide_at order (63 < 80)
    assert index.due(now=63.0, limit=1)[0] == [B]
    index.finish(A)
    assert index.due(now=63.0, limit=10)[0] == [B]


# ---------------------------------------------------------------- rows and freed rows
def test_rows_of_keeps_arrival_order_without_repeats() -> None:
    index = TraceIndex()
    index.add([(A, 1, 0), (B, 1, 0), (A, 2, CANDIDATE)], now=0.0, rows=4)  # A twice in one request
    index.add([(A, 1, 0)], now=1.0, rows=[5])
    index.add([(B, 1, 0), (A, 1, ROOT)], now=2.0, rows=[6, 7])
    index.add([(A, 1, 0)], now=3.0, rows=[8])
    assert index.rows_of(A) == [4, 5, 7, 8]
    assert index.rows_of(B) == [4, 6]
    assert index.rows_of(C) == []
    assert index.refs == {4: 2, 5: 1, 6: 1, 7: 1, 8: 1}


def test_a_shared_row_is_freed_only_when_its_last_holder_leaves() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=10, max_age=100.0)
    index.add([(A, 1, BOTH), (B, 1, BOTH), (C, 1, ROOT)], now=0.0, rows=1)
    index.add([(B, 1, 0)], now=50.0, rows=2)
    assert index.freed_rows == []
    index.finish(A)
    index.finish(B)
    assert index.freed_rows == []  # decided traces stay as context
    assert index.due(now=100.0, limit=10) == ([], 1)  # A and B (decided), C (run-less) leave
    assert sorted(index.forgotten) == sorted([A, B])
    assert sorted(index.freed_rows) == [1, 2]
    assert index.refs == {}


def test_freed_rows_as_holders_leave_one_by_one() -> None:
    index = TraceIndex(decision_wait=1.0, max_traces=2)
    index.add([(A, 1, BOTH), (B, 1, BOTH)], now=0.0, rows=1)
    index.add([(B, 1, 0)], now=1.0, rows=2)
    index.finish(A)
    index.add([(C, 1, BOTH)], now=2.0, rows=3)  # evicts A: row 1 still held by B
    assert index.forgotten == [A]
    assert index.freed_rows == []
    assert index.refs == {1: 1, 2: 1, 3: 1}
    index.add([(D, 1, BOTH)], now=3.0, rows=4)  # evicts D (the newest run): its row goes
    assert sorted(index.freed_rows) == [4]
    assert list(index.traces) == [B, C]


def test_freed_rows_lists_each_row_once() -> None:
    # Traces of this call evicted by overflow: their rows are freed once, not twice.
    index = TraceIndex(max_traces=1)
    index.add([(A, 1, BOTH), (B, 1, BOTH)], now=0.0, rows=[1, 2])
    assert list(index.traces) == [A]
    assert index.freed_rows == [2]


def test_index_counts_agree_after_churn() -> None:
    index = TraceIndex(decision_wait=1.0, rootless_wait=2.0, max_traces=5, max_age=20.0)
    row = 0
    for step in range(40):
        row += 1
        ids = [bytes([step % 7 + 1]) * 16, bytes([step % 11 + 20]) * 16]
        index.add([(ids[0], 1, CANDIDATE if step % 3 else BOTH), (ids[1], 1, 0)], now=float(step), rows=row)
        for trace_id in index.due(now=float(step), limit=3)[0]:
            index.finish(trace_id)
        assert len(index.traces) <= 5
    held = {}
    for trace_id in index.traces:
        for r in index.rows_of(trace_id):
            held[r] = held.get(r, 0) + 1
    assert held == index.refs
    freed = set(index.freed_rows)
    assert not freed & set(index.refs)  # no row both held and freed
    assert freed | set(index.refs) == set(range(1, row + 1))  # every row accounted for


def test_a_decided_trace_waiting_for_a_late_run_is_undecided_again() -> None:
    index = TraceIndex(max_traces=2, decision_wait=5.0)
    first, second, third = b"\x0a" * 16, b"\x0b" * 16, b"\x0c" * 16
    index.add([(first, 1, BOTH)], now=0.0, rows=1)
    index.finish(first)
    assert index.undecided == 0
    index.add([(first, 1, CANDIDATE)], now=10.0, rows=2)  # a late run span
    assert index.undecided == 1 and index.due(now=15.0, limit=10)[0] == [first]
    index.add([(second, 1, 0)], now=11.0, rows=3)
    # Full: the late run is not evicted as "decided" (silently), nor before traces with no run.
    assert index.add([(third, 1, 0)], now=12.0, rows=4).evicted_traces == 1
    assert list(index.traces) == [first, second] and index.forgotten == []
    assert sorted(index.freed_rows) == [4]
