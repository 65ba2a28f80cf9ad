"""Cutting OTLP requests by trace: per-trace chunks, and the cheap per-trace summary.

`summarize_spans` is the ingest path: it reads only what the trace buffer needs (trace id,
span id, parent, name and, when the name does not decide, attribute keys) and leaves the
spans as the bytes they arrived in. `split_traces` and `split_logs` cut a request into one
serialised chunk per trace, for decisions (and for buffers that store chunks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from opentelemetry.proto.logs.v1.logs_pb2 import LogsData, ResourceLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

from collector.common.types import CANDIDATE, ROOT, TraceChunk

__all__ = ["CANDIDATE", "ROOT", "split_logs", "split_traces", "summarize_spans"]


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
        >>> from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, TracesData
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
        >>> from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, TracesData
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


def summarize_spans(
    resource_spans: Iterable[ResourceSpans], is_candidate: Callable[[str, Iterable[str]], bool],
) -> tuple[list[tuple[bytes, int, int]], int]:
    """Per trace id: (trace id, span count, flags), in order of first appearance; and the
    number of spans rejected for an invalid trace or span id.

    Flags: `CANDIDATE` when a span may be a run or LLM span, `ROOT` when a span has no
    parent. Nothing else is read. ``is_candidate(name, keys)`` must hold when the name alone
    decides (``is_candidate(name, ())``) or when a key does: names are tested first, for
    every span, and attribute keys are read only for spans of traces that no name made a
    candidate (in GenAI traces, almost none).

    Example:
        >>> from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span
        >>> rs = ResourceSpans(scope_spans=[ScopeSpans(spans=[
        ...     Span(trace_id=b"\\x01" * 16, span_id=b"\\x02" * 8, name="a"),
        ...     Span(trace_id=b"\\x01" * 16, span_id=b"\\x03" * 8, parent_span_id=b"\\x02" * 8, name="b"),
        ...     Span(trace_id=b"", span_id=b"\\x04" * 8)])])
        >>> summarize_spans([rs], lambda name, keys: name == "b")
        ([(b'\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01', 2, 3)], 1)
    """
    counts: dict[bytes, int] = {}
    candidates: set[bytes] = set()
    roots: set[bytes] = set()
    unnamed: list[tuple[bytes, Any]] = []  # spans whose name does not decide
    rejected = 0
    no_trace = _NO_TRACE
    for rs in resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                trace_id = span.trace_id
                if len(trace_id) != 16 or trace_id == no_trace or len(span.span_id) != 8:
                    rejected += 1
                    continue
                counts[trace_id] = counts.get(trace_id, 0) + 1
                if not span.parent_span_id:
                    roots.add(trace_id)
                if trace_id not in candidates:
                    if is_candidate(span.name, ()):
                        candidates.add(trace_id)
                    else:
                        unnamed.append((trace_id, span))
    for trace_id, span in unnamed:
        if trace_id not in candidates and is_candidate(span.name, _Keys(span)):
            candidates.add(trace_id)
    return [
        (t, n, (CANDIDATE if t in candidates else 0) | (ROOT if t in roots else 0)) for t, n in counts.items()
    ], rejected
