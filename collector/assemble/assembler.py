"""Trace assembly: received spans -> durable per-trace buffer -> decided runs -> score jobs.

`TraceAssembler.consume_traces` appends a request to the `TraceBuffer` (durable) before
returning, so a receiver answers success only for data that survives a crash. A buffer
that keeps requests whole (`RequestBuffer`, the SQLite store) gets the request as received
and a per-trace summary (`collector.store.split.summarize_spans`: ids, parent, name, and keys only
when no name decides), so no attribute is walked on the ingest path; other buffers get
the request cut by trace. A trace holding a run candidate is decided ``decision_wait`` after
its latest candidate arrived: the adapters turn it into runs, each registered scorer
whose filter matches and whose sampling admits the trace becomes a `ScoreJob`, and the
trace is forgotten only after its jobs are queued (queueing is idempotent, so a
decision interrupted by a crash is simply made again after the restart).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, NamedTuple

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.assemble.decide import RunDecider, ScorerSelection
from collector.assemble.processes import DecisionProcesses
from collector.common.aio import cancel_and_wait, wait_event
from collector.common.errors import QueueFull, Unavailable, UnreadableTrace
from collector.common.metrics import Metrics
from collector.common.types import CANDIDATE, Accepted, AppendResult, TraceChunk
from collector.config import SessionsConfig
from collector.store.interface import ForwardLog, JobQueue, SessionLog, TraceBuffer
from collector.store.split import split_logs, split_traces, summarize_spans

logger = logging.getLogger(__name__)
_LOG_EVERY_S = 30.0  # a decision failure repeating every tick is logged this often


def sleep_before(next_at: float | None, tick: float) -> float:
    """How long a loop sleeps before its next due item (``next_at``, epoch seconds; None: none
    known): until then, at most ``tick`` (items other replicas add), never a busy loop.

    Example:
        >>> sleep_before(None, 0.5), sleep_before(time.time() + 60, 0.5), sleep_before(0.0, 0.5)
        (0.5, 0.5, 0.001)
    """
    if next_at is None:
        return tick
    return min(tick, max(0.001, next_at - time.time()))


class _Batch(NamedTuple):
    """Due traces claimed in one step: their ids, and the chunks of those that could be read."""

    trace_ids: list[bytes]
    loaded: list[tuple[bytes, list[TraceChunk]]]

    @property
    def read_ids(self) -> list[bytes]:
        """The ids of the traces that could be read (the ones decided and then finished)."""
        return [trace_id for trace_id, _ in self.loaded]


class TraceAssembler:
    """Buffers received spans per trace and turns decided traces into score jobs.

    Args:
        buffer: the durable trace buffer.
        queue: where jobs go.
        registry: the registered scorers.
        metrics: the service's instruments.
        adapters: the `adapters` module (or any object with ``is_run_candidate``,
            ``spans_from_resource_spans``, ``logs_from_resource_logs``, ``AssembledTrace``
            and ``extract_runs``).
        max_pending_jobs: refuse new data (retryably) when this many jobs and results wait.
        retry_after_s: the delay suggested to refused clients.
        tick_s: how often due traces are looked for.
        decision_wait: how long the buffer holds a trace after its root (or latest run) span
            arrived before it is decided: a turn noted now arrived this long ago, and its
            session's idle time counts from then (``[sessions] idle_s`` after the turn arrived).
        on_jobs: called after new jobs were queued (wakes the workers).
        sessions: the ``[sessions]`` settings (session keys, end marker).
        session_log: where the runs that are turns of a session are noted (SPEC §7), before
            their trace is forgotten; None: sessions are not tracked.
        on_turns: called after turns were noted, with whether one ended its session (wakes
            the session scheduler).
        decide_processes: read decided traces with the adapters in this many processes of their
            own (`collector.assemble.processes`); 0: on the assembler's thread.
    """

    def __init__(
        self, buffer: TraceBuffer, queue: JobQueue, registry: ScorerSelection, metrics: Metrics,
        adapters: Any, *, max_pending_jobs: int = 100_000, retry_after_s: float = 5.0,
        tick_s: float = 0.5, decision_wait: float = 0.0, on_jobs: Callable[[], None] | None = None,
        forward_log: ForwardLog | None = None,
        sessions: SessionsConfig | None = None, session_log: SessionLog | None = None,
        on_turns: Callable[[bool], None] | None = None, decide_processes: int = 0,
    ) -> None:
        self._buffer = buffer
        # Forwarding on: every request stored goes into the forward log in the same step, and
        # jobs carry the log's head at decision time (their scores are exported after it).
        self._forward_log = forward_log
        self._queue = queue
        self._decider = RunDecider(adapters, registry, metrics, sessions if session_log is not None else None)
        self._session_log = session_log
        self._on_turns = on_turns
        self._metrics = metrics
        self._adapters = adapters
        # Buffers that keep requests whole skip the per-trace cut on the ingest path.
        self._stores_requests = callable(getattr(buffer, "append_request", None))
        self._max_pending = max_pending_jobs
        self._retry_after = retry_after_s
        self._tick = tick_s
        self._decision_wait = decision_wait
        self._on_jobs = on_jobs
        # Own thread for decoding and extraction: the default executor runs user scorers' sync steps.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracescore-decide")
        # The adapters' reading of decided traces in processes of their own (another core).
        self._processes = DecisionProcesses(decide_processes, self._decider.reading) if decide_processes else None
        self._task: asyncio.Task[None] | None = None
        self._accepting = False
        self._wake: asyncio.Event | None = None
        self._last_logged = -math.inf

    async def start(self) -> None:
        """Start the decision loop (pending decisions of a previous process resume)."""
        if self._processes is not None:
            await self._processes.start()
        self._accepting = True
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="tracescore-assembly")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Stop accepting data and stop deciding; the buffer keeps what is pending."""
        self._accepting = False
        if self._task is not None:
            await cancel_and_wait([self._task], timeout)  # its outcome (cancelled) is expected
            self._task = None
        await asyncio.to_thread(self._pool.shutdown, True)
        if self._processes is not None:
            await self._processes.shutdown()

    def _admit(self) -> None:
        if not self._accepting:
            raise Unavailable("not accepting data (starting or draining)")
        if self._queue.depth() >= self._max_pending:
            raise QueueFull("too many jobs waiting", retry_after_s=self._retry_after)

    async def _append(self, chunks: list[TraceChunk]) -> int:
        return self._count(await self._buffer.append(chunks))

    def _count(self, result: AppendResult) -> int:
        """Count what the buffer gave up; returns the spans of this request it dropped."""
        if result.evicted_traces:
            self._metrics.traces_evicted.labels(reason="max_traces").inc(result.evicted_traces)
            logger.warning("trace buffer full: evicted %d traces", result.evicted_traces)
        if result.dropped_spans:
            self._metrics.spans_dropped.labels(reason="max_spans_per_trace").inc(result.dropped_spans)
        return result.dropped_spans

    @staticmethod
    def _accepted(total: int, rejected: int, dropped: int) -> Accepted:
        """OTLP partial success: invalid ids and spans over max_spans_per_trace are rejected."""
        problems = []
        if rejected:
            problems.append(f"{rejected} spans have an invalid trace or span id")
        if dropped:
            problems.append(f"{dropped} spans were dropped: their trace is over max_spans_per_trace")
        return Accepted(total - rejected - dropped, rejected + dropped, "; ".join(problems))

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        """Store a trace request durably; returns spans accepted and rejected.

        ``raw``: the request's protobuf encoding, when the receiver has it (spans are then
        stored as received, not serialised again).

        Raises:
            QueueFull: when the daemon is full (the client should retry).
            Unavailable: when the daemon is not accepting data.
        """
        self._admit()
        is_candidate = self._adapters.is_run_candidate
        resource_spans = list(request.resource_spans)
        total = sum(len(ss.spans) for rs in resource_spans for ss in rs.scope_spans)
        if self._stores_requests:
            return await self._consume_whole(request, raw, resource_spans, total)
        if total > 512:  # large batches are cut off the loop
            chunks, rejected = await asyncio.get_running_loop().run_in_executor(
                self._pool, split_traces, resource_spans, is_candidate, raw)
        else:
            chunks, rejected = split_traces(resource_spans, is_candidate, raw)
        dropped = 0
        if chunks:
            forward = None
            if self._forward_log is not None:
                forward = ("traces", raw if raw is not None else request.SerializeToString())
            dropped = self._count(await self._buffer.append(chunks, forward=forward))
            if any(c.has_run_candidate for c in chunks) and self._wake is not None:
                self._wake.set()
        return self._accepted(total, rejected, dropped)

    async def _consume_whole(
        self, request: ExportTraceServiceRequest, raw: bytes | None, resource_spans: list[Any], total: int,
    ) -> Accepted:
        """Store the request as received, with its per-trace summary (nothing else is decoded)."""
        is_candidate = self._adapters.is_run_candidate
        if total > 512:  # large batches are read off the loop
            entries, rejected = await asyncio.get_running_loop().run_in_executor(
                self._pool, summarize_spans, resource_spans, is_candidate)
        else:
            entries, rejected = summarize_spans(resource_spans, is_candidate)
        dropped = 0
        if entries:
            buffer: Any = self._buffer
            body = raw if raw is not None else request.SerializeToString()
            dropped = self._count(await buffer.append_request("spans", body, entries,
                                                              forward=self._forward_log is not None))
            if self._wake is not None and any(flags & CANDIDATE for _, _, flags in entries):
                self._wake.set()
        return self._accepted(total, rejected, dropped)

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted:
        """Store the trace-linked log records of a logs request; returns records received."""
        self._admit()
        total = sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
        chunks = split_logs(request.resource_logs)
        if self._forward_log is not None:  # logs not linked to a trace are forwarded too
            await self._buffer.append(chunks, forward=("logs", request.SerializeToString()))
        elif chunks:
            await self._append(chunks)
        return Accepted(total)

    async def _loop(self) -> None:
        """Decide due traces batch after batch. On a store that claims due traces (`claims_due`)
        this is a pipeline: the next batch is taken from the store while one is read, and a
        batch's jobs are queued while the next one is read (in decision order: a batch's jobs
        wait for the previous batch's). Reading is on the decision thread and the round trips
        on the loop, so neither waits for the other; two batches are held in memory at most."""
        wake = self._wake or asyncio.Event()
        pipelined = getattr(self._buffer, "claims_due", False) is True  # else a batch is taken once the last is finished
        ahead: asyncio.Task[_Batch] | None = None  # the next batch, taken while one is read
        queuing: asyncio.Task[None] | None = None  # the last batch's jobs and finish, while the next is read
        try:
            while True:
                decided = 0
                try:
                    if not pipelined:
                        decided = await self.decide_due()
                    else:
                        taking, ahead = ahead, None
                        batch = await (taking if taking is not None else self._take_due())
                        if batch.trace_ids:
                            ahead = asyncio.create_task(self._take_due())
                            decisions = await self._read(batch)
                            if queuing is not None:
                                await self._settled(queuing)
                            queuing = asyncio.create_task(self._commit(batch.read_ids, decisions))
                            decided = len(batch.trace_ids)
                except Exception as err:  # a batch taken ahead before the failure is decided next
                    self._failed(err)
                if decided == 0:
                    if queuing is not None:
                        await self._settled(queuing)
                        queuing = None
                    await wait_event(wake, await self._until_next_decision())
                    wake.clear()
        finally:
            await cancel_and_wait([t for t in (ahead, queuing) if t is not None], 5.0)

    async def _settled(self, task: asyncio.Task[None]) -> None:
        """Wait for a batch's jobs to be queued; a failure is logged (its traces are decided
        again once their claim runs out)."""
        try:
            await task
        except Exception as err:
            self._failed(err)

    def _failed(self, err: BaseException) -> None:
        self._metrics.errors.labels(component="assembly").inc()
        if time.monotonic() - self._last_logged >= _LOG_EVERY_S:  # a failing store fails every tick
            self._last_logged = time.monotonic()
            logger.error("trace decision failed; retrying (logged at most every %gs)", _LOG_EVERY_S, exc_info=err)

    async def _until_next_decision(self) -> float:
        """How long to sleep before looking for due traces again: until the next decision is due
        (so a run is decided on time, not up to a tick late), at most ``tick_s`` (traces of other
        receivers sharing the store; new ones of this receiver wake the loop at once)."""
        try:
            next_at = await self._buffer.next_due()
        except Exception:  # looked at again after the usual interval
            logger.debug("reading the next decision time failed", exc_info=True)
            return self._tick
        return sleep_before(next_at, self._tick)

    async def _discard(self, trace_id: bytes, err: UnreadableTrace) -> None:
        self._metrics.runs_skipped.labels(reason="trace_unreadable").inc()
        logger.warning("%s; dead-lettered", err)
        await self._buffer.discard(trace_id, str(err))

    async def decide_due(self) -> int:
        """Decide one batch of due traces (up to 64); returns how many were decided."""
        batch = await self._take_due()
        if not batch.trace_ids:
            return 0
        await self._commit(batch.read_ids, await self._read(batch))
        return len(batch.trace_ids)

    async def _take_due(self) -> _Batch:
        """Claim the traces whose time has come (a bounded batch: a decided trace is held in
        memory whole, up to max_spans_per_trace spans) and load them, in one round trip each."""
        trace_ids, expired = await self._buffer.due(64)
        if expired:
            self._metrics.traces_evicted.labels(reason="no_run").inc(expired)
        if not trace_ids:
            return _Batch([], [])
        results = await self._buffer.load_many(trace_ids)
        loaded: list[tuple[bytes, list[TraceChunk]]] = []
        for trace_id, result in zip(trace_ids, results, strict=True):
            if isinstance(result, UnreadableTrace):  # dead-lettered alone; the others are decided
                await self._discard(trace_id, result)
            else:
                loaded.append((trace_id, result))
        return _Batch(trace_ids, loaded)

    async def _read(self, batch: _Batch) -> list[Any]:
        """The batch's decisions, read by the adapters on the decision thread (or processes)."""
        readings = await self._processes.read(batch.loaded) if self._processes is not None else None
        decider, loaded = self._decider, batch.loaded
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, lambda: [decider.decide(t, c) for t, c in loaded] if readings is None
            else [decider.decide_read(t, r) for (t, _), r in zip(loaded, readings, strict=True)])

    async def _commit(self, trace_ids: list[bytes], decided: list[Any]) -> None:
        """Queue the jobs of a batch read (``trace_ids``: its traces, not their chunks, which are
        not held meanwhile), note its turns, and forget its traces (one round trip each)."""
        jobs = [job for d in decided for job in d.jobs]
        turns = [turn for d in decided for turn in d.turns]
        if (jobs or turns) and self._forward_log is not None:
            # Every span loaded above is in the forward log at or before its head now.
            mark = (await self._forward_log.forward_state()).head
            jobs = [replace(job, run=replace(job.run, forward_mark=mark)) for job in jobs]
            turns = [replace(turn, run=replace(turn.run, forward_mark=mark)) for turn in turns]
        if turns and self._session_log is not None:
            # Noted before the trace is forgotten: a crash in between decides it again (a turn
            # noted twice is one turn). A trace is decided decision_wait after its last span
            # arrived (later when decisions lag: idle then counts from no earlier than arrival).
            now = time.time()
            arrived = now - self._decision_wait
            await self._session_log.note_turns([replace(turn, arrived_at=arrived) for turn in turns], now)
            if self._on_turns is not None:
                self._on_turns(any(turn.ended for turn in turns))
        if jobs:
            flags = await self._queue.put(jobs)
            for job, new in zip(jobs, flags, strict=True):
                reason = "queued" if new else "duplicate"
                self._metrics.child(self._metrics.decisions, job.scorer_id, reason).inc()
            if any(flags) and self._on_jobs is not None:
                self._on_jobs()
        await self._buffer.finish_many(trace_ids)
