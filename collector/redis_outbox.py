"""`RedisOutbox`: results waiting for export, in Redis so any replica can export any score.

Records are written by the queue's settle script (atomically with the job's ``XACK``).
`pending` claims the records it returns (their next attempt time moves ``lease_s``
ahead in the same script), so two replicas never export one record at once; `release`
deletes exported records, `defer` postpones failed ones. A replica that dies between
claiming and releasing leaves its records to be exported by another when the claim
runs out (the score span id is fixed, so a re-export sends the same span).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import redis.asyncio as aioredis

from collector._redis_conn import UNREACHABLE, Backoff, retry_unreachable
from collector._redis_keys import RedisKeys
from collector.queue import OutboxItem, ScoreRecord

logger = logging.getLogger(__name__)

# KEYS: outbox, outbox data, outbox attempts; ARGV: now, limit, claim until
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local out = {}
for _, id in ipairs(ids) do
  local data = redis.call('HGET', KEYS[2], id)
  if data then
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    out[#out + 1] = {id, data, redis.call('HGET', KEYS[3], id) or '0'}
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
"""

# KEYS: outbox, outbox attempts; ARGV: until, ids...
_DEFER = """
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i])
    redis.call('HINCRBY', KEYS[2], ARGV[i], 1)
  end
end
return 1
"""


class RedisOutbox:
    """The export side of the Redis store.

    Args:
        client: the asyncio Redis client.
        keys: the deployment's keys.
        lease_s: how long records returned by `pending` stay claimed by this replica.

    Example:
        >>> import asyncio, uuid
        >>> async def demo():
        ...     client = aioredis.Redis()
        ...     outbox = RedisOutbox(client, RedisKeys(f"doctest-{uuid.uuid4().hex}:"))
        ...     items = await outbox.pending(10)
        ...     await client.aclose()
        ...     return items
        >>> asyncio.run(demo())  # doctest: +SKIP
        []
    """

    def __init__(self, client: aioredis.Redis, keys: RedisKeys, *, lease_s: float = 60.0) -> None:
        self._r = client
        self._k = keys
        self._lease = lease_s
        self._claim = client.register_script(_CLAIM)
        self._defer = client.register_script(_DEFER)
        self._pending_backoff = Backoff("reading the outbox", logger)
        self._release_backoff = Backoff("releasing exported records", logger)

    async def pending(self, limit: int) -> list[OutboxItem]:
        """Claim and return records due for (another) export attempt.

        While Redis is unreachable this waits with backoff and returns nothing.

        Example:
            >>> RedisOutbox.pending.__name__
            'pending'
        """
        now = time.time()
        try:
            rows = await self._claim(
                keys=[self._k.outbox, self._k.outbox_data, self._k.outbox_attempts],
                args=[now, limit, now + self._lease],
            )
        except UNREACHABLE as err:
            await self._pending_backoff.wait(err)
            return []
        self._pending_backoff.reset()
        return [OutboxItem(int(i), ScoreRecord.from_json(d), int(a)) for i, d, a in rows]

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete exported records (retried while Redis is unreachable, up to the claim time).

        Example:
            >>> RedisOutbox.release.__name__
            'release'
        """
        if not item_ids:
            return
        ids = [str(i) for i in item_ids]

        async def delete() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.zrem(self._k.outbox, *ids)
                pipe.hdel(self._k.outbox_data, *ids)
                pipe.hdel(self._k.outbox_attempts, *ids)
                await pipe.execute()

        await retry_unreachable(delete, self._release_backoff, self._lease)

    async def defer(self, item_ids: Sequence[int], delay_s: float) -> None:
        """Postpone records whose export failed, counting the attempt.

        Example:
            >>> RedisOutbox.defer.__name__
            'defer'
        """
        if item_ids:
            await self._defer(keys=[self._k.outbox, self._k.outbox_attempts],
                              args=[time.time() + delay_s, *item_ids])
