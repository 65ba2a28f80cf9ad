"""Redis-only behaviour of the judge ledger: every key it writes is one of the deployment's
(`RedisKeys`), and nothing of it stays for ever (windows and rates expire)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from collector.judge_types import Breaker, Park
from collector.store.judge_interface import WINDOW_RETENTION_S
from collector.store.redis.queue import job_json
from collector.store.redis.store import RedisStore
from collector.types import RunRecord, ScoreJob

REDIS_URL = os.environ.get("TRACESCORE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
WINDOW = "1d:2026-12-05"


@pytest.fixture
async def store() -> AsyncIterator[RedisStore]:
    opened = RedisStore(REDIS_URL, key_prefix=f"test-{uuid.uuid4().hex[:12]}:", block_ms=0)
    await opened.client.ping()  # fail loudly when Redis is missing
    await opened.start()
    yield opened
    await opened.delete_all()
    await opened.shutdown()


async def test_the_ledger_writes_only_the_deployments_keys_and_they_expire(store: RedisStore) -> None:
    k = store.keys
    assert await store.reserve_judge_spend("r1", WINDOW, [("global", 1.0)], 0.5, 100.0, 600.0) is None
    assert await store.reserve_judge_spend("r2", WINDOW, [("global", 1.0)], 0.25, 100.0, 600.0) is None
    await store.settle_judge_spend("r1", WINDOW, ["global"], 0.125)
    assert await store.take_judge_rate("openai/gpt-4o", 60, 6000, 100) == 0.0
    await store.open_judge_breaker(Breaker("openai/gpt-4o#c0ffee", "openai/gpt-4o", "401", 1.0, 61.0, 60.0))
    await store.put([ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")])
    (leased,) = await store.take(1)
    await store.settle(leased, Park(60.0, "judge_unavailable"))
    written = {key.decode() async for key in store.client.scan_iter(match=k.pattern)}
    ledger = {k.judge_spend(WINDOW), k.judge_reservations(WINDOW), k.judge_reservation_data(WINDOW),
              k.judge_rate("openai/gpt-4o"), k.judge_breakers, k.judge_probes, k.parked}
    assert ledger <= written
    assert written - ledger == {k.jobs, k.delayed, k.delayed_data, k.idem(leased.job.key)}
    for key in (k.judge_spend(WINDOW), k.judge_reservations(WINDOW), k.judge_reservation_data(WINDOW)):
        assert WINDOW_RETENTION_S * 1000 - 60_000 < await store.client.pttl(key) <= WINDOW_RETENTION_S * 1000
    assert 0 < await store.client.pttl(k.judge_rate("openai/gpt-4o")) <= 2000  # a second after its last time
    await store.settle_judge_spend("r2", WINDOW, ["global"], 0.0)
    assert not await store.client.exists(k.judge_reservations(WINDOW))  # no reservation left: no key


async def test_a_delayed_job_of_an_earlier_version_is_promoted_as_it_was(store: RedisStore) -> None:
    job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")
    await store.client.zadd(store.keys.delayed, {job.key: 0})
    await store.client.hset(store.keys.delayed_data, job.key, "3|" + job_json(job))
    (leased,) = await store.take(1)
    assert (leased.job, leased.attempt, leased.parked_since) == (job, 4, None)
