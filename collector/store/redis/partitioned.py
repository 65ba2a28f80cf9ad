"""`PartitionedRedisStore`: one deployment's store spread over N key partitions (a Redis Cluster
whose one slot per deployment would be a hot spot), and `open_redis_store`, which picks it.

Each partition is a whole `collector.store.redis.store.RedisStore` under its own hash tag
(`collector.store.redis.partitions`: names, and what goes where), all on one client. This
store routes every call: a trace's chunks, loads and decisions to its trace's partition; a
job's put, settlement and judge replies to its key's; a conversation's turns to its scope's.
Calls that gather (`take`, `due`, `pending`, `take_due_sessions`) ask every partition, a
different one first each time. The deployment's own keys (``home``) keep the forward log,
the judge ledger, the labels and the status board. Each partition's scripts touch one slot,
so the guarantees of `RedisStore` hold per partition unchanged: exactly-once effect by
idempotency keys, leases, atomic settlements, ``wait_replicas`` (each partition's writes wait
for its own primary's replicas). The bounds that are counts (``max_traces``, sessions'
``max_open``) are divided among the partitions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from redis.exceptions import OutOfMemoryError, ReadOnlyError

from collector.common.aio import cancel_and_wait
from collector.common.errors import UnreadableTrace
from collector.common.types import (
    AppendResult,
    LeasedJob,
    OutboxItem,
    Retry,
    ScoreJob,
    Settlement,
    StoreStats,
    TraceChunk,
)
from collector.store.interface import ForwardLog, SessionRules
from collector.store.redis.conn import UNREACHABLE
from collector.store.redis.partitioned_admin import (
    PartitionedSinkOutbox,
    lease_in_turn,
    parked_in,
    settle_partition_count,
)
from collector.store.redis.partitioned_sessions import PartitionedSessions
from collector.store.redis.partitions import PartitionMap, Rotation, partition_prefix
from collector.store.redis.shared import RedisShared
from collector.store.redis.store import RedisStore
from collector.store.totals import add

logger = logging.getLogger(__name__)
GATHER_S = 0.002
"""After the first read of a `PartitionedRedisStore.take` answers, how long the others may
still answer to be handed out with it (a read that answers later is handed out next time)."""
_UNAVAILABLE: tuple[type[Exception], ...] = (*UNREACHABLE, ReadOnlyError, OutOfMemoryError)
T = TypeVar("T")
R = TypeVar("R")


def open_redis_store(url: str, *, partitions: int = 1, **options: Any) -> RedisStore | PartitionedRedisStore:
    """The Redis store of a deployment: a `RedisStore` on its own keys with one partition,
    else a `PartitionedRedisStore` (``options`` are `RedisStore`'s).

    Example:
        >>> type(open_redis_store("redis://127.0.0.1:6379/0")).__name__
        'RedisStore'
        >>> open_redis_store("redis://127.0.0.1:6379/0", partitions=3, key_prefix="ts:").partitions[2].keys.jobs
        '{ts|p2|7}:jobs'
    """
    if partitions == 1:
        return RedisStore(url, **options)
    return PartitionedRedisStore(url, partitions=partitions, **options)


class PartitionedRedisStore(PartitionedSessions, RedisShared):
    """The store of a deployment over ``partitions`` key partitions (see the module).

    Args:
        url: the Redis URL (`RedisStore`).
        partitions: how many (2 to `collector.store.redis.partitions.MAX_PARTITIONS`).
        key_prefix: the deployment's prefix: its own keys, and the stem of each partition's tag.
        options: `RedisStore`'s other arguments, for every partition.

    Example:
        >>> import asyncio, uuid
        >>> from collector.common.types import Done, RunRecord, ScoreJob
        >>> async def demo():
        ...     store = PartitionedRedisStore("redis://127.0.0.1:6379/0", partitions=3,
        ...                                   key_prefix=f"doctest-{uuid.uuid4().hex}:", block_ms=0)
        ...     await store.start()
        ...     jobs = [ScoreJob(RunRecord(trace_id=f"{n:032x}", span_id="cd" * 8), "quality", "1") for n in range(9)]
        ...     first = await store.put(jobs + jobs[:1])  # each in its key's partition; the 10th a duplicate
        ...     leased = await store.take(9)  # a share of 9 from each partition at once
        ...     while len(leased) < 9:  # the rest of a partition holding more than its share
        ...         leased += await store.take(9 - len(leased))
        ...     await asyncio.gather(*(store.settle(job, Done(None)) for job in leased))
        ...     again = await store.put(jobs)
        ...     await store.delete_all()
        ...     await store.shutdown()
        ...     return first.count(True), len(leased), any(again)
        >>> asyncio.run(demo())
        (9, 9, False)
    """

    def __init__(self, url: str, *, partitions: int, key_prefix: str = "tracescore:",
                 max_traces: int = 100_000, session_rules: SessionRules | None = None,
                 forward: bool = False, sinks: Sequence[str] = (), **options: Any) -> None:
        if partitions < 2:
            raise ValueError(f"a partitioned store needs 2 partitions or more, got {partitions}")
        rules = session_rules or SessionRules()
        share = -(-rules.max_open // partitions)
        part_rules = dataclasses.replace(rules, max_open=share)
        self.session_rules = rules
        self.home = RedisStore(url, key_prefix=key_prefix, forward=forward, session_rules=rules,
                               check_partitions=False, **options)
        self.client, self.keys = self.home.client, self.home.keys
        self.partitions = [
            RedisStore(url, key_prefix=partition_prefix(key_prefix, i, partitions), client=self.client,
                       max_traces=-(-max_traces // partitions), session_rules=part_rules, sinks=sinks,
                       check_partitions=False, **options)
            for i in range(partitions)]
        self._map = PartitionMap(partitions)
        self._sinks = tuple(sinks)
        self._configured = key_prefix
        self._turns = Rotation(partitions)
        self._takes: list[asyncio.Task[list[LeasedJob]] | None] = [None] * partitions
        self._block_ms = int(options.get("block_ms", 500))

    # ---------------------------------------------------------------- routing helpers
    async def _scattered(self, items: Sequence[T], of: Callable[[T], int],
                         call: Callable[[RedisStore, list[T]], Awaitable[Sequence[R]]], missing: R) -> list[R]:
        """``call`` each partition with its share of ``items`` (``of`` names an item's), at once;
        the answers back in the order of ``items`` (``missing`` where none came)."""
        groups = self._map.group(range(len(items)), lambda n: of(items[n]))
        found = await asyncio.gather(*(call(self.partitions[p], [items[n] for n in some]) for p, some in groups.items()))
        out = [missing] * len(items)
        for some, answers in zip(groups.values(), found, strict=True):
            for n, answer in zip(some, answers, strict=True):
                out[n] = answer
        return out

    def _of_trace(self, trace_id: bytes) -> RedisStore:
        return self.partitions[self._map.of_trace(trace_id)]

    def _of_key(self, key: str) -> RedisStore:
        return self.partitions[self._map.of_key(key)]

    # ---------------------------------------------------------------------- lifecycle
    @property
    def forward_log(self) -> ForwardLog:
        """The deployment's forward log (one order for every partition)."""
        return self.home.forward_log

    @property
    def reachable(self) -> bool:
        """Whether the last refresh of every partition reached Redis."""
        return self.home.reachable and all(part.reachable for part in self.partitions)

    async def start(self) -> None:
        """Check (and record) the partition count, start the deployment's own keys and every partition.

        An unreachable Redis is not fatal (as for `RedisStore.start`); the count is then not checked.
        """
        try:
            await settle_partition_count(self.client, self._configured, len(self.partitions), self._sinks)
        except _UNAVAILABLE as err:
            logger.warning("redis unavailable at start: the partition count was not checked: %s", err)
        await self.home.start()
        await self._each(lambda part: part.start())

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Stop reading jobs (jobs read but not handed out go back at once), close every partition."""
        await self._hand_back_reads()
        await self._each(lambda part: part.shutdown(timeout))
        await self.home.shutdown(timeout)

    async def refresh(self) -> int:
        """Read every partition's depth from Redis now (see `RedisStore.refresh`)."""
        return sum(await self._each(lambda part: part.refresh()))

    async def delete_all(self) -> int:
        """Delete every key of the deployment, in every partition (tests and teardown)."""
        return sum(await self._each(lambda part: part.delete_all())) + await self.home.delete_all()

    # -------------------------------------------------------------------- trace buffer
    async def append(self, chunks: Sequence[TraceChunk], now: float | None = None, *,
                     forward: tuple[str, bytes] | None = None) -> AppendResult:
        """Add the request to the forward log first, then each trace's chunks to its partition."""
        if forward is not None:
            await self.home.append([], now, forward=forward)
        groups = self._map.group(chunks, lambda chunk: self._map.of_trace(chunk.trace_id))
        results = await asyncio.gather(*(self.partitions[p].append(some, now) for p, some in groups.items()))
        return AppendResult(evicted_traces=sum(r.evicted_traces for r in results),
                            dropped_spans=sum(r.dropped_spans for r in results))

    claims_due = True
    """`due` claims what it returns: a second call, before those are finished, returns others."""

    async def due(self, limit: int, now: float | None = None) -> tuple[list[bytes], int]:
        """Claim up to ``limit`` traces ready for a decision, from each partition in turn."""
        claimed: list[bytes] = []
        expired = 0
        for index in self._turns.next():
            if len(claimed) >= limit:
                break
            ids, lost = await self.partitions[index].due(limit - len(claimed), now)
            claimed += ids
            expired += lost
        return claimed, expired

    async def next_due(self) -> float | None:
        """The earliest time any partition may have a trace due."""
        times = [t for t in await self._each(lambda part: part.next_due()) if t is not None]
        return min(times) if times else None

    async def load(self, trace_id: bytes) -> list[TraceChunk]:
        """A trace's chunks, from its partition."""
        return await self._of_trace(trace_id).load(trace_id)

    async def load_many(self, trace_ids: Sequence[bytes]) -> list[list[TraceChunk] | UnreadableTrace]:
        """`load` for several traces: one round trip per partition, answers in the order asked."""
        nothing: list[TraceChunk] | UnreadableTrace = []  # every trace asked gets its own answer
        return await self._scattered(trace_ids, self._map.of_trace, lambda part, some: part.load_many(some), nothing)

    async def finish(self, trace_id: bytes) -> None:
        """Mark a trace decided, in its partition."""
        await self._of_trace(trace_id).finish(trace_id)

    async def finish_many(self, trace_ids: Sequence[bytes]) -> None:
        """Mark several traces decided: one script call per partition."""
        await self._grouped(trace_ids, self._map.of_trace, lambda part, some: part.finish_many(some))

    async def discard(self, trace_id: bytes, error: str) -> None:
        """Dead-letter an unreadable trace, in its partition."""
        await self._of_trace(trace_id).discard(trace_id, error)

    # ----------------------------------------------------------------------- job queue
    def depth(self) -> int:
        """Jobs, unexported records and undecided traces of every partition, as last refreshed."""
        return sum(part.depth() for part in self.partitions)

    async def put(self, jobs: Sequence[ScoreJob]) -> list[bool]:
        """Queue each job in its key's partition; a flag per job, in order (False: a duplicate)."""
        return await self._scattered(jobs, lambda job: self._map.of_key(job.key),
                                     lambda part, some: part.put(some), False)

    async def take(self, limit: int) -> list[LeasedJob]:
        """Lease up to about ``limit`` jobs from whichever partitions have them first.

        Each partition has one read in flight at most, asking for its share of ``limit`` and
        waiting (``block_ms``) on its stream when it has none; a read that answered empty is
        started again. This returns once reads brought jobs (with what the others bring within
        `GATHER_S`), or nothing after ``block_ms`` (at once, with ``block_ms`` 0, when every
        partition answered empty). Reads still waiting stay in flight for the next call, so a
        job in any partition is handed out at once. The jobs may pass ``limit`` by less than a
        share per partition; those a read brought are renewed with the caller's (`renew`)
        until a call hands them out. A read that failed is logged; it raises only when nothing
        was read.
        """
        share = max(1, -(-limit // len(self.partitions)))
        blocking = self._block_ms > 0
        until = time.monotonic() + self._block_ms / 1000
        answered: set[int] = set()  # partitions that answered empty (without blocking: not asked again)
        while True:
            for index in self._turns.next():
                if self._takes[index] is None and (blocking or index not in answered):
                    self._takes[index] = asyncio.create_task(self.partitions[index].take(share),
                                                             name=f"tracescore-take-p{index}")
            reads = [t for t in self._takes if t is not None]
            if not reads:
                return []  # without blocking: every partition answered empty
            left = max(0.0, until - time.monotonic()) if blocking else None
            await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED, timeout=left)
            taken, failure, finished = self._collect_reads()
            answered |= finished
            if taken or failure is not None:
                break
            if blocking and time.monotonic() >= until:
                return []
        waiting = [t for t in self._takes if t is not None]
        if waiting:
            await asyncio.wait(waiting, timeout=GATHER_S)
            more, later, _ = self._collect_reads()
            taken, failure = taken + more, failure or later
        if failure is not None and not taken:
            raise failure
        return taken

    def _collect_reads(self) -> tuple[list[LeasedJob], BaseException | None, set[int]]:
        """The jobs of the reads that finished, the error of one that failed, and their partitions."""
        taken: list[LeasedJob] = []
        failure: BaseException | None = None
        finished: set[int] = set()
        for index, task in enumerate(self._takes):
            if task is None or not task.done():
                continue
            self._takes[index] = None
            finished.add(index)
            if task.cancelled():
                continue
            if (error := task.exception()) is not None:
                logger.error("taking jobs from partition %d failed", index, exc_info=error)
                failure = error
                continue
            taken += task.result()
        return taken, failure, finished

    @staticmethod
    def _read_jobs(reads: Sequence[asyncio.Task[list[LeasedJob]] | None]) -> list[LeasedJob]:
        """The jobs of the reads that finished with some (not handed out yet)."""
        return [job for task in reads if task is not None and task.done() and not task.cancelled()
                and task.exception() is None for job in task.result()]

    async def _hand_back_reads(self) -> None:
        """Stop the reads in flight; jobs a finished read leased go back to their queue at once."""
        reads = [t for t in self._takes if t is not None]
        self._takes = [None] * len(self.partitions)
        await cancel_and_wait([t for t in reads if not t.done()])
        for leased in self._read_jobs(reads):
            try:
                await self._of_key(leased.job.key).settle(leased, Retry(0.0, "worker shut down"))
            except Exception:
                logger.warning("handing job %s back failed; it returns after its lease", leased.job.key, exc_info=True)

    async def renew(self, leased: Sequence[LeasedJob]) -> int:
        """Renew leases in each job's partition, and those of jobs a finished read holds for the
        next `take` (a worker with no free slot takes none meanwhile); returns how many of
        ``leased`` are still held."""
        held = self._read_jobs(self._takes)
        groups = self._map.group(leased, lambda job: self._map.of_key(job.job.key))
        waiting = self._map.group(held, lambda job: self._map.of_key(job.job.key))
        kept, _ = await asyncio.gather(
            asyncio.gather(*(self.partitions[p].renew(some) for p, some in groups.items())),
            asyncio.gather(*(self.partitions[p].renew(some) for p, some in waiting.items())))
        return sum(kept)

    async def settle(self, leased: LeasedJob, outcome: Settlement) -> None:
        """Settle a job in its partition (with its outbox record, atomically)."""
        await self._of_key(leased.job.key).settle(leased, outcome)

    async def prune(self, older_than_s: float, now: float | None = None) -> int:
        """Drop old dead letters in every partition; returns how many."""
        return sum(await self._each(lambda part: part.prune(older_than_s, now)))

    async def dead_letters(self) -> list[dict[str, object]]:
        """Every partition's dead letters (as `RedisStore.dead_letters`)."""
        return [letter for letters in await self._each(lambda part: part.dead_letters()) for letter in letters]

    async def stats(self) -> StoreStats:
        """The gauges' counts, summed over the partitions; the forward log's from the deployment's keys."""
        parts = await self._each(lambda part: part.stats())
        forward = await self.forward_log.forward_state()
        return StoreStats(
            queued=sum(s.queued for s in parts), in_flight=sum(s.in_flight for s in parts),
            dead=sum(s.dead for s in parts), outbox=sum(s.outbox for s in parts),
            traces=sum(s.traces for s in parts), forward_requests=forward.requests, forward_bytes=forward.bytes)

    async def totals(self) -> dict[str, float]:
        """The totals of every partition (settlements) and of the deployment's keys (judge calls), summed."""
        return add({}, await asyncio.gather(self.home.totals(), *(part.totals() for part in self.partitions)))

    # ------------------------------------------------------------------- judge replies
    async def judge_replies(self, job_key: str) -> dict[str, str]:
        """The judge replies kept for a job, in its partition."""
        return await self._of_key(job_key).judge_replies(job_key)

    async def keep_judge_reply(self, job_key: str, request_key: str, reply: str) -> None:
        """Keep a judge reply in the job's partition."""
        await self._of_key(job_key).keep_judge_reply(job_key, request_key, reply)

    async def parked_jobs(self) -> dict[str, int]:
        """Jobs parked now, per reason, in every partition."""
        return await parked_in(self.client, [part.keys for part in self.partitions])

    async def wake_parked_jobs(self, reason: str) -> int:
        """Make the jobs parked for ``reason`` due now, in every partition."""
        return sum(await self._each(lambda part: part.wake_parked_jobs(reason)))

    # -------------------------------------------------------------------------- outbox
    async def pending(self, limit: int, within_s: float = 0.0) -> list[OutboxItem]:
        """Lease records for export from each partition in turn; ids carry their partition."""
        return await lease_in_turn(self._turns.next(), limit, self._map,
                                   lambda index, left: self.partitions[index].pending(left, within_s))

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete exported records, in their partitions."""
        groups = self._map.items_by_partition(item_ids)
        await asyncio.gather(*(self.partitions[p].release(local) for p, local in groups.items()))

    async def defer(self, item_ids: Sequence[int], delay_s: float) -> None:
        """Postpone records whose export failed, in their partitions."""
        groups = self._map.items_by_partition(item_ids)
        await asyncio.gather(*(self.partitions[p].defer(local, delay_s) for p, local in groups.items()))

    def sink_outbox(self, sink: str) -> PartitionedSinkOutbox:
        """One configured sink's outbox over every partition."""
        return PartitionedSinkOutbox([part.sink_outbox(sink) for part in self.partitions])
