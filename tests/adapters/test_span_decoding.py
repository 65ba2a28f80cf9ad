"""OTLP protobuf -> `TraceSpan`: every field lands where the span carries it."""

from __future__ import annotations

from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from adapters._decode import attributes_to_dict, spans_from_resource_spans
from adapters._trace import SpanEvent, TraceSpan


def _kv(key: str, **value: object) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(**value))


def test_every_field_of_a_span_is_decoded_into_its_own_place() -> None:
    span = Span(
        trace_id=bytes(range(16)), span_id=bytes(range(8)), parent_span_id=bytes(range(8, 16)), name="chat",
        kind=Span.SPAN_KIND_CLIENT, start_time_unix_nano=11, end_time_unix_nano=22, flags=0x300,
        attributes=[_kv("gen_ai.operation.name", string_value="chat"), _kv("n", int_value=3)],
        events=[Span.Event(name="gen_ai.choice", time_unix_nano=15, attributes=[_kv("index", int_value=0)])],
        status=Status(code=Status.STATUS_CODE_ERROR),
    )
    resource_spans = ResourceSpans(
        resource=Resource(attributes=[_kv("service.name", string_value="bot")]),
        scope_spans=[ScopeSpans(scope=InstrumentationScope(name="scope-name", version="scope-version"), spans=[span])])
    [decoded] = spans_from_resource_spans([resource_spans])
    assert decoded == TraceSpan(
        trace_id=bytes(range(16)).hex(), span_id=bytes(range(8)).hex(), parent_span_id=bytes(range(8, 16)).hex(),
        name="chat", kind=Span.SPAN_KIND_CLIENT, start_ns=11, end_ns=22,
        attributes={"gen_ai.operation.name": "chat", "n": 3},
        events=(SpanEvent(name="gen_ai.choice", time_ns=15, attributes={"index": 0}),),
        status_code=Status.STATUS_CODE_ERROR, resource={"service.name": "bot"},
        scope_name="scope-name", scope_version="scope-version", parent_is_remote=True,
    )


def test_a_root_without_flags_has_no_parent_and_does_not_say_where_one_lives() -> None:
    [decoded] = spans_from_resource_spans([ResourceSpans(scope_spans=[ScopeSpans(spans=[
        Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="root")])])])
    assert (decoded.parent_span_id, decoded.parent_is_remote, decoded.events, decoded.resource) == (None, None, (), {})


def test_attribute_values_of_every_kind_are_read() -> None:
    values = attributes_to_dict([
        _kv("text", string_value="hi"), _kv("empty"), _kv("int", int_value=-4), _kv("bool", bool_value=True),
        _kv("float", double_value=0.5), _kv("bytes", bytes_value=b"\x00\xff"),
        _kv("list", array_value=ArrayValue(values=[AnyValue(string_value="a"), AnyValue(int_value=1)])),
        _kv("text", string_value="last wins"),
    ])
    assert values == {"text": "last wins", "empty": None, "int": -4, "bool": True, "float": 0.5, "bytes": "AP8=",
                      "list": ["a", 1]}
