"""The Redis forward log against the real Redis: one forwarder at a time (a lease), order,
hand-over when the forwarder dies, a bounded backlog, and the buffer written after it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from shared_redis import REDIS_URL

from collector.common.errors import QueueFull
from collector.common.types import TraceChunk
from collector.store.redis.forward import RedisForwardLog
from collector.store.redis.store import RedisStore

T1 = b"\x01" * 16


@pytest.fixture
async def store() -> AsyncIterator[RedisStore]:
    prefix = f"test-forward-{uuid.uuid4().hex[:12]}:"
    opened = RedisStore(REDIS_URL, key_prefix=prefix, block_ms=0, forward=True, max_forward_bytes=1000,
                        retry_after_s=2.0)
    await opened.client.ping()  # fail loudly when Redis is missing
    await opened.start()
    yield opened
    await opened.delete_all()
    await opened.shutdown()


async def test_requests_come_back_in_order_and_leave_once_released(store: RedisStore) -> None:
    for n in range(5):
        await store.append([], forward=("traces", f"request {n}".encode()))
    items = await store.forward_log.forward_pending(1 << 20, 3)
    assert [(i.position, i.body) for i in items] == [(1, b"request 0"), (2, b"request 1"), (3, b"request 2")]
    await store.forward_log.forward_release(2)
    state = await store.forward_log.forward_state()
    assert (state.head, state.sent, state.requests, state.bytes) == (5, 2, 3, 27)
    assert [i.position for i in await store.forward_log.forward_pending(1 << 20, 10)] == [3, 4, 5]
    stats = await store.stats()
    assert (stats.forward_requests, stats.forward_bytes) == (3, 27)


async def test_one_forwarder_at_a_time_and_a_dead_ones_requests_are_sent_again(store: RedisStore) -> None:
    await store.append([], forward=("traces", b"one"))
    # A 2 s lease: the next call, however slow the machine, comes while it is held.
    first, other = (RedisForwardLog(store.client, store.keys, lease_s=2.0) for _ in range(2))
    assert [i.body for i in await first.forward_pending(1 << 20, 10)] == [b"one"]
    assert await other.forward_pending(1 << 20, 10) == []  # the lease is held
    # The first forwarder stops renewing (it died): once its lease ran out, the other one sends
    # the request again (polled for that event, bounded).
    deadline = asyncio.get_running_loop().time() + 30
    while not (again := await other.forward_pending(1 << 20, 10)):
        assert asyncio.get_running_loop().time() < deadline, "the lease never ran out"
        await asyncio.sleep(0.05)
    assert [i.body for i in again] == [b"one"]  # sent again
    await first.forward_release(1)  # the old forwarder lost the lease: no effect
    assert (await other.forward_state()).requests == 1
    await other.forward_release(1)
    assert (await other.forward_state()).requests == 0


async def test_a_full_backlog_refuses_before_the_trace_is_buffered(store: RedisStore) -> None:
    await store.append([], forward=("traces", b"x" * 900))
    chunk = TraceChunk(T1, "spans", b"", 1, True, True)
    with pytest.raises(QueueFull) as refused:
        await store.append([chunk], forward=("traces", b"y" * 200))
    assert refused.value.retry_after_s == 2.0 and "max_forward_backlog_bytes" in str(refused.value)
    assert (await store.stats()).traces == 0
    (item,) = await store.forward_log.forward_pending(1 << 20, 10)
    await store.forward_log.forward_release(item.position)
    await store.append([chunk], forward=("traces", b"y" * 200))
    assert (await store.stats()).traces == 1
