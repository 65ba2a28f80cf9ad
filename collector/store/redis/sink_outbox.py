"""`RedisSinkOutbox`: one native sink's outbox in Redis, shared by every replica.

Records are queued by the queue's settle script, atomically with the job's ``XACK`` and
under the same item id as the OTLP outbox. `pending` claims what it returns (the same
claim script as the OTLP outbox: the next attempt time moves ``lease_s`` ahead), so two
replicas never send one record at once; a replica that dies mid-send leaves the record to
another once the claim runs out, and the backend's idempotency key makes the second
send an update, never a second score.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import redis.asyncio as aioredis

from collector.common.types import OutboxItem, ScoreRecord
from collector.store.redis import outbox_scripts as scripts
from collector.store.redis.conn import UNREACHABLE, Backoff, retry_unreachable
from collector.store.redis.keys import RedisKeys

logger = logging.getLogger(__name__)


class RedisSinkOutbox:
    """One sink's backlog (a `collector.store.interface.SinkOutbox`).

    Args:
        client: the asyncio Redis client.
        keys: the deployment's keys.
        sink: the sink's name.
        lease_s: how long records returned by `pending` stay claimed by this replica.
    """

    def __init__(self, client: aioredis.Redis, keys: RedisKeys, sink: str, *, lease_s: float = 60.0) -> None:
        self._r = client
        self.sink = sink
        self._zset, self._data = keys.sink(sink), keys.sink_data(sink)
        self._attempts, self._waiting = keys.sink_attempts(sink), keys.sink_waiting(sink)
        self._lease = lease_s
        self._claim = client.register_script(scripts.CLAIM)
        self._defer = client.register_script(scripts.DEFER)
        self._pending_backoff = Backoff(f"reading the {sink} sink's outbox", logger)
        self._release_backoff = Backoff(f"releasing {sink} sink records", logger)

    async def pending(self, limit: int) -> list[OutboxItem]:
        """Claim and return records due for (another) attempt; none while Redis is unreachable."""
        now = time.time()
        try:
            rows = await self._claim(keys=[self._zset, self._data, self._attempts],
                                     args=[now, limit, now + self._lease])
            waiting = await self._r.hmget(self._waiting, [i for i, _, _ in rows]) if rows else []
        except UNREACHABLE as err:
            await self._pending_backoff.wait(err)
            return []
        self._pending_backoff.reset()
        return [OutboxItem(int(i), ScoreRecord.from_json(d), int(a), None if w is None else float(w))
                for (i, d, a), w in zip(rows, waiting, strict=True)]

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete records the backend accepted or that were given up."""
        if not item_ids:
            return
        ids = [str(i) for i in item_ids]

        async def delete() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.zrem(self._zset, *ids)
                for key in (self._data, self._attempts, self._waiting):
                    pipe.hdel(key, *ids)
                await pipe.execute()

        await retry_unreachable(delete, self._release_backoff, self._lease)

    async def defer(self, item_ids: Sequence[int], delay_s: float, *, span_missing: bool = False) -> None:
        """Postpone records, counting the attempt (``span_missing``: remember when the backend
        first did not know the span).
        """
        if not item_ids:
            return
        now = time.time()
        await self._defer(keys=[self._zset, self._attempts], args=[now + delay_s, *item_ids])
        if span_missing:
            async with self._r.pipeline(transaction=False) as pipe:
                for item in item_ids:
                    pipe.hsetnx(self._waiting, str(item), str(now))
                await pipe.execute()

    async def backlog(self) -> int:
        """Records waiting for this sink."""
        return int(await self._r.zcard(self._zset))
