"""`RedisForwardLog`: received requests kept in a Redis stream, in order, until forwarded.

Every receiver of a deployment appends to the same stream (the receiver answers success
only after the append), and one receiver at a time forwards it: the one holding the
``forward:leader`` lease, renewed on every read, so requests leave in the order they
were appended (two senders would interleave them). A receiver that dies leaves the lease
to run out; another one then sends from the first unreleased request, so a request whose
acceptance was not yet released may be sent twice (at least once, as the Collector).

Positions are a counter (``forward:seq``), used as the stream entry ids (``<seq>-0``);
``forward:sent`` is the last position the backend accepted (scores wait for it, see
`collector.export.scores`), ``forward:bytes`` the bytes waiting, bounded by
``max_bytes``: a request over it is refused with `collector.common.errors.QueueFull`.
"""

from __future__ import annotations

import uuid
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from collector.common.errors import QueueFull, Unavailable, forward_backlog_full
from collector.store.interface import ForwardItem, ForwardState
from collector.store.redis.conn import UNREACHABLE
from collector.store.redis.keys import RedisKeys

# Append one request unless the backlog is full. KEYS: stream, seq, bytes; ARGV: signal,
# body, max bytes. Returns {position, 0} or {-1, bytes held}.
_APPEND = """
local held = tonumber(redis.call('GET', KEYS[3]) or '0')
local size = string.len(ARGV[2])
if held > 0 and held + size > tonumber(ARGV[3]) then
  return {-1, held}
end
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], seq .. '-0', 's', ARGV[1], 'b', ARGV[2])
redis.call('INCRBY', KEYS[3], size)
return {seq, 0}
"""

# Take or keep the forwarding lease. KEYS: leader; ARGV: owner, lease ms. Returns 1 if held.
_LEAD = """
local owner = redis.call('GET', KEYS[1])
if owner == false or owner == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# Forget requests up to a position, if still the leader. KEYS: leader, stream, bytes, sent;
# ARGV: owner, through, their bytes. Returns 1, or 0 when the lease was lost.
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('XTRIM', KEYS[2], 'MINID', tonumber(ARGV[2]) + 1)
local left = redis.call('DECRBY', KEYS[3], ARGV[3])
if left < 0 then
  redis.call('SET', KEYS[3], 0)
end
local sent = tonumber(redis.call('GET', KEYS[4]) or '0')
if tonumber(ARGV[2]) > sent then
  redis.call('SET', KEYS[4], ARGV[2])
end
return 1
"""


class RedisForwardLog:
    """`collector.store.interface.ForwardLog` on a Redis stream shared by every receiver.

    Args:
        client: the asyncio Redis client.
        keys: the deployment's keys.
        max_bytes: request bytes waiting at most (``export.max_forward_backlog_bytes``).
        retry_after_s: the retry delay a refused request is told.
        lease_s: how long the forwarding receiver keeps the lease without renewing it.
        enabled: False for a store made without forwarding (reads return nothing).

    Example:
        >>> import asyncio, uuid
        >>> from collector.store.redis.conn import connect
        >>> async def demo():
        ...     client = connect("redis://127.0.0.1:6379/0")
        ...     keys = RedisKeys(f"doctest-{uuid.uuid4().hex}:")
        ...     log = RedisForwardLog(client, keys)
        ...     await log.forward_append("traces", b"request")
        ...     items = await log.forward_pending(1 << 20, 10)
        ...     await log.forward_release(items[-1].position)
        ...     state = await log.forward_state()
        ...     await client.delete(*[k async for k in client.scan_iter(keys.pattern)])
        ...     await client.aclose()
        ...     return [i.body for i in items], state
        >>> asyncio.run(demo())
        ([b'request'], ForwardState(head=1, sent=1, requests=0, bytes=0))
    """

    def __init__(self, client: aioredis.Redis, keys: RedisKeys, *, max_bytes: int = 1 << 30,
                 retry_after_s: float = 5.0, lease_s: float = 15.0, enabled: bool = True) -> None:
        self._r = client
        self._k = keys
        self._max = max_bytes
        self._retry_after = retry_after_s
        self._lease_ms = int(lease_s * 1000)
        self._owner = uuid.uuid4().hex
        self._enabled = enabled
        self._append = client.register_script(_APPEND)
        self._lead = client.register_script(_LEAD)
        self._release = client.register_script(_RELEASE)
        self._sizes: dict[int, int] = {}  # position -> bytes, of requests read and not released

    async def forward_append(self, signal: str, body: bytes, *, client: aioredis.Redis | None = None) -> None:
        """Add one request to the stream, durably as Redis keeps data (``client``: a connection
        pinned for a following ``WAIT``, see `collector.store.redis.store.RedisStore.append`).

        Raises:
            QueueFull: the backlog is full (or Redis is out of memory).
            Unavailable: Redis cannot be reached (nothing was added).
        """
        try:
            position, held = await self._append(
                keys=[self._k.forward, self._k.forward_seq, self._k.forward_bytes], args=[signal, body, self._max],
                client=client)
        except UNREACHABLE as err:
            raise Unavailable(f"the forward log (Redis) is unreachable: {err}") from err
        except ResponseError as err:
            if "OOM" in str(err):
                raise QueueFull("the forward log (Redis) is out of memory") from err
            raise
        if int(position) < 0:
            raise forward_backlog_full(int(held), self._max, self._retry_after)

    async def forward_pending(self, max_bytes: int, limit: int) -> list[ForwardItem]:
        """The oldest requests not forwarded yet, if this process holds (or takes) the lease;
        else nothing (another receiver forwards)."""
        if not self._enabled or not await self._lead(keys=[self._k.forward_leader], args=[self._owner, self._lease_ms]):
            return []
        self._sizes.clear()  # what an earlier read left unreleased is read again here
        entries: Any = await self._r.xrange(
            self._k.forward, min="-", max="+", count=limit)  # released requests were trimmed
        items: list[ForwardItem] = []
        size = 0
        for entry_id, fields in entries:
            position = int(entry_id.split(b"-")[0])
            body = bytes(fields[b"b"])
            if items and size + len(body) > max_bytes:
                break
            signal = fields[b"s"].decode()
            items.append(ForwardItem(position, signal, body))
            self._sizes[position] = len(body)
            size += len(body)
        return items

    async def forward_release(self, through: int) -> None:
        """Forget the requests up to ``through`` (only while this process holds the lease:
        after losing it, the new leader sends them again)."""
        released = [p for p in self._sizes if p <= through]
        size = sum(self._sizes.pop(p) for p in released)
        await self._release(keys=[self._k.forward_leader, self._k.forward, self._k.forward_bytes, self._k.forward_sent],
                            args=[self._owner, through, size])

    async def forward_state(self) -> ForwardState:
        """Head, sent position and backlog, read from Redis."""
        async with self._r.pipeline(transaction=True) as pipe:  # one snapshot
            pipe.get(self._k.forward_seq)
            pipe.get(self._k.forward_sent)
            pipe.xlen(self._k.forward)
            pipe.get(self._k.forward_bytes)
            head, sent, requests, held = await pipe.execute()
        head_i = int(head or 0)
        # An empty stream means everything appended was sent (a fresh deployment: 0, 0).
        sent_i = head_i if not int(requests) else int(sent or 0)
        return ForwardState(head=head_i, sent=sent_i, requests=int(requests), bytes=int(held or 0))
