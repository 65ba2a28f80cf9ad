"""One contract, two backends: the SQLite and Redis stores behave alike as JobQueue,
TraceBuffer and outbox (enqueue, lease, ack, reclaim, dead letters, idempotency, throughput)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from collector.common.types import (
    Dead,
    Done,
    LeasedJob,
    Retry,
    RunRecord,
    ScoreJob,
    ScoreRecord,
    TraceChunk,
)

StoreFactory = Callable[..., Awaitable[Any]]
T1, T2, T3 = b"\x01" * 16, b"\x02" * 16, b"\x03" * 16


def job(n: int = 0, scorer: str = "q", version: str | None = "1") -> ScoreJob:
    run = RunRecord(trace_id="ab" * 16, span_id=f"{n:016x}", span_name="invoke_agent")
    return ScoreJob(run, scorer, version)


def record(j: ScoreJob) -> ScoreRecord:
    return ScoreRecord(j.key, j.run.trace_id, j.run.span_id, "ef" * 8, j.scorer_id, j.scorer_id, score=1.0)


async def take_until(store: Any, want: int = 1, timeout: float = 30.0) -> list[LeasedJob]:  # noqa: ASYNC109
    """Take until ``want`` jobs came back (polling with a deadline, never sleeping blind)."""
    deadline = time.monotonic() + timeout
    got: list[LeasedJob] = []
    while len(got) < want:
        got += await store.take(want - len(got))
        if time.monotonic() > deadline:
            raise AssertionError(f"only {len(got)} of {want} jobs came back within {timeout}s")
        if len(got) < want:
            await asyncio.sleep(0.02)
    return got


class TestQueueContract:
    async def test_enqueue_is_idempotent_on_the_job_key(self, make_store: StoreFactory) -> None:
        store = await make_store()
        assert await store.put([job(1), job(1), job(2)]) == [True, False, True]
        assert await store.put([job(1)]) == [False]
        assert await store.put([job(1, version="2")]) == [True]  # another scorer version
        assert store.depth() == 3

    async def test_lease_then_ack_writes_the_outbox_and_forgets_the_job(self, make_store: StoreFactory) -> None:
        store = await make_store()
        j = job(1)
        await store.put([j])
        (leased,) = await store.take(10)
        assert leased.job == j and leased.attempt == 1
        assert await store.take(10) == []  # leased: nobody else gets it
        await store.settle(leased, Done(record(j)))
        items = await store.pending(10)
        assert [i.record.key for i in items] == [j.key]
        await store.release([i.item_id for i in items])
        assert await store.pending(10) == []
        assert await store.put([j]) == [False]  # completed keys are never queued again
        assert await store.take(10) == []
        stats = await store.stats()
        assert (stats.queued, stats.in_flight, stats.outbox) == (0, 0, 0)

    async def test_a_lapsed_lease_is_reclaimed_and_settled_once(self, make_store: StoreFactory) -> None:
        store = await make_store(visibility_timeout_s=0.3)
        j = job(1)
        await store.put([j])
        (first,) = await store.take(1)
        (second,) = await take_until(store)  # the first worker "died"
        assert second.job == j and second.attempt == 2
        await store.settle(first, Done(record(j)))  # the stale lease is ignored
        assert await store.pending(10) == []
        await store.settle(second, Done(record(j)))
        assert [i.record.key for i in await store.pending(10)] == [j.key]

    async def test_too_many_deliveries_dead_letter_the_job(self, make_store: StoreFactory) -> None:
        store = await make_store(visibility_timeout_s=0.1, max_attempts=2)
        j = job(1)
        await store.put([j])
        deadline = time.monotonic() + 30
        while not await store.dead_letters():
            await store.take(1)  # never settled
            assert time.monotonic() < deadline, "the job was never dead-lettered"
            await asyncio.sleep(0.02)
        (dead,) = await store.dead_letters()
        assert dead["key"] == j.key and dead["attempts"] == 3
        assert dead["error"] == {"type": "LeaseExpired", "message": "the job's lease ran out too many times"}
        assert await store.put([j]) == [False]
        assert (await store.stats()).dead == 1

    async def test_dead_settlement_keeps_the_error_and_exports_the_failure(self, make_store: StoreFactory) -> None:
        store = await make_store()
        j = job(1)
        await store.put([j])
        (leased,) = await store.take(1)
        await store.settle(leased, Dead("ScorerRunError", "boom", record(j), traceback="Traceback ...",
                                        partial_json='{"analyze_step_result": 1}'))
        (dead,) = await store.dead_letters()
        assert dead["error"] == {"type": "ScorerRunError", "message": "boom", "traceback": "Traceback ...",
                                 "partial": '{"analyze_step_result": 1}', "scorer_id": "q", "scorer_version": "1",
                                 "evaluation_span_id": record(j).score_span_id}
        assert dead["attempts"] == 1
        assert [i.record.key for i in await store.pending(10)] == [j.key]
        assert await store.put([j]) == [False]

    async def test_retry_hands_the_job_back_after_its_delay(self, make_store: StoreFactory) -> None:
        store = await make_store()
        j = job(1)
        await store.put([j])
        (leased,) = await store.take(1)
        await store.settle(leased, Retry(0.3, "rate limited"))
        assert await store.take(1) == []
        assert await store.put([j]) == [False]  # still queued
        (again,) = await take_until(store)
        assert again.job == j and again.attempt == 2

    async def test_prune_drops_old_dead_letters(self, make_store: StoreFactory) -> None:
        store = await make_store()
        await store.put([job(1)])
        (leased,) = await store.take(1)
        await store.settle(leased, Dead("ScorerRunError", "boom", None))
        assert await store.prune(3600.0) == 0
        assert await store.prune(1.0, now=time.time() + 10) >= 1
        assert await store.dead_letters() == []

    async def test_outbox_defer_postpones_and_counts_attempts(self, make_store: StoreFactory) -> None:
        store = await make_store()
        j = job(1)
        await store.put([j])
        (leased,) = await store.take(1)
        await store.settle(leased, Done(record(j)))
        (item,) = await store.pending(10)
        await store.defer([item.item_id], 1.0)  # the next call comes well within it, however busy the machine
        assert await store.pending(10) == []
        deadline = time.monotonic() + 30
        while not (items := await store.pending(10)):  # until the deferral ran out
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert items[0].attempts == 1 and items[0].record == record(j)

    async def test_throughput_order_of_magnitude(self, make_store: StoreFactory) -> None:
        store = await make_store()
        n = 2000
        jobs = [job(i) for i in range(n)]
        started = time.perf_counter()
        for i in range(0, n, 100):
            assert all(await store.put(jobs[i : i + 100]))
        done = 0
        while done < n:
            batch = await store.take(100)
            assert batch, "the queue ran dry early"
            await asyncio.gather(*(store.settle(b, Done(record(b.job))) for b in batch))
            done += len(batch)
        rate = n / (time.perf_counter() - started)
        print(f"{type(store).__name__}: {rate:.0f} jobs/s (put + take + settle)")
        # An order of magnitude: both stores do 2000-3000 jobs/s here on an idle machine; one
        # ten times slower (a round trip or a sync per job) fails, a busy machine's few times not.
        assert rate > 200, f"{rate:.0f} jobs/s"
        assert len(await store.pending(n + 1)) == n


class TestTraceBufferContract:
    async def test_decides_after_the_wait_and_finishes(self, make_store: StoreFactory) -> None:
        store = await make_store(decision_wait=5.0)
        now = 1000.0
        await store.append([TraceChunk(T1, "spans", b"a", 2, False)], now=now)
        await store.append([TraceChunk(T1, "spans", b"b", 1, True, has_root=True),
                            TraceChunk(T1, "logs", b"l", 0, False)], now=now + 1)
        assert (await store.due(10, now=now + 5.9))[0] == []
        assert (await store.due(10, now=now + 6.0))[0] == [T1]
        chunks = await store.load(T1)
        assert [(c.signal, c.data) for c in chunks] == [("spans", b"a"), ("spans", b"b"), ("logs", b"l")]
        await store.finish(T1)
        assert (await store.due(10, now=now + 7))[0] == []
        assert (await store.stats()).traces == 0

    async def test_the_next_decision_time_is_known_and_never_late(self, make_store: StoreFactory) -> None:
        """Assembly sleeps until the next decision is due (no polling tick added to every run)."""
        store = await make_store(decision_wait=5.0)
        assert await store.next_due() is None
        await store.append([TraceChunk(T1, "spans", b"a", 1, True, has_root=True)], now=1000.0)
        await store.append([TraceChunk(T2, "spans", b"b", 1, True, has_root=True)], now=1002.0)
        assert await store.next_due() == 1005.0
        assert (await store.due(10, now=1005.0))[0] == [T1]
        await store.finish(T1)
        assert await store.next_due() == 1007.0  # never later than T2's decision
        loaded = await store.load_many([T1, T2])
        assert [[c.data for c in chunks] for chunks in loaded] == [[b"a"], [b"b"]]
        await store.finish_many([T2])
        assert (await store.due(10, now=1010.0))[0] == []

    async def test_root_gates_the_decision_and_late_runs_are_decided_again(
        self, make_store: StoreFactory,
    ) -> None:
        store = await make_store(decision_wait=5.0, rootless_wait=30.0, max_trace_age=600)
        await store.append([TraceChunk(T1, "spans", b"llm", 1, True)], now=0.0)
        assert (await store.due(10, now=29.0))[0] == []
        await store.append([TraceChunk(T1, "spans", b"root", 1, False, has_root=True)], now=10.0)
        assert (await store.due(10, now=15.0))[0] == [T1]
        await store.finish(T1)
        await store.append([TraceChunk(T1, "spans", b"late", 1, True)], now=100.0)
        assert (await store.due(10, now=104.0))[0] == []
        assert (await store.due(10, now=105.0))[0] == [T1]
        assert [c.data for c in await store.load(T1)] == [b"llm", b"root", b"late"]
        await store.finish(T1)
        assert await store.due(10, now=700.0) == ([], 0)
        assert await store.load(T1) == []

    async def test_an_unreadable_trace_is_dead_lettered_alone(self, make_store: StoreFactory) -> None:
        store = await make_store(decision_wait=1.0)
        await store.append([TraceChunk(T1, "spans", b"1", 1, True, True), TraceChunk(T2, "spans", b"2", 1, True, True)],
                           now=1.0)
        await store.discard(T1, "row 1: short read")
        assert await store.load(T1) == [] and [c.data for c in await store.load(T2)] == [b"2"]
        assert (await store.due(10, now=5.0))[0] == [T2]
        (dead,) = await store.dead_letters()
        assert dead["key"] == f"trace/{T1.hex()}"
        assert dead["error"] == {"type": "UnreadableTrace", "message": "row 1: short read", "scorer_id": ""}

    async def test_bounds(self, make_store: StoreFactory) -> None:
        store = await make_store(max_traces=2, max_spans_per_trace=3, max_trace_age=60)
        await store.append([TraceChunk(T1, "spans", b"1", 1, False)], now=1.0)
        await store.append([TraceChunk(T2, "spans", b"2", 1, True)], now=2.0)
        # Full: the newest trace without a run span goes (a flood evicts its own traces).
        result = await store.append([TraceChunk(T3, "spans", b"3", 1, False)], now=3.0)
        assert result.evicted_traces == 1 and await store.load(T3) == []
        assert [c.data for c in await store.load(T1)] == [b"1"]
        result = await store.append([TraceChunk(T1, "spans", b"4", 5, False)], now=4.0)
        assert result.dropped_spans == 5
        # A run span over the limit is kept (up to twice the limit); children are not.
        result = await store.append([TraceChunk(T2, "spans", b"5", 3, True)], now=5.0)
        assert result.dropped_spans == 0
        assert [c.data for c in await store.load(T2)] == [b"2", b"5"]
        due, expired = await store.due(10, now=100.0)
        assert due == [T2] and expired == 1
