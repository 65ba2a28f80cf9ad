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

from collector.common.types import OutboxItem, ScoreRecord
from collector.store.redis import outbox_scripts as scripts
from collector.store.redis.conn import UNREACHABLE, Backoff, retry_unreachable
from collector.store.redis.keys import RedisKeys
from collector.store.redis.recent import RecentRecords

logger = logging.getLogger(__name__)


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
        self.recent: RecentRecords | None = None  # records this process settled (the store's), claimed without parsing
        self._claim = client.register_script(scripts.CLAIM)
        self._defer = client.register_script(scripts.DEFER)
        self._release = client.register_script(scripts.RELEASE)
        self._pending_backoff = Backoff("reading the outbox", logger)
        self._release_backoff = Backoff("releasing exported records", logger)

    async def pending(self, limit: int, within_s: float = 0.0) -> list[OutboxItem]:
        """Claim and return records due for (another) export attempt, now or within ``within_s``.

        While Redis is unreachable this waits with backoff and returns nothing.
        """
        now = time.time()
        try:
            rows = await self._claim(
                keys=[self._k.outbox, self._k.outbox_data, self._k.outbox_attempts],
                args=[now + within_s, limit, now + self._lease],
            )
        except UNREACHABLE as err:
            await self._pending_backoff.wait(err)
            return []
        self._pending_backoff.reset()
        take = self.recent.take if self.recent is not None else ScoreRecord.from_json
        return [OutboxItem(int(i), take(d), int(a)) for i, d, a in rows]

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete exported records (retried while Redis is unreachable, up to the claim time)."""
        if not item_ids:
            return
        ids = [str(i) for i in item_ids]

        async def delete() -> None:  # one script: the three deletions at once, each id sent once
            for start in range(0, len(ids), 4096):  # Lua's unpack takes a few thousand values at most
                await self._release(keys=[self._k.outbox, self._k.outbox_data, self._k.outbox_attempts],
                                    args=ids[start:start + 4096])

        await retry_unreachable(delete, self._release_backoff, self._lease)

    async def defer(self, item_ids: Sequence[int], delay_s: float) -> None:
        """Postpone records whose export failed, counting the attempt."""
        if item_ids:
            await self._defer(keys=[self._k.outbox, self._k.outbox_attempts],
                              args=[time.time() + delay_s, *item_ids])
