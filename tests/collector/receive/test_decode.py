"""Body decoding: content types, gzip with a cap (bombs), protobuf and OTLP/JSON."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from collector.common.errors import InvalidPayload, PayloadTooLarge, UnsupportedMediaType
from collector.receive.decode import decode_logs, decode_traces, decompress, encode_message


def _request() -> ExportTraceServiceRequest:
    span = Span(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="chat")
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])


def test_protobuf_plain_and_gzip() -> None:
    body = _request().SerializeToString()
    for data, enc in ((body, None), (gzip.compress(body), "gzip"), (zlib.compress(body), "deflate")):
        req, encoding = decode_traces(data, "application/x-protobuf", enc, 1 << 20)
        assert encoding == "protobuf"
        assert req.resource_spans[0].scope_spans[0].spans[0].name == "chat"


def test_json_uses_hex_ids() -> None:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": bytes(range(1, 17)).hex(), "spanId": bytes(range(1, 9)).hex(),
        "parentSpanId": "", "name": "chat", "kind": 3, "startTimeUnixNano": "12",
        "unknownFieldFromTheFuture": 1}]}]}]}
    req, encoding = decode_traces(json.dumps(doc).encode(), "application/json", None, 1 << 20)
    span = req.resource_spans[0].scope_spans[0].spans[0]
    assert encoding == "json"
    assert (span.trace_id, span.span_id, span.start_time_unix_nano) == (
        bytes(range(1, 17)), bytes(range(1, 9)), 12)


def test_gzip_bomb_is_refused_without_inflating() -> None:
    bomb = gzip.compress(b"\0" * (50 * 1024 * 1024))
    assert len(bomb) < 100_000
    with pytest.raises(PayloadTooLarge):
        decompress(bomb, "gzip", 1024 * 1024)


def test_errors() -> None:
    with pytest.raises(UnsupportedMediaType):
        decode_traces(b"", "text/plain", None, 100)
    with pytest.raises(UnsupportedMediaType):
        decode_traces(b"", "application/x-protobuf", "br", 100)
    with pytest.raises(InvalidPayload):
        decode_traces(b"\xff\xff\xff", "application/x-protobuf", None, 100)
    with pytest.raises(InvalidPayload):
        decode_traces(b"not gzip", "application/x-protobuf", "gzip", 100)
    with pytest.raises(InvalidPayload):
        decode_traces(b"{", "application/json", None, 100)
    with pytest.raises(InvalidPayload):
        decode_traces(b"[]", "application/json", None, 100)
    with pytest.raises(InvalidPayload):
        decode_traces(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
                      "application/json", None, 1000)
    with pytest.raises(InvalidPayload):
        decode_logs(b'{"resourceLogs": 3}', "application/json", None, 100)
    with pytest.raises(PayloadTooLarge):
        decode_traces(b"x" * 101, "application/x-protobuf", None, 100)
    with pytest.raises(InvalidPayload):
        decompress(gzip.compress(b"abcdef" * 100)[:-12], "gzip", 10_000)


def test_response_encodings() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    resp = ExportTraceServiceResponse()
    resp.partial_success.rejected_spans = 2
    assert json.loads(encode_message(resp, "json")) == {"partialSuccess": {"rejectedSpans": "2"}}
    assert ExportTraceServiceResponse.FromString(encode_message(resp, "protobuf")).partial_success.rejected_spans == 2
