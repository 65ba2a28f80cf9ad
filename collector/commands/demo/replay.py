"""Replay saved OTLP traces through the OpenTelemetry SDK's span exporters, as if emitted now.

A saved ``ExportTraceServiceRequest`` (``adapters.read_trace_file``: protobuf or OTLP/JSON)
becomes SDK `ReadableSpan` objects, which any SDK `SpanExporter` (the OTLP gRPC or HTTP
exporter) sends exactly as it sends an instrumented program's spans. On the way:

* trace and span ids are replaced by fresh random ones, consistently: a parent id, a link
  and every span of one trace map to the same new ids (one `IdRemap` may span several
  requests, so a trace split across files stays one trace). A replayed file is therefore a
  new trace, not a duplicate the daemon's idempotency keys would ignore;
* timestamps (span start and end, events) are shifted so the latest span ends now,
  keeping every duration and gap;
* resource, instrumentation scope, attributes (arrays and key-value lists included),
  events, links, kind, status and trace state are kept as they were.

Used by ``tracescore demo``; just as useful to replay captured traces into a daemon.

Example:
    >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    >>> from opentelemetry.proto.trace.v1.trace_pb2 import Span
    >>> request = ExportTraceServiceRequest()
    >>> _ = request.resource_spans.add().scope_spans.add().spans.add(
    ...     trace_id=b"\\x01" * 16, span_id=b"\\x02" * 8, name="chat", start_time_unix_nano=1,
    ...     end_time_unix_nano=2, kind=Span.SPAN_KIND_CLIENT)
    >>> memory = InMemorySpanExporter()
    >>> replay(request, memory).name
    'SUCCESS'
    >>> span = memory.get_finished_spans()[0]
    >>> (span.name, span.kind.name, span.context.trace_id != int("01" * 16, 16))
    ('chat', 'CLIENT', True)
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)

__all__ = ["IdRemap", "any_value", "attributes", "readable_spans", "replay"]

# OTLP span flags: bits 8 and 9 say whether the parent context was remote (proto trace.proto).
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200

# OTLP SpanKind (0 unspecified, 1 internal ... 5 consumer) -> the SDK's (internal = 0 ...).
_KINDS = {
    ProtoSpan.SPAN_KIND_UNSPECIFIED: SpanKind.INTERNAL,
    ProtoSpan.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    ProtoSpan.SPAN_KIND_SERVER: SpanKind.SERVER,
    ProtoSpan.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    ProtoSpan.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    ProtoSpan.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}


class IdRemap:
    """Old trace and span ids (bytes) -> fresh ones (ints), each old id always to the same new one.

    Args:
        generator: where new ids come from (default: the SDK's `RandomIdGenerator`).

    Example:
        >>> ids = IdRemap()
        >>> new = ids.trace_id(b"\\x01" * 16)
        >>> new == ids.trace_id(b"\\x01" * 16) != int("01" * 16, 16)
        True
        >>> ids.trace_hex("01" * 16) == format(new, "032x")
        True
        >>> ids.span_id(b"") is None
        True
    """

    def __init__(self, generator: IdGenerator | None = None) -> None:
        self._generator = generator or RandomIdGenerator()
        self._traces: dict[bytes, int] = {}
        self._spans: dict[bytes, int] = {}
        self._used: set[int] = set()

    def trace_id(self, old: bytes) -> int:
        """The new trace id for ``old`` (fresh on first sight).

        Example:
            >>> ids = IdRemap()
            >>> ids.trace_id(b"a" * 16) == ids.trace_id(b"a" * 16) != ids.trace_id(b"b" * 16)
            True
        """
        new = self._traces.get(old)
        if new is None:
            new = self._traces[old] = self._fresh(self._generator.generate_trace_id)
        return new

    def span_id(self, old: bytes) -> int | None:
        """The new span id for ``old`` (fresh on first sight); None for an empty id (no parent).

        Example:
            >>> ids = IdRemap()
            >>> ids.span_id(b"s" * 8) == ids.span_id(b"s" * 8)
            True
        """
        if not old:
            return None
        new = self._spans.get(old)
        if new is None:
            new = self._spans[old] = self._fresh(self._generator.generate_span_id)
        return new

    def trace_hex(self, old_hex: str) -> str:
        """`trace_id` on lowercase hex ids (as the adapters spell them).

        Example:
            >>> len(IdRemap().trace_hex("ab" * 16))
            32
        """
        return format(self.trace_id(bytes.fromhex(old_hex)), "032x")

    def span_hex(self, old_hex: str) -> str:
        """`span_id` on lowercase hex ids (as the adapters spell them).

        Example:
            >>> len(IdRemap().span_hex("cd" * 8))
            16
        """
        new = self.span_id(bytes.fromhex(old_hex))
        return "" if new is None else format(new, "016x")

    def _fresh(self, generate: Any) -> int:
        while True:
            candidate = int(generate())
            if candidate and candidate not in self._used:
                self._used.add(candidate)
                return candidate


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as an SDK attribute value (arrays as tuples, key-value lists as dicts).

    Example:
        >>> from opentelemetry.proto.common.v1.common_pb2 import ArrayValue
        >>> any_value(AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=3)])))
        (3,)
        >>> any_value(AnyValue(bytes_value=b"\\x00")), any_value(AnyValue()) is None
        (b'\\x00', True)
    """
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind)


def attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    """OTLP key-values as an attribute dict.

    Example:
        >>> attributes([KeyValue(key="k", value=AnyValue(string_value="v"))])
        {'k': 'v'}
    """
    return {kv.key: any_value(kv.value) for kv in pairs}


def _trace_state(header: str) -> TraceState:
    return TraceState.from_header([header]) if header else TraceState()


def readable_spans(request: ExportTraceServiceRequest, *, ids: IdRemap | None = None,
                   now_ns: int | None = None) -> list[ReadableSpan]:
    """Every span of ``request`` as an SDK `ReadableSpan`, with fresh ids and shifted times.

    Args:
        request: the saved request.
        ids: the id mapping to use and extend (default: a new one); pass the same one to
            every request of a trace split across requests.
        now_ns: when the latest span of the request ends (default: the current time). Each
            request is shifted on its own: give the parts of one trace the same ``now_ns``
            (or send them in one request) to keep the gaps between them.

    Example:
        >>> request = ExportTraceServiceRequest()
        >>> spans = request.resource_spans.add().scope_spans.add().spans
        >>> root = spans.add(trace_id=b"\\x01" * 16, span_id=b"\\x02" * 8, name="agent",
        ...                  start_time_unix_nano=100, end_time_unix_nano=400)
        >>> child = spans.add(trace_id=b"\\x01" * 16, span_id=b"\\x03" * 8, parent_span_id=b"\\x02" * 8,
        ...                   name="chat", start_time_unix_nano=200, end_time_unix_nano=300)
        >>> agent, chat = readable_spans(request, now_ns=10_000)
        >>> chat.parent.span_id == agent.context.span_id, chat.context.trace_id == agent.context.trace_id
        (True, True)
        >>> (agent.start_time, agent.end_time, chat.start_time, chat.end_time)
        (9700, 10000, 9800, 9900)
    """
    ids = ids if ids is not None else IdRemap()
    latest = max((s.end_time_unix_nano for rs in request.resource_spans for ss in rs.scope_spans
                  for s in ss.spans), default=0)
    now = time.time_ns() if now_ns is None else now_ns
    shift = now - latest if latest else 0

    def moved(t: int) -> int:
        return t + shift if t else t

    out: list[ReadableSpan] = []
    for rs in request.resource_spans:
        resource = Resource(attributes(rs.resource.attributes), rs.schema_url or None)
        for ss in rs.scope_spans:
            scope = InstrumentationScope(
                ss.scope.name, ss.scope.version or None, ss.schema_url or None,
                attributes(ss.scope.attributes) or None,
            )
            for span in ss.spans:
                out.append(_span(span, resource, scope, ids, moved))
    return out


def _span(span: ProtoSpan, resource: Resource, scope: InstrumentationScope, ids: IdRemap,
          moved: Any) -> ReadableSpan:
    trace_id = ids.trace_id(span.trace_id)
    flags = TraceFlags(span.flags & 0xFF)
    state = _trace_state(span.trace_state)
    span_id = ids.span_id(span.span_id) or 0
    parent_id = ids.span_id(span.parent_span_id)
    parent = None
    if parent_id is not None:
        remote = bool(span.flags & _HAS_IS_REMOTE and span.flags & _IS_REMOTE)
        parent = SpanContext(trace_id, parent_id, is_remote=remote, trace_flags=flags)
    links = []
    for link in span.links:
        link_span = ids.span_id(link.span_id) or 0
        context = SpanContext(ids.trace_id(link.trace_id), link_span, is_remote=True,
                              trace_flags=TraceFlags(link.flags & 0xFF), trace_state=_trace_state(link.trace_state))
        links.append(Link(context, attributes(link.attributes)))
    code = StatusCode(span.status.code)
    status = Status(code, span.status.message or None) if code is StatusCode.ERROR else Status(code)
    return ReadableSpan(
        name=span.name,
        context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags, trace_state=state),
        parent=parent,
        resource=resource,
        attributes=attributes(span.attributes),
        events=[Event(e.name, attributes(e.attributes), moved(e.time_unix_nano)) for e in span.events],
        links=links,
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
        status=status,
        start_time=moved(span.start_time_unix_nano),
        end_time=moved(span.end_time_unix_nano),
        instrumentation_scope=scope,
    )


def replay(request: ExportTraceServiceRequest, exporter: SpanExporter, *, ids: IdRemap | None = None,
           now_ns: int | None = None) -> SpanExportResult:
    """Send the spans of ``request`` with ``exporter`` (blocking: run it off an event loop).

    Args:
        request: the saved request.
        exporter: an SDK span exporter, e.g. ``OTLPSpanExporter(endpoint="127.0.0.1:4317", insecure=True)``.
        ids: as in `readable_spans`.
        now_ns: as in `readable_spans`.

    Returns:
        What the exporter answered (``SUCCESS`` or ``FAILURE``).

    Example:
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        >>> replay(ExportTraceServiceRequest(), InMemorySpanExporter()).name
        'SUCCESS'
    """
    return exporter.export(readable_spans(request, ids=ids, now_ns=now_ns))
