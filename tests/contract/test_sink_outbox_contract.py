"""One contract, two backends: each native sink's outbox in the SQLite file and in Redis.

A record settled with its job reaches every configured sink's outbox in the same
transaction as the OTLP outbox, leaves only when released, and remembers when its backend
first did not know the span."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from collector.common.types import Dead, Done, RunRecord, ScoreJob, ScoreRecord

StoreFactory = Callable[..., Awaitable[Any]]
SINKS = ("phoenix", "mlflow", "langfuse")


def job(n: int) -> ScoreJob:
    return ScoreJob(RunRecord(trace_id="ab" * 16, span_id=f"{n:016x}"), "q", "1")


def record(j: ScoreJob) -> ScoreRecord:
    return ScoreRecord(j.key, j.run.trace_id, j.run.span_id, "ef" * 8, "q", "Q", "1", score=0.25)


async def settle(store: Any, jobs: list[ScoreJob], dead: bool = False) -> None:
    await store.put(jobs)
    deadline = time.monotonic() + 30
    taken: list[Any] = []
    while len(taken) < len(jobs):
        taken += await store.take(len(jobs) - len(taken))
        assert time.monotonic() < deadline, "jobs did not come back"
    for leased in taken:
        outcome = Dead("E", "boom", record(leased.job)) if dead else Done(record(leased.job))
        await store.settle(leased, outcome)


class TestSinkOutboxContract:
    async def test_a_settled_record_waits_in_every_configured_sink(self, make_store: StoreFactory) -> None:
        store = await make_store(sinks=SINKS)
        await settle(store, [job(1), job(2)])
        await settle(store, [job(3)], dead=True)  # a failure span goes to the sinks too
        for sink in SINKS:
            outbox = store.sink_outbox(sink)
            items = await outbox.pending(10)
            assert sorted(i.record.span_id for i in items) == [f"{n:016x}" for n in (1, 2, 3)]
            assert {i.record.scorer_name for i in items} == {"Q"} and all(i.waiting_since is None for i in items)
            assert await outbox.backlog() == 3
        assert (await store.stats()).outbox == 3

    async def test_release_is_per_sink(self, make_store: StoreFactory) -> None:
        store = await make_store(sinks=SINKS)
        await settle(store, [job(1)])
        phoenix, mlflow = store.sink_outbox("phoenix"), store.sink_outbox("mlflow")
        (item,) = await phoenix.pending(10)
        await phoenix.release([item.item_id])
        assert await phoenix.backlog() == 0 and await phoenix.pending(10) == []
        assert await mlflow.backlog() == 1
        (still,) = await mlflow.pending(10)
        assert still.record.key == item.record.key

    async def test_defer_postpones_counts_and_remembers_the_first_missing_span(
        self, make_store: StoreFactory,
    ) -> None:
        store = await make_store(sinks=["phoenix"])
        await settle(store, [job(1)])
        outbox = store.sink_outbox("phoenix")
        (item,) = await outbox.pending(10)
        before = time.time()
        await outbox.defer([item.item_id], 1.0, span_missing=True)  # the next call comes well within it
        assert await outbox.pending(10) == []
        deadline = time.monotonic() + 30
        while not (back := await outbox.pending(10)):  # until the deferral ran out
            assert time.monotonic() < deadline, "the deferred record never came back"
            await asyncio.sleep(0.02)
        (again,) = back
        assert again.attempts == 1 and again.waiting_since is not None and again.waiting_since >= before - 1
        first = again.waiting_since
        await outbox.defer([item.item_id], 0.0, span_missing=True)
        await outbox.defer([item.item_id], 0.0)  # a later outage keeps the first missing time
        (third,) = await outbox.pending(10)
        assert third.attempts == 3 and third.waiting_since == first

    async def test_no_sinks_configured_writes_no_sink_rows(self, make_store: StoreFactory) -> None:
        store = await make_store()
        await settle(store, [job(1)])
        assert await store.sink_outbox("phoenix").backlog() == 0

    async def test_a_sinks_backlog_counts_in_the_depth_receivers_refuse_at(self, make_store: StoreFactory) -> None:
        store = await make_store(sinks=["phoenix", "mlflow"])
        await settle(store, [job(1), job(2)])
        outbox = store.sink_outbox("phoenix")
        await store.release([i.item_id for i in await store.pending(10)])  # the OTLP export went out

        async def depth() -> int:
            if hasattr(store, "refresh"):
                await store.refresh()  # Redis: depth is refreshed from the server
            return int(store.depth())

        assert await depth() == 4  # two scores waiting for each of two sinks
        await outbox.release([i.item_id for i in await outbox.pending(10)])
        assert await depth() == 2
