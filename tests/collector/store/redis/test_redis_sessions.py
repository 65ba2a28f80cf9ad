"""Redis-only behaviour of the session log: one session across processes (SPEC §7 "Durable and shared")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from shared_redis import REDIS_URL

from collector.common.session_types import SessionTurn
from collector.common.types import RunRecord
from collector.store.interface import SessionRules
from collector.store.redis.store import RedisStore

RULES = SessionRules(idle_s=10.0)
T0 = 1_000.0


def turn(n: int, session: str = "c1") -> SessionTurn:
    run = RunRecord(trace_id=f"{n:032x}", span_id=f"{n:016x}", service="bot", start_ns=n, session_id=session)
    return SessionTurn(f"bot/{session}", session, run)


@pytest.fixture
async def two() -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    """Two stores of one deployment (two processes: a client each)."""
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    stores = (RedisStore(REDIS_URL, key_prefix=prefix, block_ms=0, session_rules=RULES),
              RedisStore(REDIS_URL, key_prefix=prefix, block_ms=0, session_rules=RULES))
    for store in stores:
        await store.client.ping()  # fail loudly when Redis is missing
        await store.start()
    yield stores
    await stores[0].delete_all()
    for store in stores:
        await store.shutdown()


async def test_turns_noted_by_two_receivers_make_one_session(two: tuple[RedisStore, RedisStore]) -> None:
    a, b = two
    await asyncio.gather(a.note_turns([turn(1)], T0), b.note_turns([turn(2)], T0 + 1),
                         a.note_turns([turn(3, "other")], T0))
    assert await a.next_session_due() == T0 + 10
    assert (await b.session_counts())["open"] == 2
    taken = await b.take_due_sessions(T0 + 11, 10, 60.0)  # c1 is due at T0 + 10 or + 11: its notes race
    assert sorted((d.session_id, len(d.turns)) for d in taken) == [("c1", 2), ("other", 1)]


async def test_two_schedulers_never_claim_one_session_within_its_lease(two: tuple[RedisStore, RedisStore]) -> None:
    a, b = two
    await a.note_turns([turn(n, f"s{n}") for n in range(20)], T0)
    first, second = await asyncio.gather(a.take_due_sessions(T0 + 10, 15, 30.0), b.take_due_sessions(T0 + 10, 15, 30.0))
    claimed = [d.scope for d in first + second]
    assert len(claimed) == 20 and len(set(claimed)) == 20
    assert await a.take_due_sessions(T0 + 39, 50, 30.0) == []
    await a.sessions_scored(first, T0 + 12)
    again = await b.take_due_sessions(T0 + 40, 50, 30.0)  # only the other scheduler's ran out
    assert sorted(d.scope for d in again) == sorted(d.scope for d in second)
    assert (await b.session_counts())["scored_total"] == len(first)
