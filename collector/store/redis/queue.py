"""`RedisJobQueue`: the `JobQueue` on a Redis stream with a consumer group.

Invariants (the same as the SQLite queue's):

* `put` sets the job's idempotency key (``SET NX`` with a TTL) and adds the stream entry in one
  script: a key queued, completed or dead-lettered within the TTL is never queued again;
* `take` reads new entries with ``XREADGROUP``, and takes over entries idle longer than the
  visibility timeout with ``XAUTOCLAIM`` (a dead worker's jobs); an entry delivered more
  than ``max_attempts`` times goes to the dead-letter stream instead;
* a lease is (consumer, entry id, delivery count): `settle` checks in the same script that
  the entry is still pending for exactly that delivery, so a job taken over by another
  worker is settled once, by its current owner;
* `settle` with `Done`/`Dead` writes the outbox record, marks the key done (or dead),
  ``XACK``s and ``XDEL``s the entry atomically; `Retry` moves the job to a delayed set from
  which `take` re-queues it when due. Stream length is therefore the queue's depth.
* `Park` is a `Retry` that gives the take's attempt back and carries ``parked_since`` (the
  first park's time) with the job; the ``parked`` hash holds the job key and the reason of
  its last park until the job is settled otherwise or dead-lettered (the SQLite queue's
  ``park_reason``, `collector.store.sqlite.jobs`);
* every settle script adds the settlement's tally to the ``totals`` hash when it counts
  (`collector.store.totals`), in the same script.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from collector.common.judge_types import Park
from collector.common.types import (
    Dead,
    Done,
    LeasedJob,
    Retry,
    ScoreJob,
    Settlement,
    dead_letter_error,
)
from collector.store.redis import scripts
from collector.store.redis.conn import (
    UNREACHABLE,
    Backoff,
    Coalescer,
    is_cluster,
    retry_unreachable,
)
from collector.store.redis.job_json import job_json, parse_job
from collector.store.redis.keys import GROUP, RedisKeys
from collector.store.redis.recent import RecentRecords, record_text
from collector.store.totals import settlement_json

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _DoneSettle:
    """A job done, as its settle is queued for the batch script (`scripts.SETTLE_DONE`)."""

    consumer: str
    entry_id: str
    deliveries: str
    job_key: str
    record: str  # the outbox record's JSON, "" for none (not scorable)
    tally: str  # what it adds to the totals (`collector.store.totals.settlement_json`)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisJobQueue:
    """Score jobs on a Redis stream, leased through a consumer group.

    Args:
        client: the asyncio Redis client.
        keys: the deployment's keys.
        visibility_timeout_s: idle time after which another worker takes a leased job over.
        max_attempts: deliveries of one job before it is dead-lettered.
        idempotency_ttl_s: how long a job key is remembered (queued, done or dead).
        block_ms: how long `take` waits for new entries when none are ready.
        consumer: this process's consumer name in the group (default: unique).
        consumer_idle_s: consumers of the group idle this long holding no job are removed
            (workers that were killed or scaled away leave their names behind).

    Example:
        >>> import asyncio
        >>> from collector.store.redis.conn import connect
        >>> async def demo():
        ...     client = connect("redis://127.0.0.1:6379/0")
        ...     keys = RedisKeys(f"doctest-{uuid.uuid4().hex}:")
        ...     queue = RedisJobQueue(client, keys, block_ms=0)
        ...     await queue.create_group()
        ...     job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "quality", "1")
        ...     first = await queue.put([job, job])
        ...     leased = await queue.take(10)
        ...     await queue.settle(leased[0], Done(None))
        ...     again = await queue.put([job])
        ...     await client.delete(*[k async for k in client.scan_iter(keys.pattern)])
        ...     await client.aclose()
        ...     return first, len(leased), again
        >>> asyncio.run(demo())  # doctest: +SKIP
        ([True, False], 1, [False])
    """

    def __init__(
        self, client: aioredis.Redis, keys: RedisKeys, *, visibility_timeout_s: float = 300.0,
        max_attempts: int = 5, idempotency_ttl_s: float = 7 * 86400.0, block_ms: int = 500,
        consumer: str | None = None, consumer_idle_s: float = 3600.0,
    ) -> None:
        self._r = client
        self._cluster = is_cluster(client)
        self._k = keys
        self._visibility_ms = max(1, int(visibility_timeout_s * 1000))
        self._max_attempts = max_attempts
        self._ttl_ms = max(1000, int(idempotency_ttl_s * 1000))
        self._block_ms = block_ms
        self.consumer = consumer or f"worker-{uuid.uuid4().hex[:12]}"
        self._put = client.register_script(scripts.PUT)
        self._promote = client.register_script(scripts.PROMOTE)
        self._reclaim = client.register_script(scripts.RECLAIM)
        self._settle = client.register_script(scripts.SETTLE)
        self._settle_done = client.register_script(scripts.SETTLE_DONE)
        self._prune_consumers = client.register_script(scripts.PRUNE_CONSUMERS)
        self._renew = client.register_script(scripts.RENEW)
        self._consumer_idle_ms = int(consumer_idle_s * 1000)
        self._last_prune = time.monotonic()
        self._reclaim_every = min(5.0, max(0.05, visibility_timeout_s / 5))
        self._last_reclaim = 0.0
        self._take_backoff = Backoff("taking jobs", logger)
        self._settle_backoff = Backoff("settling a job", logger)
        self._put_backoff = Backoff("queueing jobs", logger)
        # Workers settle many jobs at once: the settles of one loop turn share a pipeline.
        self._settles: Coalescer[_DoneSettle | tuple[list[str], list[Any]], int] = Coalescer(self._settle_many)
        self._last_promote = 0.0
        self.depth_cache = 0
        self.sink_keys: list[str] = []  # (zset, data) per native sink: settle queues records there too
        self.recent: RecentRecords | None = None  # the records settled here, for the exporter (the store's)

    async def create_group(self) -> None:
        """Create the stream and its consumer group if missing (idempotent)."""
        try:
            await self._r.xgroup_create(self._k.jobs, GROUP, id="0", mkstream=True)
        except ResponseError as err:
            if "BUSYGROUP" not in str(err):
                raise

    def depth(self) -> int:
        """Jobs waiting or in flight plus unexported records, as last refreshed (never blocks).

        Example:
            >>> RedisJobQueue(aioredis.Redis(), RedisKeys()).depth()
            0
        """
        return self.depth_cache

    async def put(self, jobs: Sequence[ScoreJob], *, client: Any = None) -> list[bool]:
        """Queue jobs idempotently; False for a key already queued, done or dead. With ``client``
        (a pinned writer: `collector.store.redis.pinned`) the script goes on it, once."""
        if not jobs:
            return []
        args: list[Any] = [self._k.idem_prefix, self._ttl_ms]
        for job in jobs:
            args += [job.key, job_json(job)]
        if client is not None:
            reply = await self._put(keys=[self._k.jobs], args=args, client=client)
        else:  # safe to repeat: a key already set makes the second attempt a no-op
            reply = await retry_unreachable(lambda: self._put(keys=[self._k.jobs], args=args), self._put_backoff, 10.0)
        flags = [bool(f) for f in reply]
        self.depth_cache += sum(flags)
        return flags

    async def take(self, limit: int) -> list[LeasedJob]:
        """Lease up to ``limit`` jobs: due retries, jobs of dead workers, then new entries.

        While Redis is unreachable this waits with backoff and returns no jobs.
        """
        try:
            taken = await self._take(limit)
        except UNREACHABLE as err:
            await self._take_backoff.wait(err)
            return []
        except ResponseError as err:
            if "NOGROUP" not in str(err):
                raise
            logger.warning("job stream or group missing (Redis lost its data?): recreating")
            await self.create_group()
            return []
        self._take_backoff.reset()
        return taken

    async def _take(self, limit: int) -> list[LeasedJob]:
        now = time.time()
        if time.monotonic() - self._last_promote >= 0.05:  # retries are due at 50 ms granularity
            self._last_promote = time.monotonic()
            await self._promote(keys=[self._k.delayed, self._k.delayed_data, self._k.jobs], args=[now, limit])
        taken: list[LeasedJob] = []
        if time.monotonic() - self._last_prune >= 60.0:
            self._last_prune = time.monotonic()
            await self.prune_consumers()
        if time.monotonic() - self._last_reclaim >= self._reclaim_every:
            self._last_reclaim = time.monotonic()
            error = json.dumps({"type": "LeaseExpired", "message": "the job's lease ran out too many times"})
            entries, dead = await self._reclaim(
                keys=[self._k.jobs, self._k.dead, self._k.parked, self._k.totals],
                args=[GROUP, self.consumer, self._visibility_ms, limit, self._max_attempts,
                      self._k.idem_prefix, now, error, self._ttl_ms],
            )
            if dead:
                logger.warning("%d jobs dead-lettered after %d deliveries", dead, self._max_attempts)
            if len(entries) + int(dead) >= limit:
                self._last_reclaim = 0.0  # a full batch: more may be stalled, look again at the next take
            for entry_id, _key, payload, attempts, deliveries, since in entries:
                taken.append(self._leased(_s(entry_id), payload, int(attempts), int(deliveries), since))
        if len(taken) >= limit:
            return taken
        try:
            reply: Any = await self._r.xreadgroup(
                GROUP, self.consumer, {self._k.jobs: ">"}, count=limit - len(taken),
                block=None if taken or self._block_ms <= 0 else self._block_ms,
            )
        except UNREACHABLE:
            if taken:
                return taken  # run what was reclaimed rather than waiting another timeout for it
            raise
        for _stream, entries in reply or []:
            for entry_id, fields in entries:
                if not fields:
                    continue  # deleted while pending: nothing to run
                prior = int(fields.get(b"attempts", b"0"))
                taken.append(self._leased(_s(entry_id), fields[b"job"], prior + 1, 1, fields.get(b"parked_since")))
        return taken

    def _leased(self, entry_id: str, payload: str | bytes, attempt: int, deliveries: int,
                parked_since: bytes | None) -> LeasedJob:
        ms, _, seq = entry_id.partition("-")
        lease = f"{self.consumer}|{entry_id}|{deliveries}"
        since = float(parked_since) if parked_since else None
        return LeasedJob(parse_job(payload), (int(ms) << 20) | int(seq or 0), lease, attempt, since)

    async def settle(self, leased: LeasedJob, outcome: Settlement) -> None:
        """Complete, retry or dead-letter a leased job (atomically with its outbox record).

        Retries while Redis is unreachable, for up to the visibility timeout (after that the
        job belongs to whoever takes it over, and this result is dropped unsent). Settles
        made in one loop turn share one pipeline, and jobs done share one script call.
        """
        await self.settle_soon(leased, outcome)

    def settle_soon(self, leased: LeasedJob, outcome: Settlement) -> asyncio.Future[int]:
        """`settle`, queued for this loop turn's batch at once; the future holds the script's
        answer (-1: the lease was lost). The settle runs whether or not anyone waits for it, so
        a caller that must not cut it short shields the future (no task of its own per settle)."""
        consumer, entry_id, deliveries = leased.lease.split("|")
        job = leased.job
        if isinstance(outcome, Done):
            record = record_text(self.recent, outcome.record)
            tally = settlement_json(job, outcome)
            future = self._settles.submit(_DoneSettle(consumer, entry_id, deliveries, job.key, record, tally))
        else:
            future = self._settles.submit(self._general_settle(leased, outcome, consumer, entry_id, deliveries))
        future.add_done_callback(functools.partial(self._settled, job.key, not isinstance(outcome, Retry | Park)))
        return future

    def _settled(self, job_key: str, leaves_queue: bool, future: asyncio.Future[int]) -> None:
        """After a settle's script: say a lost lease, and count a job that left the queue."""
        if future.cancelled() or future.exception() is not None:
            return
        result = future.result()
        if result == -1:
            logger.info("lease of job %s lost to another worker; result dropped", job_key)
        elif leaves_queue:
            self.depth_cache = max(0, self.depth_cache - 1 + int(result))

    def _general_settle(self, leased: LeasedJob, outcome: Settlement, consumer: str, entry_id: str,
                        deliveries: str) -> tuple[list[str], list[Any]]:
        """The keys and arguments of the SETTLE script for a retry, a park or a dead letter."""
        job = leased.job
        now = time.time()
        kind, record, error, due_at, attempts, since, reason = "retry", "", "", 0.0, leased.attempt, "", ""
        if isinstance(outcome, Retry):
            due_at = now + outcome.delay_s
        elif isinstance(outcome, Park):  # this take is not an attempt; the first park's time is kept
            kind, due_at, attempts, reason = "park", now + outcome.delay_s, max(0, leased.attempt - 1), outcome.reason
            since = repr(leased.parked_since if leased.parked_since is not None else now)
        elif isinstance(outcome, Dead):
            kind = "dead"
            error = dead_letter_error(job, outcome)
            record = record_text(self.recent, outcome.record)
        k = self._k
        keys = [k.jobs, k.dead, k.delayed, k.delayed_data, k.outbox, k.outbox_data, k.outbox_seq,
                k.idem(job.key), k.replies(job.key), k.parked, k.totals, *self.sink_keys]
        args: list[Any] = [GROUP, entry_id, consumer, deliveries, kind, now, self._ttl_ms, record, job.key,
                           job_json(job), attempts, error, due_at, since, reason,
                           settlement_json(job, outcome)]
        return keys, args

    async def renew(self, leased: Sequence[LeasedJob]) -> int:
        """Renew the leases of jobs this worker still runs (its heartbeat); returns how many it holds.

        A lease renewed at least once per visibility timeout is never taken over, however
        long its job runs; a dead worker's leases stop being renewed and are taken over.
        """
        args: list[Any] = [GROUP, self.consumer]
        for job in leased:
            consumer, entry_id, deliveries = job.lease.split("|")
            if consumer == self.consumer:
                args += [entry_id, deliveries]
        if len(args) == 2:
            return 0
        return int(await self._renew(keys=[self._k.jobs], args=args))

    async def _settle_many(self, calls: list[_DoneSettle | tuple[list[str], list[Any]]]) -> list[int]:
        done: dict[str, list[int]] = {}  # consumer -> indexes of the calls settling jobs done
        for index, call in enumerate(calls):
            if isinstance(call, _DoneSettle):
                done.setdefault(call.consumer, []).append(index)
        k = self._k

        commands: list[tuple[Any, list[str], list[Any], list[int]]] = []  # script, keys, args, call indexes
        for consumer, indexes in done.items():
            keys = [k.jobs, k.outbox, k.outbox_data, k.outbox_seq, k.parked, k.totals, *self.sink_keys]
            args: list[Any] = [GROUP, consumer, time.time(), self._ttl_ms, len(self.sink_keys)]
            for index in indexes:
                call = calls[index]
                assert isinstance(call, _DoneSettle)
                keys += [k.idem(call.job_key), k.replies(call.job_key)]
                args += [call.entry_id, call.deliveries, call.record, call.job_key, call.tally]
            commands.append((self._settle_done, keys, args, indexes))
        for index, call in enumerate(calls):
            if not isinstance(call, _DoneSettle):
                commands.append((self._settle, call[0], call[1], [index]))

        async def run() -> list[int]:
            results = [0] * len(calls)
            if len(commands) == 1 or self._cluster:
                # The usual batch is one script call (a pipeline checks SCRIPT EXISTS first). A
                # Cluster pipeline does not load a script a new primary lacks after a takeover
                # (NOSCRIPT): there each call goes alone, and loads it when needed.
                replies = [await script(keys=keys, args=args) for script, keys, args, _ in commands]
            else:
                async with self._r.pipeline(transaction=False) as pipe:
                    for script, keys, args, _ in commands:
                        await script(keys=keys, args=args, client=pipe)
                    replies = await pipe.execute()
            order = [indexes for *_, indexes in commands]  # the call indexes each reply answers for
            for indexes, reply in zip(order, replies, strict=True):
                for index, value in zip(indexes, reply if isinstance(reply, list) else [reply], strict=True):
                    results[index] = int(value)
            return results

        # Safe to repeat: a settled entry is no longer pending, so a second attempt is a no-op.
        return await retry_unreachable(run, self._settle_backoff, self._visibility_ms / 1000)

    async def prune_consumers(self) -> int:
        """Remove the group's consumers that hold no job and were idle ``consumer_idle_s``."""
        removed = int(await self._prune_consumers(keys=[self._k.jobs], args=[GROUP, self._consumer_idle_ms, self.consumer]))
        if removed:
            logger.info("removed %d idle consumers from the job group", removed)
        return removed

    async def forget_consumer(self) -> None:
        """Remove this process's consumer from the group when it holds no jobs (shutdown)."""
        try:
            pending = await self._r.xpending_range(self._k.jobs, GROUP, "-", "+", 1, consumername=self.consumer)
            if not pending:
                await self._r.xgroup_delconsumer(self._k.jobs, GROUP, self.consumer)
        except (RedisConnectionError, RedisTimeoutError, OSError, ResponseError):
            logger.debug("could not remove consumer %s", self.consumer, exc_info=True)

    async def dead_letters(self) -> list[dict[str, object]]:
        """The dead-letter stream as dicts (key, error, attempts), oldest first."""
        rows: Any = await self._r.xrange(self._k.dead)
        return [{"key": _s(f[b"key"]), "error": json.loads(f[b"error"]), "attempts": int(f[b"attempts"])}
                for _id, f in rows]

