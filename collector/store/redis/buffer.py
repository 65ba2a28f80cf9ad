"""`RedisTraceBuffer`: the durable per-trace span buffer and the shared decision timer in Redis.

Every receiver of a deployment appends to the same buffer, so the spans of one trace that
reach different receivers (behind a load balancer) are decided as one trace. Invariants
(the same as the SQLite buffer's):

* `append` stores the chunks and moves the trace's decision time in one script before it
  returns (the receiver answers success after it); Redis being unreachable raises
  `collector.common.errors.Unavailable`, so receivers answer a retryable code, never success;
* a trace with a run candidate is decided ``decision_wait`` after its root span arrived,
  or ``rootless_wait`` after its latest candidate while the root is missing, and at the
  latest ``max_trace_age`` after its first span;
* the decision timer is the ``decide`` sorted set: it outlives any receiver, and `due`
  claims due traces atomically (pushing their time ``claim_s`` ahead), so two receivers
  never decide one trace at once, and a receiver that dies mid-decision leaves the trace
  to be decided by another when the claim runs out;
* `finish` clears the timer only if it still holds that claim: spans of a new run that
  arrived during the decision get their own decision;
* a decided trace stays buffered as context (evicted first) until ``max_trace_age``.

Decision times are the receivers' wall-clock times: receivers on several hosts need
synchronised clocks (NTP); a skew of s seconds moves a decision by s.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from collector.common.errors import QueueFull, Unavailable
from collector.common.types import AppendResult, TraceChunk
from collector.store.redis import scripts
from collector.store.redis.conn import UNREACHABLE, Backoff, Coalescer, retry_unreachable
from collector.store.redis.keys import SIGNAL_LOGS, SIGNAL_SPANS, RedisKeys

logger = logging.getLogger(__name__)


class RedisTraceBuffer:
    """Trace chunks and decision times in Redis, shared by every receiver.

    Args:
        client: the asyncio Redis client.
        keys: the deployment's keys.
        decision_wait: seconds between a trace's root (or, without it, run) span and its decision.
        rootless_wait: the least wait after a run span while the trace's root is missing.
        max_traces: traces buffered at most; decided ones, then the oldest, are evicted beyond it.
        max_spans_per_trace: spans buffered per trace; later spans are dropped.
        max_trace_age: a trace is decided (or dropped) at most this long after its first span.
        claim_s: how long a trace claimed by `due` stays with its claimer.

    Example:
        >>> import asyncio, uuid
        >>> from collector.store.redis.conn import connect
        >>> async def demo():
        ...     client = connect("redis://127.0.0.1:6379/0")
        ...     keys = RedisKeys(f"doctest-{uuid.uuid4().hex}:")
        ...     buffer = RedisTraceBuffer(client, keys, decision_wait=5.0)
        ...     await buffer.append([TraceChunk(b"\\x01" * 16, "spans", b"x", 1, True, True)], now=0.0)
        ...     due = await buffer.due(10, now=5.0)
        ...     await client.delete(*[k async for k in client.scan_iter(keys.pattern)])
        ...     await client.aclose()
        ...     return due
        >>> asyncio.run(demo())  # doctest: +SKIP
        ([b'\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01'], 0)
    """

    def __init__(
        self, client: aioredis.Redis, keys: RedisKeys, *, decision_wait: float = 5.0,
        rootless_wait: float = 30.0, max_traces: int = 100_000, max_spans_per_trace: int = 10_000,
        max_trace_age: float = 600.0, claim_s: float = 30.0,
    ) -> None:
        self._r = client
        self._k = keys
        self._wait = decision_wait
        self._rootless = max(decision_wait, rootless_wait)
        self._max_traces = max_traces
        self._max_spans = max_spans_per_trace
        self._max_age = max_trace_age
        self._claim = claim_s
        self._ttl_ms = int((2 * max_trace_age + 60) * 1000)
        self._append = client.register_script(scripts.APPEND)
        self._due = client.register_script(scripts.DUE)
        self._finish = client.register_script(scripts.FINISH)
        self._load = client.register_script(scripts.LOAD_MANY)
        self._backoff = Backoff("deciding traces", logger)
        self._read_backoff = Backoff("reading a trace", logger)
        # The assembler loads and finishes a batch of traces concurrently: one pipeline each.
        self._loads: Coalescer[bytes, list[TraceChunk]] = Coalescer(self._load_many)
        self._finishes: Coalescer[bytes, None] = Coalescer(self._finish_many)

    async def append(self, chunks: Sequence[TraceChunk], now: float | None = None, *,
                     client: aioredis.Redis | None = None) -> AppendResult:
        """Store trace chunks durably; returns what was evicted or dropped (``client``: a
        connection pinned for a following ``WAIT``, see `RedisStore.append`).

        Raises:
            Unavailable: Redis cannot be reached (nothing, or not all, was stored).
            QueueFull: Redis refused the write for lack of memory.
        """
        at = time.time() if now is None else now
        keys = [self._k.traces_open, self._k.traces_decided, self._k.decide]
        args: list[Any] = [at, self._wait, self._rootless, self._max_traces, self._max_spans,
                           self._max_age, self._k.prefix, self._ttl_ms]
        for chunk in chunks:
            tid = chunk.trace_id.hex()
            keys += [self._k.meta(tid), self._k.chunks(tid)]
            signal = SIGNAL_SPANS if chunk.signal == "spans" else SIGNAL_LOGS
            args += [tid, chunk.span_count, int(chunk.has_run_candidate), int(chunk.has_root),
                     signal + chunk.data]
        try:
            evicted, dropped = await self._append(keys=keys, args=args, client=client)
        except UNREACHABLE as err:
            raise Unavailable(f"the trace buffer (Redis) is unreachable: {err}") from err
        except ResponseError as err:
            if "OOM" in str(err):
                raise QueueFull("the trace buffer (Redis) is out of memory") from err
            raise
        return AppendResult(evicted_traces=int(evicted), dropped_spans=int(dropped))

    async def due(self, limit: int, now: float | None = None) -> tuple[list[bytes], int]:
        """Claim traces ready for a decision; also drops aged-out traces (and counts lost ones).

        While Redis is unreachable this waits with backoff and returns nothing.
        """
        at = time.time() if now is None else now
        try:
            ids, expired = await self._due(
                keys=[self._k.traces_open, self._k.traces_decided, self._k.decide],
                args=[at, limit, at + self._claim, self._max_age, self._k.prefix],
            )
        except UNREACHABLE as err:
            await self._backoff.wait(err)
            return [], 0
        self._backoff.reset()
        return [bytes.fromhex(t.decode()) for t in ids], int(expired)

    async def next_due(self) -> float | None:
        """When the next trace may be due for a decision (epoch seconds; None: none pending, or
        Redis unreachable: the caller then looks again after its usual interval)."""
        try:
            first = await self._r.zrange(self._k.decide, 0, 0, withscores=True)
        except UNREACHABLE:
            return None
        return float(first[0][1]) if first else None

    async def load(self, trace_id: bytes) -> list[TraceChunk]:
        """Every chunk stored for a trace, in arrival order (retried through short outages)."""
        return await self._loads(trace_id)

    async def _load_many(self, trace_ids: list[bytes]) -> list[list[TraceChunk]]:
        keys = [self._k.chunks(trace_id.hex()) for trace_id in trace_ids]

        async def read() -> list[Any]:
            return list(await self._load(keys=keys))

        replies = await retry_unreachable(read, self._read_backoff, self._claim / 3)
        return [
            [TraceChunk(trace_id, "spans" if row[:1] == SIGNAL_SPANS else "logs", bytes(row[1:]), 0, False)
             for row in rows]
            for trace_id, rows in zip(trace_ids, replies, strict=True)
        ]

    async def load_many(self, trace_ids: Sequence[bytes]) -> list[list[TraceChunk]]:
        """Every chunk of several traces, in arrival order, in one pipeline."""
        return await self._load_many(list(trace_ids)) if trace_ids else []

    async def finish(self, trace_id: bytes) -> None:
        """Mark a trace decided (unless new run spans arrived since it was claimed)."""
        await self._finishes(trace_id)

    async def finish_many(self, trace_ids: Sequence[bytes]) -> None:
        """Mark several traces decided in one script call."""
        if trace_ids:
            await self._finish_many(list(trace_ids))

    async def _finish_many(self, trace_ids: list[bytes]) -> list[None]:
        hexes = [trace_id.hex() for trace_id in trace_ids]
        keys = [self._k.traces_open, self._k.traces_decided, self._k.decide, *map(self._k.meta, hexes)]

        async def finish() -> None:  # idempotent: safe to repeat after a lost reply
            await self._finish(keys=keys, args=hexes)

        await retry_unreachable(finish, self._read_backoff, self._claim / 3)
        return [None] * len(trace_ids)

    async def discard(self, trace_id: bytes, error: str) -> None:
        """Dead-letter a trace that cannot be read (key ``trace/<id>``, with ``error``) and forget it."""
        tid = trace_id.hex()
        job = json.dumps({"run": {"trace_id": tid, "span_id": ""}, "scorer_id": ""})
        reason = json.dumps({"type": "UnreadableTrace", "message": error, "scorer_id": ""})

        async def discard() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.xadd(self._k.dead, {"key": f"trace/{tid}", "job": job, "error": reason, "attempts": 1,
                                         "failed_at": time.time()})
                pipe.delete(self._k.meta(tid), self._k.chunks(tid))
                pipe.zrem(self._k.traces_open, tid)
                pipe.zrem(self._k.traces_decided, tid)
                pipe.zrem(self._k.decide, tid)
                await pipe.execute()

        await retry_unreachable(discard, self._read_backoff, self._claim / 3)
