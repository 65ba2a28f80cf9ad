"""`RedisStatusBoard`: where the replicas of a Redis deployment share their status snapshots.

Each replica writes its snapshot (JSON) every few seconds under ``P status:{replica}``
with a TTL, and notes the time in the zset ``P status``; any replica's ``/status`` then
reads every live replica's snapshot, so ``tracescore status`` on one URL shows the group.
A replica that stops (or dies) drops out once its key expires.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

from collector.store.redis.keys import RedisKeys


class RedisStatusBoard:
    """The group's snapshots in Redis.

    Args:
        client: the store's asyncio client.
        keys: the deployment's keys.
        ttl_s: how long a snapshot stays without being written again.

    Example:
        >>> RedisStatusBoard(aioredis.Redis(), RedisKeys("p:")).key("r1")
        '{p}:status:r1'
    """

    def __init__(self, client: aioredis.Redis, keys: RedisKeys, *, ttl_s: float = 10.0) -> None:
        self._r = client
        self._index = keys.prefix + "status"
        self._prefix = keys.prefix + "status:"
        self._ttl_s = ttl_s

    def key(self, replica: str) -> str:
        """The key of one replica's snapshot."""
        return self._prefix + replica

    async def publish(self, replica: str, snapshot_json: str) -> None:
        """Write this replica's snapshot (and forget replicas gone for longer than the TTL)."""
        now = time.time()
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.set(self.key(replica), snapshot_json, px=int(self._ttl_s * 1000))
            pipe.zadd(self._index, {replica: now})
            pipe.zremrangebyscore(self._index, "-inf", now - self._ttl_s)
            await pipe.execute()

    async def read(self) -> list[str]:
        """The snapshots of every live replica (JSON text)."""
        replicas: Any = await self._r.zrangebyscore(self._index, time.time() - self._ttl_s, "+inf")
        if not replicas:
            return []
        names = [r.decode() if isinstance(r, bytes) else str(r) for r in replicas]
        values: Any = await self._r.mget([self.key(n) for n in names])
        return [v.decode() if isinstance(v, bytes) else str(v) for v in values if v is not None]
