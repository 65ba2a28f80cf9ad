"""The parts of a partitioned Redis deployment that span its partitions without being the store
itself: a sink's outbox, the dead letters and the judge ledger as commands open them, and the
check that the partition count did not change under work still queued.

See `collector.store.redis.partitions` for the layout; `collector.store.redis.partitioned`
for the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis

from collector.common.errors import ConfigError
from collector.common.types import DeadLetter, OutboxItem
from collector.store.redis.dead_letters import RedisDeadLetters
from collector.store.redis.judge_ledger import RedisJudgeAdmin
from collector.store.redis.keys import RedisKeys
from collector.store.redis.partitions import PartitionMap, Rotation, partition_prefix
from collector.store.redis.sink_outbox import RedisSinkOutbox


def partition_keys(configured: str, count: int) -> list[RedisKeys]:
    """The key sets of a deployment of ``count`` partitions (with one: its own keys).

    Example:
        >>> [k.jobs for k in partition_keys("ts:", 1)], partition_keys("ts:", 2)[1].jobs
        (['{ts}:jobs'], '{ts|p1|2}:jobs')
    """
    if count == 1:
        return [RedisKeys(configured)]
    return [RedisKeys(partition_prefix(configured, i, count)) for i in range(count)]


async def _work_held(client: aioredis.Redis, keys: Sequence[RedisKeys], sinks: Sequence[str]) -> dict[str, int]:
    """What the key sets hold that a different partition count would strand."""
    held: Counter[str] = Counter()
    for k in keys:
        async with client.pipeline(transaction=False) as pipe:
            pipe.xlen(k.jobs)
            pipe.zcard(k.delayed)
            pipe.zcard(k.outbox)
            pipe.zcard(k.traces_open)
            pipe.zcard(k.sessions_due)
            pipe.xlen(k.dead)
            for sink in sinks:
                pipe.zcard(k.sink(sink))
            jobs, delayed, outbox, traces, sessions, dead, *sunk = await pipe.execute()
        held.update({"jobs": int(jobs) + int(delayed), "unexported scores": int(outbox) + sum(map(int, sunk)),
                     "undecided traces": int(traces), "open sessions": int(sessions), "dead letters": int(dead)})
    return {what: count for what, count in held.items() if count}


async def settle_partition_count(client: aioredis.Redis, configured: str, count: int,
                                 sinks: Sequence[str] = ()) -> None:
    """Record ``count`` as the deployment's partition count; refuse (`ConfigError`) a count
    other than the recorded one while the recorded partitions still hold work, which the new
    layout would never read.

    Example:
        >>> import uuid
        >>> from collector.store.redis.conn import connect
        >>> async def demo():
        ...     client, prefix = connect("redis://127.0.0.1:6379/0"), f"doctest-{uuid.uuid4().hex}:"
        ...     await settle_partition_count(client, prefix, 3)
        ...     recorded = await client.get(RedisKeys(prefix).partitions)
        ...     await settle_partition_count(client, prefix, 1)  # nothing queued: allowed
        ...     left = await client.exists(RedisKeys(prefix).partitions)
        ...     await client.aclose()
        ...     return recorded, left
        >>> asyncio.run(demo())
        (b'3', 0)
    """
    home = RedisKeys(configured)
    recorded = int(await client.get(home.partitions) or 1)
    if recorded == count:
        return
    held = await _work_held(client, partition_keys(configured, recorded), sinks)
    if held:
        what = ", ".join(f"{n} {name}" for name, n in held.items())
        raise ConfigError(
            f"invalid configuration: queue.partitions: {count}, but the deployment {configured!r} holds "
            f"{what} in {recorded} partition{'s' if recorded > 1 else ''}: run it with queue.partitions = "
            f"{recorded} until they are scored and exported (replay or purge the dead letters), then change it")
    if count == 1:
        await client.delete(home.partitions)
    else:
        await client.set(home.partitions, count)


async def lease_in_turn(order: Sequence[int], limit: int, parts: PartitionMap,
                        lease: Callable[[int, int], Awaitable[Sequence[OutboxItem]]]) -> list[OutboxItem]:
    """Up to ``limit`` outbox records, leased (``lease(partition, how many)``) from the
    partitions one after another in ``order`` until enough; their ids carry their partition
    (`PartitionMap.item_id`). The OTLP outbox and every sink's share it."""
    taken: list[OutboxItem] = []
    for index in order:
        if len(taken) >= limit:
            break
        for item in await lease(index, limit - len(taken)):
            taken.append(dataclasses.replace(item, item_id=parts.item_id(index, item.item_id)))
    return taken


