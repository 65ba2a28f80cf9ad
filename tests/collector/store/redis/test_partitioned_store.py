"""The partitioned Redis store (``queue.partitions``) beyond the store contract, which it passes
too (`tests/contract/conftest.py`): where each thing lands, taking from every partition at
once, jobs a stopping store had read, the per-partition share of ``max_open``, and the
recorded partition count, on the real Redis."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from redis.crc import key_slot
from shared_redis import REDIS_URL

from collector.common.errors import ConfigError
from collector.common.session_types import SessionTurn
from collector.common.types import Done, RunRecord, ScoreJob, TraceChunk
from collector.store.interface import SessionRules
from collector.store.redis.conn import connect
from collector.store.redis.keys import GROUP, RedisKeys
from collector.store.redis.partitioned import PartitionedRedisStore, open_redis_store
from collector.store.redis.partitions import PartitionMap, partition_prefix
from collector.store.redis.store import RedisStore

Opener = Callable[..., Any]


@pytest.fixture
async def open_store() -> AsyncIterator[Opener]:
    """``await open_store(partitions, **options)``: a started store on a prefix of this test
    (every store opened shares it); all its keys are deleted at the end."""
    prefix = f"test-parts-{uuid.uuid4().hex[:12]}:"
    opened: list[Any] = []

    async def opener(partitions: int, **options: Any) -> Any:
        store = open_redis_store(REDIS_URL, partitions=partitions, key_prefix=prefix, **options)
        await store.client.ping()  # fail loudly when Redis is missing
        opened.append(store)
        await store.start()
        return store

    yield opener
    cleaner = open_redis_store(REDIS_URL, partitions=3, key_prefix=prefix)
    await cleaner.delete_all()
    await cleaner.shutdown()
    for store in opened:
        await store.shutdown()


def job_in(partition: int, count: int = 3, skip: int = 0) -> ScoreJob:
    """A job whose key falls in ``partition`` of ``count`` (the ``skip``-th such job)."""
    parts = PartitionMap(count)
    found = (ScoreJob(RunRecord(trace_id=f"{n:032x}", span_id="cd" * 8), "q", "1") for n in range(10_000))
    return [job for job in found if parts.of_key(job.key) == partition][skip]


def test_partitions_fall_in_equal_slot_ranges_under_the_deployments_tag() -> None:
    for count in (2, 3, 6, 64):
        prefixes = [partition_prefix("tracescore:", i, count) for i in range(count)]
        assert [key_slot(p.encode()) * count // 16384 for p in prefixes] == list(range(count))
        assert all(p.startswith("{tracescore|p") and p.endswith("}:") for p in prefixes)
    assert partition_prefix("{team}:prod:", 0, 3).endswith("}:prod:")  # what follows the tag is kept
    assert partition_prefix("{team}:prod:", 0, 3) == partition_prefix("team:", 0, 3).replace(":", ":prod:")


def test_ids_that_leave_a_partition_name_it() -> None:
    parts = PartitionMap(3)
    assert [parts.split_item(parts.item_id(p, local)) for p, local in [(0, 1), (2, 1), (1, 99)]] == [
        (0, 1), (2, 1), (1, 99)]
    assert parts.split_letter(parts.letter_id(2, "1733-0")) == (2, "1733-0")
    assert [parts.split_letter(bad) for bad in ("1733-0", "3:1733-0", "x:1-0")] == [None, None, None]


async def test_each_thing_lands_in_its_partition(open_store: Opener) -> None:
    store = await open_store(3, block_ms=0)
    trace = uuid.uuid4().bytes
    job = job_in(2)
    await store.append([TraceChunk(trace, "spans", b"run", 1, True, True)], now=time.time())
    await store.put([job])
    where = PartitionMap(3).of_trace(trace)
    assert [await store.client.exists(p.keys.chunks(trace.hex())) for p in store.partitions] == [
        int(i == where) for i in range(3)]
    assert [await store.client.exists(p.keys.idem(job.key)) for p in store.partitions] == [0, 0, 1]
    assert await store.client.xlen(RedisKeys(store.keys.configured).jobs) == 0  # nothing queued on its own keys


async def test_a_waiting_take_returns_as_soon_as_any_partition_has_a_job(open_store: Opener) -> None:
    store = await open_store(3, block_ms=5000)  # a read waits up to 5 s on each partition's stream
    for partition in (1, 0, 2):
        started = time.monotonic()
        waiting = asyncio.create_task(store.take(4))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await store.put([job_in(partition)])
        async with asyncio.timeout(10):
            (leased,) = await waiting
        assert leased.job == job_in(partition)
        assert time.monotonic() - started < 4.0, "the take waited out another partition's read"
        await store.settle(leased, Done(None))


async def test_jobs_read_by_a_stopping_store_are_handed_back_at_once(open_store: Opener) -> None:
    store = await open_store(3, block_ms=5000, visibility_timeout_s=300.0)
    first, second = job_in(0), job_in(1)
    await store.put([first])
    (leased,) = await store.take(4)  # reads wait on partitions 1 and 2 now
    waiting = asyncio.create_task(store.take(4))
    await asyncio.sleep(0.2)
    waiting.cancel()  # the worker stops: its reads stay in flight
    await store.put([second])
    client = connect(REDIS_URL)
    pending_key = store.partitions[1].keys.jobs
    deadline = time.monotonic() + 10
    while (await client.xpending(pending_key, GROUP))["pending"] == 0:  # a read leased it
        assert time.monotonic() < deadline, "the waiting read never leased the second job"
        await asyncio.sleep(0.02)
    await store.settle(leased, Done(None))
    await store.shutdown()
    other = await open_store(3, block_ms=0)
    taken = await other.take(4)  # at once, not after the 300 s lease
    assert [t.job for t in taken] == [second]
    await client.aclose()


async def test_jobs_a_finished_read_holds_keep_their_leases_until_handed_out(open_store: Opener) -> None:
    store = await open_store(3, block_ms=5000, visibility_timeout_s=1.0)
    await store.put([job_in(0)])
    (running,) = await store.take(4)  # reads wait on partitions 1 and 2 now
    await store.put([job_in(1)])  # partition 1's read leases it; no take hands it out yet
    client = connect(REDIS_URL)
    try:
        deadline = time.monotonic() + 10
        while (await client.xpending(store.partitions[1].keys.jobs, GROUP))["pending"] == 0:
            assert time.monotonic() < deadline, "the waiting read never leased the job"
            await asyncio.sleep(0.02)
    finally:
        await client.aclose()
    other = await open_store(3, block_ms=0, visibility_timeout_s=1.0)
    for _ in range(8):  # 2.4 s: the lease (1 s) would have run out twice without renewals
        assert await store.renew([running]) == 1  # the worker's heartbeat (only its running job)
        assert await other.take(4) == []  # nothing to take over
        await asyncio.sleep(0.3)
    (held,) = await store.take(4)
    assert held.job == job_in(1) and held.attempt == 1


async def test_max_open_is_shared_out_among_the_partitions(open_store: Opener) -> None:
    store = await open_store(3, block_ms=0, session_rules=SessionRules(idle_s=60, max_open=3))
    parts = PartitionMap(3)
    scopes = [f"bot/s{n}" for n in range(200)]
    same = [s for s in scopes if parts.of_key(s) == 0][:2]
    spread = [next(s for s in scopes if parts.of_key(s) == p and s not in same) for p in (1, 2)]

    def turn(scope: str, n: int) -> SessionTurn:
        run = RunRecord(trace_id=f"{n:032x}", span_id=f"{n:016x}", service="bot", session_id=scope[4:])
        return SessionTurn(scope, scope[4:], run, False)

    for n, scope in enumerate([same[0], *spread]):  # one per partition: each within its share of 1
        await store.note_turns([turn(scope, n)], 1000.0 + n)
    assert (await store.session_counts())["forced_total"] == 0
    await store.note_turns([turn(same[1], 9)], 1010.0)  # a second one in partition 0: its oldest is forced
    counts = await store.session_counts()
    assert (counts["forced_total"], counts["open"]) == (1, 4)
    (forced,) = await store.take_due_sessions(1010.0, 10, 60.0)
    assert (forced.scope, forced.reason) == (same[0], "forced")


async def test_a_changed_partition_count_is_refused_while_work_is_queued(open_store: Opener) -> None:
    three = await open_store(3, block_ms=0)
    await three.put([job_in(1)])
    assert await three.client.get(three.keys.partitions) == b"3"
    with pytest.raises(ConfigError, match=r"queue.partitions: 1, .* holds 1 jobs in 3 partitions"):
        await open_store(1, block_ms=0)
    with pytest.raises(ConfigError, match=r"queue.partitions: 2, .* holds 1 jobs in 3 partitions"):
        await open_store(2, block_ms=0)
    (leased,) = await three.take(4)
    await three.settle(leased, Done(None))
    one = await open_store(1, block_ms=0)  # drained: the change is allowed, and recorded
    assert isinstance(one, RedisStore) and not isinstance(one, PartitionedRedisStore)
    assert await one.client.get(one.keys.partitions) is None
    await one.put([job_in(0)])
    with pytest.raises(ConfigError, match=r"queue.partitions: 3, .* holds 1 jobs in 1 partition:"):
        await open_store(3, block_ms=0)
