"""The `SessionLog` of a `collector.store.redis.partitioned.PartitionedRedisStore`: each
conversation lives in the partition of its scope; claims gather from all of them."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis

from collector.common.session_types import DueSession, SessionTurn
from collector.store.interface import SESSION_COUNTS
from collector.store.redis.partitions import PartitionMap
from collector.store.redis.store import RedisStore

T = TypeVar("T")


class PartitionedSessions:
    """The session methods of `collector.store.redis.partitioned.PartitionedRedisStore`."""

    client: aioredis.Redis
    partitions: list[RedisStore]
    _map: PartitionMap

    async def _each(self, call: Callable[[RedisStore], Awaitable[T]]) -> list[T]:
        return list(await asyncio.gather(*(call(part) for part in self.partitions)))

    async def _grouped(self, items: Sequence[T], of: Callable[[T], int],
                       call: Callable[[RedisStore, list[T]], Awaitable[Any]]) -> None:
        groups = self._map.group(items, of)
        await asyncio.gather(*(call(self.partitions[p], some) for p, some in groups.items()))

    async def note_turns(self, turns: Sequence[SessionTurn], now: float) -> None:
        """Record turns, each in its session's partition."""
        await self._grouped(turns, lambda turn: self._map.of_key(turn.scope),
                            lambda part, some: part.note_turns(some, now))

    async def take_due_sessions(self, now: float, limit: int, lease_s: float) -> list[DueSession]:
        """Claim the ``limit`` earliest due sessions of all partitions, earliest first: their wake
        times are read first, then each partition claims as many as it holds of them (every
        partition is called, as its claim also forgets sessions past ``retain_s``)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for part in self.partitions:
                pipe.zrangebyscore(part.keys.sessions_due, "-inf", repr(now), start=0, num=limit, withscores=True)
            woken = await pipe.execute()
        earliest = sorted((float(at), index, scope.decode() if isinstance(scope, bytes) else scope)
                          for index, rows in enumerate(woken) for scope, at in rows)[:limit]
        wanted = Counter(index for _, index, _ in earliest)
        claimed = await asyncio.gather(*(part.take_due_sessions(now, wanted[index], lease_s)
                                         for index, part in enumerate(self.partitions)))
        order = {scope: at for at, _, scope in earliest}
        return sorted((d for some in claimed for d in some), key=lambda d: order.get(d.scope, now))

    async def sessions_scored(self, due: Sequence[DueSession], now: float) -> None:
        """Mark claimed sessions scored, in their partitions."""
        await self._grouped(due, lambda session: self._map.of_key(session.scope),
                            lambda part, some: part.sessions_scored(some, now))

    async def next_session_due(self) -> float | None:
        """When the earliest open session of any partition is due."""
        times = [t for t in await self._each(lambda part: part.next_session_due()) if t is not None]
        return min(times) if times else None

    async def session_counts(self) -> dict[str, int]:
        """The sessions' counts, summed over the partitions."""
        found = dict.fromkeys(SESSION_COUNTS, 0)
        for counts in await self._each(lambda part: part.session_counts()):
            for name, value in counts.items():
                found[name] = found.get(name, 0) + value
        return found

