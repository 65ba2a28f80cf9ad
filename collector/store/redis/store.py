"""`RedisStore`: the distributed store: trace buffer, job queue, dead letters and outbox in Redis.

It offers the same surface as `collector.store.sqlite.store.SqliteStore` (`TraceBuffer`,
`JobQueue`, the exporter's `Outbox`, ``stats`` and ``dead_letters``), delegating to
`RedisTraceBuffer`, `RedisJobQueue` and `RedisOutbox` over one connection pool, so every
receiver and worker process of a deployment (same ``queue.url`` and ``key_prefix``)
shares one buffer, one queue and one outbox. Keys are listed in `collector.store.redis.keys`.

`depth` never blocks: a background task refreshes it from Redis (stream length, delayed
jobs, outbox size, traces awaiting a decision), so a receiver refuses data once the queue
passes its high-water mark (``queue.max_pending_jobs``) even when the jobs were queued by
other processes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, OutOfMemoryError, ReadOnlyError, ResponseError

from collector.common.aio import cancel_and_wait
from collector.common.errors import ConfigError, Unavailable, UnreadableTrace
from collector.common.session_types import SessionTurn
from collector.common.types import (
    AppendResult,
    LeasedJob,
    OutboxItem,
    ScoreJob,
    Settlement,
    StoreStats,
    TraceChunk,
)
from collector.store.interface import SessionRules
from collector.store.redis.buffer import RedisTraceBuffer
from collector.store.redis.conn import UNREACHABLE, connect, slot_primary
from collector.store.redis.forward import RedisForwardLog
from collector.store.redis.keys import GROUP, RedisKeys
from collector.store.redis.migrate import migrate_untagged
from collector.store.redis.outbox import RedisOutbox
from collector.store.redis.packing import encodes_strict_utf8
from collector.store.redis.partitioned_admin import settle_partition_count
from collector.store.redis.pinned import NotReplicated, ReplicatedWrites, refuse_without_wait
from collector.store.redis.queue import RedisJobQueue
from collector.store.redis.recent import RecentRecords
from collector.store.redis.sessions import RedisSessions
from collector.store.redis.shared import RedisShared
from collector.store.redis.sink_outbox import RedisSinkOutbox
from collector.store.redis.totals import read_totals

logger = logging.getLogger(__name__)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisStore(RedisSessions, RedisShared):
    """The Redis-backed trace buffer, job queue, outbox, session log (`RedisSessions`), judge
    ledger and labels (`RedisShared`).

    Args:
        url: ``redis://[user:password@]host:port/db`` (or ``rediss://``), a ``redis+sentinel://``
            or a ``redis+cluster://`` URL (`collector.config.redis_url`).
        key_prefix: the deployment's key prefix (several deployments may share one Redis).
        decision_wait: seconds between a trace's root (or, without it, run) span and its decision.
        rootless_wait: the least wait after a run span while the trace's root is missing.
        max_traces: traces buffered at most.
        max_spans_per_trace: spans buffered per trace.
        max_trace_age: a trace is decided (or dropped) at most this long after its first span.
        visibility_timeout_s: idle time after which a leased job is taken over by another worker.
        max_attempts: deliveries of one job before it is dead-lettered.
        idempotency_ttl_s: how long job keys are remembered.
        export_lease_s: how long records being exported stay claimed by one replica.
        refresh_s: how often `depth` is refreshed from Redis.
        block_ms: how long a worker's `take` waits on the stream for new jobs.
        sinks: the native score sinks configured: a settled record is queued for each one too.
        forward: keep received requests in the forward log (`forward_log`) until forwarded.
        max_forward_bytes: the forward log's bound; beyond it requests are refused (429).
        retry_after_s: the retry delay told with such a refusal.
        session_rules: when conversations are scored and how many are kept (default `SessionRules()`).
        wait_replicas: replicas that must acknowledge an `append`'s writes (``WAIT``) before it
            returns; fewer within ``wait_timeout_ms`` raise `Unavailable` (the client resends).
        wait_timeout_ms: how long `append` waits for them.
        client: a client to share (a partition of `collector.store.redis.partitioned`); not
            closed by `shutdown`. By default the store opens its own on ``url``.
        check_partitions: at start, refuse a deployment recorded with more partitions that
            still hold work (`collector.store.redis.partitioned_admin.settle_partition_count`);
            off for the key sets of a `PartitionedRedisStore`, which checks for them.

    Example:
        >>> import asyncio, uuid
        >>> from collector.common.types import Done, RunRecord, ScoreJob
        >>> async def demo():
        ...     store = RedisStore("redis://127.0.0.1:6379/0", key_prefix=f"doctest-{uuid.uuid4().hex}:")
        ...     await store.start()
        ...     job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "quality", "1")
        ...     first = await store.put([job, job])
        ...     leased = await store.take(10)
        ...     await store.settle(leased[0], Done(None))
        ...     again = await store.put([job])
        ...     await store.delete_all()
        ...     await store.shutdown()
        ...     return first, len(leased), again
        >>> asyncio.run(demo())  # doctest: +SKIP
        ([True, False], 1, [False])
    """

    def __init__(
        self, url: str, *, key_prefix: str = "tracescore:", decision_wait: float = 5.0,
        rootless_wait: float = 30.0, max_traces: int = 100_000, max_spans_per_trace: int = 10_000,
        max_trace_age: float = 600.0, visibility_timeout_s: float = 300.0, max_attempts: int = 5,
        idempotency_ttl_s: float = 7 * 86400.0, export_lease_s: float = 60.0, refresh_s: float = 0.25,
        block_ms: int = 500, sinks: Sequence[str] = (), forward: bool = False,
        max_forward_bytes: int = 1 << 30, retry_after_s: float = 5.0, session_rules: SessionRules | None = None,
        wait_replicas: int = 0, wait_timeout_ms: int = 1000, client: aioredis.Redis | None = None,
        check_partitions: bool = True,
    ) -> None:
        self.keys = RedisKeys(key_prefix)
        self._owns_client = client is None
        self.client = connect(url, socket_timeout_s=max(10.0, 2 * wait_timeout_ms / 1000)) if client is None else client
        self._check_partitions = check_partitions
        self.replicated = ReplicatedWrites(self.client, self.keys.jobs, wait_replicas, wait_timeout_ms)
        self._init_sessions(session_rules)
        self.forward_log = RedisForwardLog(self.client, self.keys, max_bytes=max_forward_bytes,
                                           retry_after_s=retry_after_s, enabled=forward)
        self._forwarding = forward
        self.buffer = RedisTraceBuffer(
            self.client, self.keys, decision_wait=decision_wait, rootless_wait=rootless_wait,
            max_traces=max_traces, max_spans_per_trace=max_spans_per_trace, max_trace_age=max_trace_age,
        )
        self.queue = RedisJobQueue(
            self.client, self.keys, visibility_timeout_s=visibility_timeout_s, max_attempts=max_attempts,
            idempotency_ttl_s=idempotency_ttl_s, block_ms=block_ms,
        )
        self.outbox = RedisOutbox(self.client, self.keys, lease_s=export_lease_s)
        if encodes_strict_utf8(self.client.get_encoder()):  # settled records reach the exporter unparsed
            self.queue.recent = self.outbox.recent = RecentRecords()
        self.queue.sink_keys = [key for sink in sinks for key in (self.keys.sink(sink), self.keys.sink_data(sink))]
        self._sinks = tuple(sinks)
        self._export_lease_s = export_lease_s
        self._refresh_s = refresh_s
        self._replies_ttl_s = max(1.0, idempotency_ttl_s)
        self.reachable = False  # did the last round trip (start, then every refresh) succeed?
        self._refresher: asyncio.Task[None] | None = None
        self._started = False

    async def start(self) -> None:
        """Create the job stream's consumer group and start refreshing `depth`.

        An unreachable Redis is not fatal: components retry, receivers refuse retryably.
        """
        self._started = True
        try:
            await migrate_untagged(self.client, self.keys)
            if self._check_partitions:
                await settle_partition_count(self.client, self.keys.configured, 1, self._sinks)
            await self.queue.create_group()
            await self.refresh()
            if self.replicated.replicas:
                await refuse_without_wait(self.client, self.keys.jobs)
        except (ReadOnlyError, OutOfMemoryError) as err:  # a failover or a full Redis: passes
            self.reachable = False
            logger.warning("redis refuses writes at start (components will retry): %s", err)
        except AuthenticationError as err:  # refused, not away: retrying won't help
            raise ConfigError(f"invalid configuration: queue.url: Redis refused: {err}") from err
        except UNREACHABLE as err:  # CLUSTERDOWN included (a ResponseError too)
            self.reachable = False
            logger.warning("redis unreachable at start (components will retry): %s", err)
        except ResponseError as err:
            raise ConfigError(f"invalid configuration: queue.url: Redis refused: {err}") from err
        self._refresher = asyncio.create_task(self._refresh_loop(), name="tracescore-redis-depth")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Stop refreshing, leave the consumer group if idle, close the pool; safe twice.

        Example:
            >>> asyncio.run(RedisStore("redis://127.0.0.1:6379/0").shutdown())
        """
        if self._refresher is not None:
            await cancel_and_wait([self._refresher])
            self._refresher = None
        if self._started:
            self._started = False
            try:
                async with asyncio.timeout(timeout):
                    await self.queue.forget_consumer()
            except TimeoutError:
                pass
        if self._owns_client:
            await self.client.aclose()

    async def refresh(self) -> int:
        """Read the depth from Redis now: jobs waiting, in flight or delayed, unexported records
        (the OTLP outbox and every sink's), and traces waiting for a decision (each will become jobs), so backpressure starts
        before a burst of traces turns into a burst of jobs.
        """
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xlen(self.keys.jobs)
            pipe.zcard(self.keys.delayed)
            pipe.zcard(self.keys.outbox)
            pipe.zcard(self.keys.decide)
            for sink in self._sinks:  # unexported results too
                pipe.zcard(self.keys.sink(sink))
            jobs, delayed, outbox, deciding, *sinks = await pipe.execute()
        self.queue.depth_cache = int(jobs) + int(delayed) + int(outbox) + int(deciding) + sum(map(int, sinks))
        self.reachable = True
        return self.queue.depth_cache

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                await self.refresh()
            except UNREACHABLE:
                self.reachable = False  # appends fail (retryably) while Redis is away; /readyz says so
            except Exception:
                logger.exception("refreshing the queue depth failed")

    # ----------------------------------------------------------------- trace buffer
    async def append(
        self, chunks: Sequence[TraceChunk], now: float | None = None, *, forward: tuple[str, bytes] | None = None,
    ) -> AppendResult:
        """Store trace chunks durably (see `RedisTraceBuffer.append`); ``forward``: (signal,
        request body) for the forward log, added first (a full log refuses the request
        before anything is buffered; a failed append after it makes the client retry, and
        the request is forwarded twice: at least once).
        """
        if not self.replicated.replicas:
            return await self._append(chunks, now, forward, None)
        try:
            return await self.replicated.once(lambda pinned: self._append(chunks, now, forward, pinned),
                                              "the request's writes")
        except NotReplicated as err:
            raise Unavailable(f"{err}: refused, to be resent") from err
        except UNREACHABLE as err:
            raise Unavailable(f"the trace buffer (Redis) is unreachable: {err}") from err

    async def _append(self, chunks: Sequence[TraceChunk], now: float | None, forward: tuple[str, bytes] | None,
                      client: aioredis.Redis | None) -> AppendResult:
        if forward is not None and self._forwarding:
            await self.forward_log.forward_append(*forward, client=client)
        if not chunks:
            return AppendResult()
        return await self.buffer.append(chunks, now, client=client)

    claims_due = True
    """`due` claims what it returns: a second call, before those are finished, returns others."""

    async def due(self, limit: int, now: float | None = None) -> tuple[list[bytes], int]:
        """Claim traces ready for a decision (see `RedisTraceBuffer.due`)."""
        return await self.buffer.due(limit, now)

    async def next_due(self) -> float | None:
        """When the next trace may be due for a decision (see `RedisTraceBuffer.next_due`)."""
        return await self.buffer.next_due()

    async def load(self, trace_id: bytes) -> list[TraceChunk]:
        """Every chunk stored for a trace, in arrival order."""
        return await self.buffer.load(trace_id)

    async def discard(self, trace_id: bytes, error: str) -> None:
        """Dead-letter a trace that cannot be read and forget it (see `RedisTraceBuffer.discard`)."""
        await self.buffer.discard(trace_id, error)

    async def finish(self, trace_id: bytes) -> None:
        """Mark a trace decided (see `RedisTraceBuffer.finish`)."""
        await self.buffer.finish(trace_id)

    async def load_many(self, trace_ids: Sequence[bytes]) -> list[list[TraceChunk] | UnreadableTrace]:
        """Every chunk of several traces, in one pipeline (see `RedisTraceBuffer.load_many`)."""
        return list(await self.buffer.load_many(trace_ids))

    async def finish_many(self, trace_ids: Sequence[bytes]) -> None:
        """Mark several traces decided in one script call (see `RedisTraceBuffer.finish_many`)."""
        await self.buffer.finish_many(trace_ids)

    # -------------------------------------------------------------------- job queue
    def depth(self) -> int:
        """Jobs waiting, in flight or delayed plus unexported records, as last refreshed.

        Example:
            >>> RedisStore("redis://127.0.0.1:6379/0").depth()
            0
        """
        return self.queue.depth()

    async def put(self, jobs: Sequence[ScoreJob]) -> list[bool]:
        """Queue jobs idempotently (see `RedisJobQueue.put`), on ``wait_replicas`` replicas."""
        return await self.replicated(lambda pinned: self.queue.put(jobs, client=pinned), "the queued jobs")

    async def note_turns(self, turns: Sequence[SessionTurn], now: float, *, client: Any = None) -> None:
        """Record turns (see `RedisSessions.note_turns`), on ``wait_replicas`` replicas."""
        await self.replicated(lambda pinned: RedisSessions.note_turns(self, turns, now, client=pinned or client),
                              "the session turns")

    async def take(self, limit: int) -> list[LeasedJob]:
        """Lease up to ``limit`` jobs (see `RedisJobQueue.take`)."""
        return await self.queue.take(limit)

    async def renew(self, leased: Sequence[LeasedJob]) -> int:
        """Renew the leases of running jobs (see `RedisJobQueue.renew`)."""
        return await self.queue.renew(leased)

    async def settle(self, leased: LeasedJob, outcome: Settlement) -> None:
        """Settle a leased job atomically with its outbox record and totals (`RedisJobQueue.settle`)."""
        await asyncio.shield(self.queue.settle_soon(leased, outcome))

    async def prune(self, older_than_s: float, now: float | None = None) -> int:
        """Drop dead letters older than ``older_than_s`` (idempotency keys carry a TTL); returns how many."""
        cutoff_ms = int(((time.time() if now is None else now) - older_than_s) * 1000)
        return int(await self.client.xtrim(self.keys.dead, minid=max(0, cutoff_ms)))

    async def dead_letters(self) -> list[dict[str, object]]:
        """The dead letters as dicts (key, error, attempts), oldest first."""
        return await self.queue.dead_letters()

    # ---------------------------------------------------------------- judge replies
    async def judge_replies(self, job_key: str) -> dict[str, str]:
        """The judge replies kept for a job (request key -> reply JSON)."""
        kept = await self.client.hgetall(self.keys.replies(job_key))
        return {_text(k): _text(v) for k, v in kept.items()}

    async def keep_judge_reply(self, job_key: str, request_key: str, reply: str) -> None:
        """Keep one judge reply of a job until it settles (or for the idempotency TTL at most)."""
        key = self.keys.replies(job_key)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, request_key, reply)
            pipe.expire(key, int(self._replies_ttl_s))
            await asyncio.shield(pipe.execute())

    # ----------------------------------------------------------------------- outbox
    async def pending(self, limit: int, within_s: float = 0.0) -> list[OutboxItem]:
        """Claim records due for export, now or within ``within_s`` (see `RedisOutbox.pending`)."""
        return await self.outbox.pending(limit, within_s)

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete exported records."""
        await asyncio.shield(self.outbox.release(item_ids))

    async def defer(self, item_ids: Sequence[int], delay_s: float) -> None:
        """Postpone records whose export failed."""
        await self.outbox.defer(item_ids, delay_s)

    async def stats(self) -> StoreStats:
        """Counts for the gauges: queued, in flight, dead, outbox, undecided traces."""
        k = self.keys
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xlen(k.jobs)
            pipe.zcard(k.delayed)
            pipe.xlen(k.dead)
            pipe.zcard(k.outbox)
            pipe.zcard(k.traces_open)
            pipe.xlen(k.forward)
            pipe.get(k.forward_bytes)
            jobs, delayed, dead, outbox, traces, forward, forward_bytes = await pipe.execute()
        try:
            summary = await self.client.xpending(k.jobs, GROUP)
            in_flight = int(summary["pending"])
        except Exception:
            in_flight = 0  # no group yet
        return StoreStats(queued=max(0, int(jobs) - in_flight) + int(delayed), in_flight=in_flight,
                          dead=int(dead), outbox=int(outbox), traces=int(traces),
                          forward_requests=int(forward), forward_bytes=int(forward_bytes or 0))

    async def totals(self) -> dict[str, float]:
        """The deployment's totals (`collector.store.redis.totals`): field -> amount."""
        return await read_totals(self.client, self.keys.totals)

    def sink_outbox(self, sink: str) -> RedisSinkOutbox:
        """The outbox of one configured sink (shared by every replica of the deployment).

        Example:
            >>> RedisStore("redis://127.0.0.1:6379/0", sinks=["mlflow"]).sink_outbox("mlflow").sink
            'mlflow'
        """
        return RedisSinkOutbox(self.client, self.keys, sink, lease_s=self._export_lease_s)

    async def delete_all(self) -> int:
        """Delete every key of this deployment (tests and teardown); returns how many.

        On a Cluster only the primary serving the deployment's slot holds its keys: only it
        is scanned (a Cluster-wide SCAN would also ask nodes that failed).
        """
        deleted = 0
        batch: list[bytes] = []
        node = await slot_primary(self.client, self.keys.jobs)
        where: dict[str, Any] = {} if node is None else {"target_nodes": node}
        async for key in self.client.scan_iter(match=self.keys.pattern, count=1000, **where):
            batch.append(key)
            if len(batch) >= 500:
                deleted += await self.client.delete(*batch)
                batch = []
        if batch:
            deleted += await self.client.delete(*batch)
        return deleted
