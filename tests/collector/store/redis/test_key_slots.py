"""Every Lua script and MULTI of the Redis backend touches keys of one Cluster hash slot.

The store's operations run against the real Redis while every command redis-py packs is
recorded (at the connection, so single commands, pipelines and transactions alike); then
the slot of every key each script call (EVALSHA's KEYS) and each transaction names is
computed with ``redis.crc.key_slot``: a mix fails, as Redis Cluster would fail it with
CROSSSLOT. Keys a script builds itself (a trace's ``meta``/``chunks``, a session's hash)
come from the prefix it is given, so every key a command names must also start with the
deployment's hash-tagged prefix.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection
from redis.crc import key_slot
from shared_redis import REDIS_URL

from collector.common.judge_types import Breaker, Park
from collector.common.session_types import SessionTurn
from collector.common.types import Dead, Done, Retry, RunRecord, ScoreJob, ScoreRecord, TraceChunk
from collector.store.redis.dead_letters import RedisDeadLetters
from collector.store.redis.keys import RedisKeys
from collector.store.redis.partitioned import PartitionedRedisStore, open_redis_store
from collector.store.redis.partitioned_admin import PartitionedDeadLetters
from collector.store.redis.status import RedisStatusBoard

KEYLESS = {"PING", "SCRIPT", "INFO", "WAIT", "CLIENT", "HELLO", "SELECT", "MULTI", "EXEC", "AUTH", "ECHO"}
ALL_KEYS = {"DEL", "EXISTS", "MGET", "UNLINK", "TOUCH"}
FIRST_TWO = {"RENAME", "RENAMENX"}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def command_keys(args: tuple[Any, ...]) -> list[str]:
    """The keys a command names (the commands the backend sends).

    Example:
        >>> command_keys(("EVALSHA", "sha", 2, "a", "b", "arg"))
        ['a', 'b']
        >>> command_keys(("XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "STREAMS", "s", ">"))
        ['s']
        >>> command_keys(("DEL", "x", "y")), command_keys(("PING",))
        (['x', 'y'], [])
    """
    name = _text(args[0]).upper().split()[0]  # "SCRIPT LOAD", "XGROUP CREATE": the command's first word
    words = [_text(a) for a in args[1:]]
    if name in KEYLESS or not words:
        return []
    if name in ("EVALSHA", "EVAL"):
        return words[2:2 + int(words[1])]
    if name == "XREADGROUP":
        streams = words[[w.upper() for w in words].index("STREAMS") + 1:]
        return streams[: len(streams) // 2]
    if name in ALL_KEYS:
        return words
    if name in FIRST_TWO:
        return words[:2]
    if name == "SCAN":
        return []
    return words[:1]


def slot_mixes(calls: Iterable[list[tuple[Any, ...]]]) -> list[str]:
    """The calls (a script call, or a MULTI...EXEC) whose keys fall in more than one slot
    (`test_a_mix_of_slots_is_caught` shows it failing)."""
    problems = []
    for call in calls:
        keys = [key for args in call for key in command_keys(args)]
        slots = sorted({key_slot(key.encode()) for key in keys})
        if len(slots) > 1:
            problems.append(f"{' '.join(_text(a[0]) for a in call)} {' '.join(keys)}: slots {slots}")
    return problems


class Recorder:
    """Every command packed by any redis-py asyncio connection, grouped per script call / MULTI."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[Any, ...]]] = []  # one entry per command, or per MULTI..EXEC
        self._batch: list[tuple[Any, ...]] | None = None

    def command(self, args: tuple[Any, ...]) -> None:
        if self._batch is not None:
            self._batch.append(args)
        else:
            self.calls.append([args])

    def batch(self, commands: list[tuple[Any, ...]]) -> None:
        """A pipeline's commands: a MULTI...EXEC is one call, the others one call each."""
        group: list[tuple[Any, ...]] | None = None
        for args in commands:
            name = _text(args[0]).upper()
            if name == "MULTI":
                group = []
            elif name == "EXEC" and group is not None:
                self.calls.append(group)
                group = None
            elif group is not None:
                group.append(args)
            else:
                self.calls.append([args])

    def keys(self) -> list[str]:
        return [key for call in self.calls for args in call for key in command_keys(args)]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Record what redis-py sends (the network boundary; our code runs unchanged)."""
    seen = Recorder()
    pack_command, pack_commands = AbstractConnection.pack_command, AbstractConnection.pack_commands

    def one(self: AbstractConnection, *args: Any) -> list[bytes]:
        seen.command(args)
        return pack_command(self, *args)

    def many(self: AbstractConnection, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        listed = [tuple(c) for c in commands]
        seen._batch = []  # pack_commands packs each with pack_command: collect them as one batch
        try:
            return pack_commands(self, listed)
        finally:
            seen._batch = None
            seen.batch(listed)

    monkeypatch.setattr(AbstractConnection, "pack_command", one)
    monkeypatch.setattr(AbstractConnection, "pack_commands", many)
    yield seen


@pytest.fixture(params=[1, 3], ids=["one-partition", "3-partitions"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The store, with its keys in one partition and in three (`collector.store.redis.partitioned`)."""
    opened = open_redis_store(REDIS_URL, partitions=request.param, key_prefix=f"test-slots-{uuid.uuid4().hex[:12]}:",
                              block_ms=0, sinks=["phoenix"], forward=True, visibility_timeout_s=0.05, max_attempts=1)
    await opened.client.ping()  # fail loudly when Redis is missing
    await opened.start()
    yield opened
    await opened.delete_all()
    await opened.shutdown()


def _job(n: int) -> ScoreJob:
    return ScoreJob(RunRecord(trace_id=f"{n:032x}", span_id=f"{n:016x}", service="bot", session_id="s1"), "q", "1")


def _record(job: ScoreJob) -> ScoreRecord:
    return ScoreRecord(job.key, job.run.trace_id, job.run.span_id, "ef" * 8, "q", "q", "1", score=1.0)


def _key_sets(store: Any) -> list[RedisKeys]:
    """The deployment's own keys, then each partition's (none beyond them with one partition)."""
    return [store.keys, *(part.keys for part in getattr(store, "partitions", []))]


async def _every_operation(store: Any) -> None:
    """Each operation of the store (and its dead letters, status board, key migration) once or more."""
    trace = b"\x07" * 16
    await store.append([TraceChunk(trace, "spans", b"run", 1, True, True)], now=10.0, forward=("traces", b"req"))
    await store.append([TraceChunk(b"\x08" * 16, "spans", b"x", 1, False)], now=10.0)
    due, _ = await store.due(10, now=100.0)
    assert due == [trace]
    await store.load_many(due)
    await store.load(trace)
    await store.finish_many(due)
    await store.discard(b"\x08" * 16, "unreadable")
    await store.next_due()
    jobs = [_job(n) for n in range(4)]
    await store.put(jobs)
    leased = await store.take(10)
    await store.renew(leased)
    await store.keep_judge_reply(leased[0].job.key, "req", "{}")
    await store.judge_replies(leased[0].job.key)
    await store.settle(leased[0], Done(_record(leased[0].job)))
    await store.settle(leased[1], Retry(0.0, "again"))
    await store.settle(leased[2], Dead("Boom", "boom", _record(leased[2].job)))
    await store.settle(leased[3], Park(0.0, "budget_exhausted"))  # judge governance (SPEC §8) from here
    await store.parked_jobs()
    await store.reserve_judge_spend("r1", "1d:2026-12-05", [("global", 1.0), ("scorer:q", 0.5)], 0.1, 10.0, 60.0)
    await store.settle_judge_spend("r1", "1d:2026-12-05", ["global", "scorer:q"], 0.05)
    await store.judge_spend("1d:2026-12-05", 10.0)
    await store.take_judge_rate("openai/gpt-4o-mini", 120, 1000, 10)
    await store.add_judge_tokens("openai/gpt-4o-mini", 1000, 5)
    await store.cool_down_judge("openai/gpt-4o-mini", 0.1)
    await store.open_judge_breaker(Breaker("m#k", "m", "401 authentication refused", 1.0, 2.0, 1.0))
    await store.claim_judge_probe("m#k", 3.0, 1.0)
    await store.judge_breakers()
    await store.close_judge_breakers(model="m")
    await store.take(10)  # promotes the retry; the 4th job's lease ran out: reclaimed, then dead (max_attempts 1)
    items = await store.pending(10)
    await store.defer([i.item_id for i in items[:1]], 0.0)
    await store.release([i.item_id for i in items])
    sink = store.sink_outbox("phoenix")
    sunk = await sink.pending(10)
    await sink.defer([i.item_id for i in sunk], 0.0, span_missing=True)
    await sink.release([i.item_id for i in sunk])
    await sink.backlog()
    turns = [SessionTurn("bot/s1", "s1", job.run, n == 1) for n, job in enumerate(jobs[:2])]
    await store.note_turns(turns, now=10.0)
    claimed = await store.take_due_sessions(now=10.0, limit=10, lease_s=5.0)
    await store.sessions_scored(claimed, now=11.0)
    await store.next_session_due()
    await store.session_counts()
    forwarded = await store.forward_log.forward_pending(1 << 20, 10)
    await store.forward_log.forward_release(forwarded[-1].position)
    await store.forward_log.forward_state()
    await store.stats()
    await store.refresh()
    await store.prune(3600.0)
    for part in getattr(store, "partitions", [store]):
        await part.queue.prune_consumers()
    board = RedisStatusBoard(store.client, store.keys)
    await board.publish("r1", "{}")
    await board.read()
    letters: Any = (PartitionedDeadLetters(store.client, store.keys.configured, len(store.partitions),
                                           idempotency_ttl_s=60.0) if isinstance(store, PartitionedRedisStore)
                    else RedisDeadLetters(store.client, store.keys, idempotency_ttl_s=60.0))
    found = await letters.letters()
    assert found, "no dead letter to replay"
    await letters.replay([found[0].id])
    await letters.purge(None)


async def test_every_script_and_transaction_keeps_to_one_slot(store: Any, recorder: Recorder) -> None:
    await _every_operation(store)
    scripts = [call for call in recorder.calls if _text(call[0][0]).upper() == "EVALSHA" or len(call) > 1]
    assert len([c for c in scripts if _text(c[0][0]).upper() == "EVALSHA"]) >= 20, "the scenario ran few scripts"
    assert any(len(call) > 1 for call in scripts), "no MULTI was recorded"
    assert slot_mixes(recorder.calls) == []
    prefixes = tuple(keys.prefix for keys in _key_sets(store))
    strays = sorted({key for key in recorder.keys() if not key.startswith(prefixes)})
    assert strays == [], f"keys outside the deployment's hash tags {prefixes}: {strays}"
    used = {key_slot(key.encode()) for key in recorder.keys()}
    assert used == {key_slot(keys.jobs.encode()) for keys in _key_sets(store)}  # every partition's slot, no other
    if isinstance(store, PartitionedRedisStore):  # each partition's slot in its own third of the slots
        assert [key_slot(part.keys.jobs.encode()) * 3 // 16384 for part in store.partitions] == [0, 1, 2]


def test_a_mix_of_slots_is_caught() -> None:
    untagged = RedisKeys("{x}:")
    assert slot_mixes([[("EVALSHA", "sha", 2, "ts:jobs", "ts:dead")]]) != []
    assert slot_mixes([[("SET", "ts:a", 1), ("SET", "ts:b", 1)]]) != []  # one MULTI
    assert slot_mixes([[("EVALSHA", "sha", 2, untagged.jobs, untagged.idem("t/s/q/1"))]]) == []