class PartitionedSinkOutbox:
    """One native sink's outbox over every partition (`collector.store.interface.SinkOutbox`);
    item ids carry their partition (`PartitionMap.item_id`)."""

    def __init__(self, parts: Sequence[RedisSinkOutbox]) -> None:
        self.sink = parts[0].sink
        self._parts = list(parts)
        self._map = PartitionMap(len(parts))
        self._turns = Rotation(len(parts))

    async def pending(self, limit: int) -> list[OutboxItem]:
        """Lease up to ``limit`` records, from each partition in turn (a different first each call)."""
        return await lease_in_turn(self._turns.next(), limit, self._map,
                                   lambda index, left: self._parts[index].pending(left))

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete records the backend accepted."""
        groups = self._map.items_by_partition(item_ids)
        await asyncio.gather(*(self._parts[p].release(local) for p, local in groups.items()))

    async def defer(self, item_ids: Sequence[int], delay_s: float, *, span_missing: bool = False) -> None:
        """Leave records for a later attempt (see `RedisSinkOutbox.defer`)."""
        groups = self._map.items_by_partition(item_ids)
        await asyncio.gather(*(self._parts[p].defer(local, delay_s, span_missing=span_missing)
                               for p, local in groups.items()))

    async def backlog(self) -> int:
        """Records waiting in this sink's outbox, in every partition."""
        return sum(await asyncio.gather(*(part.backlog() for part in self._parts)))


class PartitionedDeadLetters:
    """`DeadLetterAdmin` over every partition; a letter's id is ``partition:stream id``.

    Args:
        client: an asyncio Redis client (closed by `close`).
        configured: the deployment's ``queue.key_prefix``.
        count: its partitions (``queue.partitions``, above 1).
        idempotency_ttl_s: the TTL of a replayed job's key (``queue.retention_s``).
    """

    def __init__(self, client: aioredis.Redis, configured: str, count: int, *, idempotency_ttl_s: float) -> None:
        self._client = client
        self._map = PartitionMap(count)
        self._parts = [RedisDeadLetters(client, keys, idempotency_ttl_s=idempotency_ttl_s)
                       for keys in partition_keys(configured, count)]

    async def letters(self) -> list[DeadLetter]:
        """Every dead letter, oldest first."""
        found = await asyncio.gather(*(part.letters() for part in self._parts))
        letters = [dataclasses.replace(x, id=self._map.letter_id(p, x.id)) for p, some in enumerate(found) for x in some]
        return sorted(letters, key=lambda x: x.failed_at)

    async def replay(self, ids: Sequence[str] | None) -> list[str]:
        """Re-queue dead letters (all when ``ids`` is None); returns the ids replayed."""
        chosen: dict[int, Any] = (dict.fromkeys(range(len(self._parts))) if ids is None
                                  else self._map.letters_by_partition(ids))
        done = await asyncio.gather(*(self._parts[p].replay(some) for p, some in chosen.items()))
        return [self._map.letter_id(p, x) for p, some in zip(chosen, done, strict=True) for x in some]

    async def purge(self, ids: Sequence[str] | None) -> int:
        """Delete dead letters (all when ``ids`` is None); returns how many."""
        chosen: dict[int, Any] = (dict.fromkeys(range(len(self._parts))) if ids is None
                                  else self._map.letters_by_partition(ids))
        return sum(await asyncio.gather(*(self._parts[p].purge(some) for p, some in chosen.items())))

    async def close(self) -> None:
        """Close the client."""
        await self._client.aclose()


class PartitionedJudgeAdmin(RedisJudgeAdmin):
    """The judge ledger of a partitioned deployment (``tracescore judges``): budgets, rates and
    breakers are the deployment's own keys; parked jobs are counted in every partition."""

    def __init__(self, client: aioredis.Redis, configured: str, count: int) -> None:
        super().__init__(client, RedisKeys(configured))
        self._partition_keys = partition_keys(configured, count)

    async def parked_jobs(self) -> dict[str, int]:
        """Jobs parked now, per reason, in every partition."""
        return await parked_in(self.client, self._partition_keys)

    async def wake_parked_jobs(self, reason: str) -> int:
        """Make the jobs parked for ``reason`` due now, in every partition."""
        parts = [RedisJudgeAdmin(self.client, keys) for keys in self._partition_keys]
        return sum(await asyncio.gather(*(part.wake_parked_jobs(reason) for part in parts)))


async def parked_in(client: aioredis.Redis, keys: Sequence[RedisKeys]) -> dict[str, int]:
    """Parked jobs per reason over several key sets (see `RedisJudgeLedger.parked_jobs`)."""
    reasons: Counter[str] = Counter()
    for values in await asyncio.gather(*(client.hvals(k.parked) for k in keys)):
        reasons.update(v.decode() if isinstance(v, bytes) else str(v) for v in values)
    return dict(reasons)
