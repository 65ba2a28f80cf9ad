"""OTLP protobuf -> `TraceSpan` / `TraceLog`, and grouping into `AssembledTrace`s.

Owned by the adapters; on the daemon's decision path, so conversion is a direct walk of
the protobuf objects (no ``json_format`` round trip). Bytes values become base64 text so
every attribute value is JSON-serialisable.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from adapters._trace import AssembledTrace, SpanEvent, TraceLog, TraceSpan

__all__ = [
    "any_value_to_python",
    "assemble",
    "attributes_to_dict",
    "logs_from_resource_logs",
    "spans_from_resource_spans",
]


def any_value_to_python(value: Any) -> Any:
    """Convert an OTLP ``AnyValue`` message to a Python value (None when unset).

    Example:
        >>> from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue
        >>> any_value_to_python(AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=3)])))
        [3]
    """
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return [any_value_to_python(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value_to_python(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None


def attributes_to_dict(key_values: Iterable[Any]) -> dict[str, Any]:
    """Convert a repeated ``KeyValue`` field to a dict (the last value of a repeated key wins).

    Example:
        >>> from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
        >>> attributes_to_dict([KeyValue(key="service.name", value=AnyValue(string_value="bot"))])
        {'service.name': 'bot'}
    """
    out: dict[str, Any] = {}
    for kv in key_values:
        value = kv.value
        # Text is most attributes' kind: read it without a call per value.
        out[kv.key] = value.string_value if value.WhichOneof("value") == "string_value" else any_value_to_python(value)
    return out


def spans_from_resource_spans(resource_spans: Iterable[Any]) -> list[TraceSpan]:
    """Decode the ``resource_spans`` of an ``ExportTraceServiceRequest`` into `TraceSpan`s.

    Example:
        >>> from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
        >>> rs = ResourceSpans(scope_spans=[ScopeSpans(spans=[
        ...     Span(trace_id=b"\\x01" * 16, span_id=b"\\x02" * 8, name="chat")])])
        >>> [(s.name, s.span_id, s.parent_span_id) for s in spans_from_resource_spans([rs])]
        [('chat', '0202020202020202', None)]
    """
    out: list[TraceSpan] = []
    for rs in resource_spans:
        resource = attributes_to_dict(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope_name = ss.scope.name
            scope_version = ss.scope.version
            for span in ss.spans:
                events = tuple(
                    SpanEvent(
                        name=ev.name,
                        time_ns=ev.time_unix_nano,
                        attributes=attributes_to_dict(ev.attributes),
                    )
                    for ev in span.events
                ) if span.events else ()
                out.append(
                    TraceSpan(  # positional, in field order: the decision path's hottest constructor
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex() or None,
                        span.name,
                        int(span.kind),
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        attributes_to_dict(span.attributes),
                        events,
                        int(span.status.code),
                        resource,
                        scope_name,
                        scope_version,
                        _parent_is_remote(span.flags),
                    )
                )
    return out


_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # OTLP SpanFlags: the context says whether the parent is remote


def _parent_is_remote(flags: int) -> bool | None:
    """Whether a span's parent lives in another process, as its OTLP flags say (None: they do not).

    Example:
        >>> _parent_is_remote(0x100), _parent_is_remote(0x300), _parent_is_remote(0)
        (False, True, None)
    """
    return bool(flags & _IS_REMOTE) if flags & _HAS_IS_REMOTE else None


def logs_from_resource_logs(resource_logs: Iterable[Any]) -> list[TraceLog]:
    """Decode the ``resource_logs`` of an ``ExportLogsServiceRequest``; records without a trace id are dropped.

    Example:
        >>> from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
        >>> rl = ResourceLogs(scope_logs=[ScopeLogs(log_records=[LogRecord(
        ...     trace_id=b"\\x01" * 16, span_id=b"\\x02" * 8, event_name="gen_ai.choice")])])
        >>> [(log.event_name, log.span_id) for log in logs_from_resource_logs([rl])]
        [('gen_ai.choice', '0202020202020202')]
    """
    out: list[TraceLog] = []
    for rl in resource_logs:
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                trace_id = rec.trace_id.hex()
                if not trace_id:
                    continue
                attributes = attributes_to_dict(rec.attributes)
                event_name = getattr(rec, "event_name", "") or ""
                if not event_name:
                    legacy = attributes.get("event.name")
                    event_name = legacy if isinstance(legacy, str) else ""
                out.append(
                    TraceLog(
                        trace_id=trace_id,
                        span_id=rec.span_id.hex() or None,
                        event_name=event_name,
                        time_ns=rec.time_unix_nano or rec.observed_time_unix_nano,
                        body=any_value_to_python(rec.body) if rec.HasField("body") else None,
                        attributes=attributes,
                    )
                )
    return out


def assemble(spans: Iterable[TraceSpan], logs: Iterable[TraceLog] = ()) -> list[AssembledTrace]:
    """Group spans (and the log records of the same traces) into one `AssembledTrace` per trace id.

    Traces come out in order of first appearance; log records of traces without spans are
    dropped.

    Example:
        >>> a = TraceSpan("a" * 32, "1" * 16, None, "x")
        >>> b = TraceSpan("b" * 32, "2" * 16, None, "y")
        >>> [(t.trace_id[:1], len(t.spans)) for t in assemble([a, b, a])]
        [('a', 2), ('b', 1)]
    """
    by_trace: dict[str, list[TraceSpan]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    logs_by_trace: Mapping[str, list[TraceLog]] = {}
    grouped: dict[str, list[TraceLog]] = {}
    for log in logs:
        if log.trace_id in by_trace:
            grouped.setdefault(log.trace_id, []).append(log)
    logs_by_trace = grouped
    return [
        AssembledTrace(trace_id=tid, spans=tuple(ss), logs=tuple(logs_by_trace.get(tid, ())))
        for tid, ss in by_trace.items()
    ]
