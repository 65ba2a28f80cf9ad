"""`Park` on both job queues (SPEC §8): a parked job is handed back like a retry, but the take
is not an attempt (a parked job is never dead-lettered for it), it remembers when it was
first parked until it is settled otherwise, and `parked_jobs` counts it per reason from its
park until then."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from test_judge_ledger_contract import beside
from test_queue_contract import StoreFactory, job, record, take_until

from collector.common.judge_types import Park
from collector.common.types import Dead, Done, LeasedJob, Retry, RunRecord, ScoreJob
from collector.store.redis.job_json import job_json

BUDGET, BREAKER = "budget_exhausted", "judge_unavailable"
__all__ = ["beside"]  # the fixture, shared with the judge ledger's contract


async def park(store: Any, leased: LeasedJob, reason: str = BUDGET, delay_s: float = 0.0) -> float:
    """Park a job; returns the time just before (the earliest its ``parked_since`` may be)."""
    before = time.time()
    await store.settle(leased, Park(delay_s, reason))
    return before


class TestParkContract:
    async def test_a_parked_job_keeps_its_attempts_and_its_first_park_time(self, make_store: StoreFactory) -> None:
        store = await make_store(max_attempts=2)
        await store.put([job(1)])
        (leased,) = await take_until(store)
        assert (leased.attempt, leased.parked_since) == (1, None)
        first = await park(store, leased)
        after_first = time.time()
        for i in range(10):  # far more takes than max_attempts: none of them counts
            (leased,) = await take_until(store)
            assert leased.attempt == 1
            assert leased.parked_since is not None and first <= leased.parked_since <= after_first
            await park(store, leased, (BREAKER, BUDGET)[i % 2])
        assert await store.dead_letters() == []
        (leased,) = await take_until(store)
        await store.settle(leased, Retry(0.0, "a transient failure"))  # settled otherwise: no longer parked
        (leased,) = await take_until(store)
        assert (leased.attempt, leased.parked_since) == (2, None)  # the retry's take counted
        second = await park(store, leased)
        (leased,) = await take_until(store)
        assert leased.attempt == 2 and leased.parked_since is not None and leased.parked_since >= second
        await store.settle(leased, Done(record(job(1))))
        assert [i.record.key for i in await store.pending(10)] == [job(1).key]
        assert await store.parked_jobs() == {}

    async def test_a_parked_job_waits_for_its_delay(self, make_store: StoreFactory) -> None:
        store = await make_store()
        await store.put([job(1)])
        (leased,) = await take_until(store)
        await park(store, leased, delay_s=60.0)
        for _ in range(3):
            assert await store.take(10) == []
        stats = await store.stats()
        assert (stats.queued, stats.in_flight) == (1, 0)
        assert store.depth() == 1  # still waiting: part of the depth

    async def test_parked_jobs_are_counted_per_reason_until_settled_otherwise(self, make_store: StoreFactory) -> None:
        store = await make_store()
        assert await store.parked_jobs() == {}
        await store.put([job(n) for n in range(4)])
        taken = await take_until(store, 4)
        for leased, reason in zip(taken, [BUDGET, BUDGET, BREAKER, BUDGET], strict=True):
            await park(store, leased, reason)
        assert await store.parked_jobs() == {BUDGET: 3, BREAKER: 1}
        again = {leased.job.key: leased for leased in await take_until(store, 4)}
        assert await store.parked_jobs() == {BUDGET: 3, BREAKER: 1}  # taken again: parked until settled
        await park(store, again[job(0).key], BREAKER)  # counted under its last park's reason
        await store.settle(again[job(1).key], Done(None))
        await store.settle(again[job(2).key], Dead("JudgeUnavailable", "parked too long", None))
        await store.settle(again[job(3).key], Retry(0.0, "boom"))
        assert await store.parked_jobs() == {BREAKER: 1}

    async def test_a_lapsed_lease_of_a_parked_job_counts_and_keeps_it_parked(self, make_store: StoreFactory) -> None:
        store = await make_store(visibility_timeout_s=0.3, max_attempts=2)
        await store.put([job(1)])
        (leased,) = await take_until(store)
        before = await park(store, leased, BREAKER)
        (leased,) = await take_until(store)  # its worker "dies"
        (leased,) = await take_until(store)  # taken over once the lease lapsed
        assert leased.attempt == 2 and leased.parked_since is not None and leased.parked_since >= before
        assert await store.parked_jobs() == {BREAKER: 1}
        deadline = time.monotonic() + 30.0
        while await store.parked_jobs() and time.monotonic() < deadline:  # lapses again: over max_attempts
            assert await store.take(1) == []
            await asyncio.sleep(0.02)
        assert await store.parked_jobs() == {}
        assert [letter["key"] for letter in await store.dead_letters()] == [job(1).key]

    async def test_waking_a_reason_makes_its_parked_jobs_due_now(self, make_store: StoreFactory, beside: Any) -> None:
        store = await make_store()
        await store.put([job(n) for n in range(4)])
        reasons = {job(n).key: reason for n, reason in enumerate([BUDGET, BUDGET, BREAKER, BUDGET])}
        for leased in await take_until(store, 4):
            await park(store, leased, reasons[leased.job.key], delay_s=60.0)
        assert await store.take(10) == []  # waiting a minute
        assert await beside(store).wake_parked_jobs(BUDGET) == 3  # `tracescore judges budget`, beside the daemon
        woken = await take_until(store, 3, timeout=5.0)
        assert sorted(j.job.key for j in woken) == sorted(job(n).key for n in (0, 1, 3))
        assert all(j.attempt == 1 and j.parked_since is not None for j in woken)  # still parked, attempts kept
        assert await store.take(10) == []  # the breaker's job still waits
        assert await store.wake_parked_jobs(BUDGET) == 0  # taken: nothing waits for that reason
        assert await store.wake_parked_jobs(BREAKER) == 1
        (last,) = await take_until(store, 1, timeout=5.0)
        assert last.job.key == job(2).key

    @pytest.mark.parametrize("make_store", ["redis"], indirect=True)
    async def test_a_delayed_job_of_an_earlier_version_is_promoted_as_it_was(self, make_store: StoreFactory) -> None:
        store = await make_store()
        old = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")
        await store.client.zadd(store.keys.delayed, {old.key: 0})
        await store.client.hset(store.keys.delayed_data, old.key, "3|" + job_json(old))
        (leased,) = await store.take(1)
        assert (leased.job, leased.attempt, leased.parked_since) == (old, 4, None)
