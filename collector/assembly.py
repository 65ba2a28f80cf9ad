"""Trace assembly: received spans -> durable per-trace buffer -> decided runs -> score jobs.

`TraceAssembler.consume_traces` splits a request by trace and appends it to the
`TraceBuffer` (durable) before returning, so a receiver answers success only for data
that survives a crash. A trace holding a run candidate is decided ``decision_wait`` after
its latest candidate arrived: the adapters turn it into runs, each registered scorer
whose filter matches and whose sampling admits the trace becomes a `ScoreJob`, and the
trace is forgotten only after its jobs are queued (queueing is idempotent, so a
decision interrupted by a crash is simply made again after the restart).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData, ResourceLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, TracesData

from collector._aio import wait_event
from collector.assembly_types import AppendResult, TraceChunk
from collector.consumer import Accepted
from collector.errors import QueueFull, Unavailable
from collector.metrics import Metrics
from collector.queue import JobQueue, RunRecord, ScoreJob
from collector.registry import ScorerRegistry

logger = logging.getLogger(__name__)


class TraceBuffer(Protocol):
    """Durable per-trace span storage (the queue's store).

    Example:
        >>> TraceBuffer.__name__
        'TraceBuffer'
    """

    async def append(self, chunks: Sequence[TraceChunk]) -> AppendResult: ...

    async def due(self, limit: int) -> tuple[list[bytes], int]: ...

    async def load(self, trace_id: bytes) -> list[TraceChunk]: ...

    async def finish(self, trace_id: bytes) -> None: ...


def _varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (``tag`` is the whole first byte: number << 3 | 2)."""
    return bytes((tag,)) + _varint(len(payload)) + payload


_NO_TRACE = bytes(16)
_HEADERS_UP_TO = 1 << 14
# The tag and length of a ``spans`` field (ScopeSpans field 2) for every length below 16 KiB.
_SPAN_HEADERS = [b"\x12" + _varint(size) for size in range(_HEADERS_UP_TO)]
_RESOURCE_HEADERS = [b"\x0a" + _varint(size) for size in range(_HEADERS_UP_TO)]


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift, pos = byte & 0x7F, 7, pos + 1
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _embedded(buf: bytes, start: int, end: int, number: int) -> list[tuple[int, int]]:
    """Where each length-delimited field ``number`` of the message in ``buf[start:end]`` lies."""
    out = []
    pos = start
    while pos < end:
        tag, pos = _read_varint(buf, pos)
        wire = tag & 7
        if wire == 2:
            size, pos = _read_varint(buf, pos)
            if tag >> 3 == number:
                out.append((pos, pos + size))
            pos += size
        elif wire == 0:
            pos = _read_varint(buf, pos)[1]
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")
    if pos != end:
        raise ValueError("field runs past its message")
    return out


def span_bytes(raw: bytes) -> list[list[list[bytes]]] | None:
    """Each span's bytes in an encoded ``ExportTraceServiceRequest`` (or ``TracesData``), per
    resource and scope, in order; None if ``raw`` is not well formed.

    Example:
        >>> from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span
        >>> span = Span(trace_id=b"\\x01" * 16, span_id=b"\\x02" * 8, name="a")
        >>> raw = TracesData(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
        >>> span_bytes(raw.SerializeToString()) == [[[span.SerializeToString()]]]
        True
        >>> span_bytes(b"\\x0a\\x05") is None
        True
    """
    try:
        return [
            [[raw[a:b] for a, b in _embedded(raw, s, e, 2)] for s, e in _embedded(raw, rs, re, 2)]
            for rs, re in _embedded(raw, 0, len(raw), 1)
        ]
    except (ValueError, IndexError):
        return None


def _head(tag: int, size: int) -> bytes:
    """The tag byte and length of a length-delimited field (``tag`` 0x0A or 0x12)."""
    if size < _HEADERS_UP_TO:
        return _SPAN_HEADERS[size] if tag == 0x12 else _RESOURCE_HEADERS[size]
    return bytes((tag,)) + _varint(size)


class _Keys:
    """A span's attribute keys, read only if iterated (most candidates are known by name)."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def __iter__(self) -> Iterator[str]:
        return (kv.key for kv in self._span.attributes)


def split_traces(
    resource_spans: Iterable[ResourceSpans], is_candidate: Callable[[str, Iterable[str]], bool],
    raw: bytes | None = None,
) -> tuple[list[TraceChunk], int]:
    """Cut resource spans into one serialised `TracesData` chunk per trace id.

    Returns the chunks and the number of spans rejected for invalid trace or span ids.
    No message is built per trace: each span is serialised once and a chunk is the
    concatenation of its spans' bytes, framed by its resource's and scopes' bytes (each
    serialised once per request). ``is_candidate(name, keys)`` gets the span's attribute
    keys lazily, so a span whose name decides is never walked; once a trace has a
    candidate, its other spans are not tested. ``raw``, the request's protobuf encoding
    (whose parse gave ``resource_spans``), lets spans be sliced out of it rather than
    serialised again.

    Example:
        >>> from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span
        >>> rs = ResourceSpans(scope_spans=[ScopeSpans(spans=[
        ...     Span(trace_id=b"\\x01" * 16, span_id=b"\\x02" * 8, name="a"),
        ...     Span(trace_id=b"\\x03" * 16, span_id=b"\\x04" * 8, name="b")])])
        >>> chunks, rejected = split_traces([rs], lambda name, keys: name == "b")
        >>> [(c.trace_id[:1], c.span_count, c.has_run_candidate) for c in chunks], rejected
        ([(b'\\x01', 1, False), (b'\\x03', 1, True)], 0)
        >>> TracesData.FromString(chunks[1].data).resource_spans[0].scope_spans[0].spans[0].name
        'b'
    """
    # trace id -> [slot, [framed span, ...], slot, [...], ...]: slots in order, each once
    grouped: dict[bytes, list[Any]] = {}
    candidates: set[bytes] = set()
    roots: set[bytes] = set()
    # per scope slot: (resource index, scope field, scope schema_url field)
    scopes: list[tuple[int, bytes, bytes]] = []
    resources: list[tuple[bytes, bytes]] = []  # (resource field, schema_url field)
    headers = _SPAN_HEADERS
    rejected = 0
    sources = list(resource_spans)
    encoded = span_bytes(raw) if raw is not None else None
    if encoded is not None and [[len(ss.spans) for ss in rs.scope_spans] for rs in sources] != [
            [len(spans) for spans in scopes] for scopes in encoded]:
        encoded = None  # not the encoding of these messages: serialise instead
    for ri, rs in enumerate(sources):
        resources.append((
            _field(0x0A, rs.resource.SerializeToString()) if rs.HasField("resource") else b"",
            _field(0x1A, rs.schema_url.encode()) if rs.schema_url else b"",
        ))
        for si, ss in enumerate(rs.scope_spans):
            slot = len(scopes)
            sliced = encoded[ri][si] if encoded is not None else None
            scopes.append((
                ri,
                _field(0x0A, ss.scope.SerializeToString()) if ss.HasField("scope") else b"",
                _field(0x1A, ss.schema_url.encode()) if ss.schema_url else b"",
            ))
            for k, span in enumerate(ss.spans):
                trace_id = span.trace_id
                if len(trace_id) != 16 or trace_id == _NO_TRACE or len(span.span_id) != 8:
                    rejected += 1
                    continue
                data = sliced[k] if sliced is not None else span.SerializeToString()
                size = len(data)
                framed = headers[size] + data if size < _HEADERS_UP_TO else b"\x12" + _varint(size) + data
                entry = grouped.get(trace_id)
                if entry is None:
                    grouped[trace_id] = [slot, [framed]]
                elif entry[-2] == slot:
                    entry[-1].append(framed)
                else:
                    entry += (slot, [framed])
                if not span.parent_span_id:
                    roots.add(trace_id)
                if trace_id not in candidates and is_candidate(span.name, _Keys(span)):
                    candidates.add(trace_id)
    chunks = []
    for trace_id, entry in grouped.items():
        if len(entry) == 2:  # the usual case: the trace's spans are in one scope
            slot, framed = entry
            ri, scope, scope_url = scopes[slot]
            resource, resource_url = resources[ri]
            inner = len(scope) + sum(map(len, framed)) + len(scope_url)
            scope_head = _head(0x12, inner)
            data = b"".join((
                _head(0x0A, len(resource) + len(scope_head) + inner + len(resource_url)),
                resource, scope_head, scope, *framed, scope_url, resource_url,
            ))
            count = len(framed)
        else:
            by_resource: dict[int, list[bytes]] = {}
            count = 0
            for i in range(0, len(entry), 2):
                ri, scope, scope_url = scopes[entry[i]]
                by_resource.setdefault(ri, []).append(_field(0x12, b"".join((scope, *entry[i + 1], scope_url))))
                count += len(entry[i + 1])
            data = b"".join(
                _field(0x0A, b"".join((resources[ri][0], *scope_fields, resources[ri][1])))
                for ri, scope_fields in by_resource.items()
            )
        chunks.append(TraceChunk(trace_id, "spans", data, count, trace_id in candidates, trace_id in roots))
    return chunks, rejected


def split_logs(resource_logs: Iterable[ResourceLogs]) -> list[TraceChunk]:
    """Cut resource logs into one serialised `LogsData` chunk per trace id (others dropped).

    Example:
        >>> from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ScopeLogs
        >>> rl = ResourceLogs(scope_logs=[ScopeLogs(log_records=[
        ...     LogRecord(trace_id=b"\\x01" * 16), LogRecord()])])
        >>> [(c.signal, c.span_count) for c in split_logs([rl])]
        [('logs', 0)]
    """
    grouped: dict[bytes, LogsData] = {}
    for rl in resource_logs:
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                if len(rec.trace_id) != 16:
                    continue
                data = grouped.setdefault(rec.trace_id, LogsData())
                out_rl = data.resource_logs.add(schema_url=rl.schema_url)
                out_rl.resource.CopyFrom(rl.resource)
                out_sl = out_rl.scope_logs.add(schema_url=sl.schema_url)
                out_sl.scope.CopyFrom(sl.scope)
                out_sl.log_records.append(rec)
    return [TraceChunk(tid, "logs", d.SerializeToString(), 0, False) for tid, d in grouped.items()]


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
        on_jobs: called after new jobs were queued (wakes the workers).

    Example:
        >>> TraceAssembler.consume_traces.__name__
        'consume_traces'
    """

    def __init__(
        self, buffer: TraceBuffer, queue: JobQueue, registry: ScorerRegistry, metrics: Metrics,
        adapters: Any, *, max_pending_jobs: int = 100_000, retry_after_s: float = 5.0,
        tick_s: float = 0.5, on_jobs: Callable[[], None] | None = None,
    ) -> None:
        self._buffer = buffer
        self._queue = queue
        self._registry = registry
        self._metrics = metrics
        self._adapters = adapters
        self._max_pending = max_pending_jobs
        self._retry_after = retry_after_s
        self._tick = tick_s
        self._on_jobs = on_jobs
        # Own thread for decoding and extraction: the default executor runs user scorers' sync steps.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracescore-decide")
        self._task: asyncio.Task[None] | None = None
        self._accepting = False
        self._wake: asyncio.Event | None = None

    async def start(self) -> None:
        """Start the decision loop (pending decisions of a previous process resume).

        Example:
            >>> TraceAssembler.start.__name__
            'start'
        """
        self._accepting = True
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="tracescore-assembly")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Stop accepting data and stop deciding; the buffer keeps what is pending.

        Example:
            >>> TraceAssembler.shutdown.__name__
            'shutdown'
        """
        self._accepting = False
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=timeout)  # its outcome (cancelled) is expected
            self._task = None
        await asyncio.to_thread(self._pool.shutdown, True)

    def _admit(self) -> None:
        if not self._accepting:
            raise Unavailable("not accepting data (starting or draining)")
        if self._queue.depth() >= self._max_pending:
            raise QueueFull("too many jobs waiting", retry_after_s=self._retry_after)

    async def _append(self, chunks: list[TraceChunk]) -> None:
        result = await self._buffer.append(chunks)
        if result.evicted_traces:
            self._metrics.traces_evicted.labels(reason="max_traces").inc(result.evicted_traces)
            logger.warning("trace buffer full: evicted %d traces", result.evicted_traces)
        if result.dropped_spans:
            self._metrics.spans_dropped.labels(reason="max_spans_per_trace").inc(result.dropped_spans)

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        """Store a trace request durably; returns spans accepted and rejected.

        ``raw``: the request's protobuf encoding, when the receiver has it (spans are then
        stored as received, not serialised again).

        Raises:
            QueueFull: when the daemon is full (the client should retry).
            Unavailable: when the daemon is not accepting data.

        Example:
            >>> TraceAssembler.consume_traces.__name__
            'consume_traces'
        """
        self._admit()
        is_candidate = self._adapters.is_run_candidate
        resource_spans = list(request.resource_spans)
        total = sum(len(ss.spans) for rs in resource_spans for ss in rs.scope_spans)
        if total > 512:  # large batches are cut off the loop
            chunks, rejected = await asyncio.get_running_loop().run_in_executor(
                self._pool, split_traces, resource_spans, is_candidate, raw)
        else:
            chunks, rejected = split_traces(resource_spans, is_candidate, raw)
        if chunks:
            await self._append(chunks)
            if any(c.has_run_candidate for c in chunks) and self._wake is not None:
                self._wake.set()
        message = f"{rejected} spans have an invalid trace or span id" if rejected else ""
        return Accepted(total - rejected, rejected, message)

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted:
        """Store the trace-linked log records of a logs request; returns records received.

        Example:
            >>> TraceAssembler.consume_logs.__name__
            'consume_logs'
        """
        self._admit()
        total = sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
        chunks = split_logs(request.resource_logs)
        if chunks:
            await self._append(chunks)
        return Accepted(total)

    async def _loop(self) -> None:
        wake = self._wake or asyncio.Event()
        while True:
            try:
                decided = await self.decide_due()
            except Exception:
                self._metrics.errors.labels(component="assembly").inc()
                logger.exception("trace decision failed; retrying")
                decided = 0
            if decided == 0:
                await wait_event(wake, self._tick)
                wake.clear()

    async def decide_due(self) -> int:
        """Decide every trace whose time has come; returns how many were decided.

        Example:
            >>> TraceAssembler.decide_due.__name__
            'decide_due'
        """
        # Bounded batch: a decided trace is held in memory whole (up to max_spans_per_trace spans).
        trace_ids, expired = await self._buffer.due(64)
        if expired:
            self._metrics.traces_evicted.labels(reason="no_run").inc(expired)
        if not trace_ids:
            return 0
        # Concurrent store calls are group-committed: one transaction per step, not per trace.
        loaded = await asyncio.gather(*(self._buffer.load(t) for t in trace_ids))
        jobs = await asyncio.get_running_loop().run_in_executor(
            self._pool, lambda: [job for t, c in zip(trace_ids, loaded, strict=True) for job in self._safe_jobs_for(t, c)]
        )
        if jobs:
            flags = await self._queue.put(jobs)
            for job, new in zip(jobs, flags, strict=True):
                reason = "queued" if new else "duplicate"
                self._metrics.decisions.labels(scorer=job.scorer_id, reason=reason).inc()
            if any(flags) and self._on_jobs is not None:
                self._on_jobs()
        await asyncio.gather(*(self._buffer.finish(t) for t in trace_ids))
        return len(trace_ids)

    def _safe_jobs_for(self, trace_id: bytes, chunks: list[TraceChunk]) -> list[ScoreJob]:
        # A trace that cannot be decided must not block the others (nor be retried forever).
        try:
            return self._jobs_for(trace_id, chunks)
        except Exception:
            self._metrics.errors.labels(component="assembly").inc()
            self._metrics.runs_skipped.labels(reason="trace_error").inc()
            logger.exception("deciding trace %s failed; it is skipped", trace_id.hex())
            return []

    def _jobs_for(self, trace_id: bytes, chunks: list[TraceChunk]) -> list[ScoreJob]:
        """Decode a trace, extract runs and match scorers (runs on a worker thread)."""
        ad = self._adapters
        resource_spans: list[Any] = []
        resource_logs: list[Any] = []
        for chunk in chunks:
            if chunk.signal == "spans":
                traces = TracesData()
                traces.ParseFromString(chunk.data)
                resource_spans.extend(traces.resource_spans)
            else:
                logs = LogsData()
                logs.ParseFromString(chunk.data)
                resource_logs.extend(logs.resource_logs)
        spans = ad.spans_from_resource_spans(resource_spans)
        if not spans:
            return []
        logs_list = ad.logs_from_resource_logs(resource_logs)
        trace = ad.AssembledTrace(trace_id=trace_id.hex(), spans=tuple(spans), logs=tuple(logs_list))
        extraction = ad.extract_runs(trace)
        for skip in extraction.skipped:
            self._metrics.runs_skipped.labels(reason=skip.reason).inc()
        by_id = {s.span_id: s for s in spans}
        jobs = []
        for run in extraction.runs:
            self._metrics.runs_found.labels(convention=run.convention or "unknown").inc()
            span = by_id.get(run.span_id)
            attributes = dict(span.attributes) if span is not None else {}
            ctx = dict(run.request_context or {})
            agent = ctx.get("agent_name") or attributes.get("gen_ai.agent.name")
            response_id = ctx.get("response_id") or attributes.get("gen_ai.response.id")
            record = RunRecord(
                trace_id=run.trace_id, span_id=run.span_id, span_name=run.span_name,
                service=run.service, convention=run.convention, start_ns=run.start_ns,
                end_ns=run.end_ns, input=run.input.model_dump(mode="json"),
                output=run.output.model_dump(mode="json"), request_context=ctx,
                response_id=str(response_id) if response_id else None,
                agent=str(agent) if agent else None,
            )
            for entry, decision in self._registry.decisions(
                trace_id=run.trace_id, service=run.service, agent=record.agent,
                span_name=run.span_name, attributes=attributes,
            ):
                if decision == "admitted":
                    jobs.append(ScoreJob(record, entry.scorer_id, entry.version))
                else:
                    self._metrics.decisions.labels(scorer=entry.scorer_id, reason=decision).inc()
        return jobs
