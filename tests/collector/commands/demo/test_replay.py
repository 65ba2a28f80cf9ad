"""`collector.commands.demo.replay`: saved OTLP requests replayed with the SDK's exporters, decoded by real receivers.

Every check decodes what the OpenTelemetry SDK's OTLP exporter put on the wire, as the
daemon's own gRPC and HTTP receivers got it (no mocks between exporter and receiver).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.trace.export import SpanExporter
from repo_paths import FIXTURES

import adapters
from collector.commands.demo.replay import IdRemap, attributes, replay
from collector.common.metrics import Metrics
from collector.receive.consumer import Accepted
from collector.receive.grpc import GrpcReceiver
from collector.receive.http import HttpReceiver

TRACE_FILES = sorted(p for p in FIXTURES.glob("*/*.pb") if not adapters.is_logs_file(p.name))
NOW = 1_900_000_000_000_000_000


class Recorder:
    """A receiver consumer that keeps every request."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        self.requests.append(request)
        return Accepted(sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans))

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted:
        return Accepted(0)


class Wire:
    """A daemon receiver (gRPC or HTTP) on a free port and an SDK exporter pointed at it."""

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.recorder = Recorder()
        self.receiver: GrpcReceiver | HttpReceiver
        if transport == "grpc":
            self.receiver = GrpcReceiver("127.0.0.1:0", self.recorder, Metrics())
        else:
            self.receiver = HttpReceiver("127.0.0.1:0", self.recorder, Metrics())

    def exporter(self) -> SpanExporter:
        if self.transport == "grpc":
            return GrpcExporter(endpoint=f"127.0.0.1:{self.receiver.port}", insecure=True, timeout=5)
        return HttpExporter(endpoint=f"http://127.0.0.1:{self.receiver.port}/v1/traces", timeout=5)

    async def send(self, request: ExportTraceServiceRequest, ids: IdRemap,
                   now_ns: int = NOW) -> ExportTraceServiceRequest:
        """Replay ``request``; return what the receiver decoded (all requests merged)."""
        exporter = self.exporter()
        before = len(self.recorder.requests)
        try:
            result = await asyncio.to_thread(replay, request, exporter, ids=ids, now_ns=now_ns)
        finally:
            exporter.shutdown()
        assert result.name == "SUCCESS"
        merged = ExportTraceServiceRequest()
        for received in self.recorder.requests[before:]:
            merged.resource_spans.extend(received.resource_spans)
        return merged


@pytest.fixture(params=["grpc", "http"])
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    w = Wire(request.param)
    await w.receiver.start()
    yield w
    await w.receiver.shutdown(1.0)


def _spans(request: ExportTraceServiceRequest) -> list[tuple[dict[str, object], dict[str, object], Span]]:
    """(resource attributes, scope description, span) for every span."""
    out = []
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            scope = {"name": ss.scope.name, "version": ss.scope.version, "schema_url": ss.schema_url,
                     "attributes": attributes(ss.scope.attributes)}
            out.extend((attributes(rs.resource.attributes), scope, span) for span in ss.spans)
    return out


def _latest_end(request: ExportTraceServiceRequest) -> int:
    return max(span.end_time_unix_nano for _, _, span in _spans(request))


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
async def test_a_capture_arrives_with_new_ids_and_everything_else_kept(wire: Wire, path: Path) -> None:
    original = adapters.read_trace_file(str(path))
    ids = IdRemap()
    received = await wire.send(original, ids)

    sent = _spans(original)
    got = {span.span_id: (resource, scope, span) for resource, scope, span in _spans(received)}
    assert len(got) == len(sent)
    shift = NOW - _latest_end(original)
    old_ids = {span.span_id for _, _, span in sent} | {span.trace_id for _, _, span in sent}
    for resource, scope, span in sent:
        new_id = ids.span_id(span.span_id)
        assert new_id is not None
        g_resource, g_scope, g = got[new_id.to_bytes(8, "big")]
        assert g.span_id not in old_ids and g.trace_id not in old_ids
        assert g.trace_id == ids.trace_id(span.trace_id).to_bytes(16, "big")
        if span.parent_span_id:
            parent = ids.span_id(span.parent_span_id)
            assert parent is not None and g.parent_span_id == parent.to_bytes(8, "big")
        else:
            assert g.parent_span_id == b""
        assert (g_resource, g_scope) == (resource, scope)
        assert (g.name, g.kind, g.trace_state) == (span.name, span.kind, span.trace_state)
        assert attributes(g.attributes) == attributes(span.attributes)
        assert (g.status.code, g.status.message) == (
            span.status.code, span.status.message if span.status.code == Status.STATUS_CODE_ERROR else "")
        assert (g.start_time_unix_nano, g.end_time_unix_nano) == (
            span.start_time_unix_nano + shift, span.end_time_unix_nano + shift)
        assert [(e.name, e.time_unix_nano, attributes(e.attributes)) for e in g.events] == [
            (e.name, e.time_unix_nano + shift, attributes(e.attributes)) for e in span.events]
    # Every span of one original trace is in one new trace (parent links stay inside it).
    assert len({g.trace_id for _, _, g in _spans(received)}) == len({s.trace_id for _, _, s in sent})


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
async def test_the_adapters_find_the_same_runs_after_a_replay(wire: Wire, path: Path) -> None:
    original = adapters.read_trace_file(str(path))
    ids = IdRemap()
    received = await wire.send(original, ids)

    def runs(request: ExportTraceServiceRequest) -> list[adapters.AgentRun]:
        spans = adapters.spans_from_resource_spans(request.resource_spans)
        return [run for trace in adapters.assemble(spans) for run in adapters.extract_runs(trace).runs]

    before, after = runs(original), runs(received)
    assert [(ids.trace_hex(r.trace_id), ids.span_hex(r.span_id), r.span_name, r.service, r.convention)
            for r in before] == [(r.trace_id, r.span_id, r.span_name, r.service, r.convention) for r in after]
    assert [(r.input, r.output) for r in before] == [(r.input, r.output) for r in after]


def _value(**kind: object) -> AnyValue:
    return AnyValue(**kind)  # type: ignore[arg-type]


async def test_rich_values_links_and_split_traces_survive(wire: Wire) -> None:
    trace, other = b"\x01" * 16, b"\x09" * 16
    first, second = ExportTraceServiceRequest(), ExportTraceServiceRequest()
    rs = first.resource_spans.add()
    rs.resource.attributes.add(key="service.name", value=_value(string_value="bot"))
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = "lib", "1.2"
    root = ss.spans.add(trace_id=trace, span_id=b"\x02" * 8, name="agent", kind=Span.SPAN_KIND_SERVER,
                        start_time_unix_nano=100, end_time_unix_nano=1_000, trace_state="k=v",
                        status=Status(code=Status.STATUS_CODE_ERROR, message="boom"))
    root.attributes.extend([
        KeyValue(key="list", value=_value(array_value=ArrayValue(values=[_value(int_value=1), _value(int_value=2)]))),
        KeyValue(key="map", value=_value(kvlist_value=KeyValueList(values=[
            KeyValue(key="a", value=_value(double_value=0.5)), KeyValue(key="b", value=_value(bool_value=True))]))),
        KeyValue(key="raw", value=_value(bytes_value=b"\x00\xff")),
    ])
    link = root.links.add(trace_id=other, span_id=b"\x08" * 8)
    link.attributes.add(key="why", value=_value(string_value="follows"))
    # The child arrives in a second request, as a trace split across exports does.
    child = second.resource_spans.add().scope_spans.add().spans.add(
        trace_id=trace, span_id=b"\x03" * 8, parent_span_id=b"\x02" * 8, name="chat",
        kind=Span.SPAN_KIND_CLIENT, start_time_unix_nano=200, end_time_unix_nano=300)
    child.events.add(name="gen_ai.choice", time_unix_nano=250).attributes.add(
        key="index", value=_value(int_value=0))

    ids = IdRemap()
    got_root = _spans(await wire.send(first, ids))[0][2]
    got_child = _spans(await wire.send(second, ids, now_ns=NOW + 5))[0][2]

    assert attributes(got_root.attributes) == {"list": (1, 2), "map": {"a": 0.5, "b": True}, "raw": b"\x00\xff"}
    assert (got_root.kind, got_root.trace_state, got_root.status.message) == (Span.SPAN_KIND_SERVER, "k=v", "boom")
    (got_link,) = got_root.links
    assert got_link.trace_id == ids.trace_id(other).to_bytes(16, "big") != other
    assert (got_link.span_id.hex(), attributes(got_link.attributes)) == (ids.span_hex("08" * 8), {"why": "follows"})
    assert got_child.trace_id == got_root.trace_id and got_child.parent_span_id == got_root.span_id
    assert (got_child.start_time_unix_nano, got_child.end_time_unix_nano) == (NOW + 5 - 100, NOW + 5)
    assert [(e.name, e.time_unix_nano) for e in got_child.events] == [("gen_ai.choice", NOW + 5 - 50)]
    assert (got_root.start_time_unix_nano, got_root.end_time_unix_nano) == (NOW - 900, NOW)


async def test_each_replay_is_a_new_trace_ending_now(wire: Wire) -> None:
    original = adapters.read_trace_file(str(FIXTURES / "openai-v2" / "S1.pb"))
    before = time.time_ns()
    first = await wire.send(original, IdRemap(), now_ns=time.time_ns())
    second = await wire.send(original, IdRemap(), now_ns=time.time_ns())
    trace_ids = {span.trace_id for _, _, span in _spans(first)} | {span.trace_id for _, _, span in _spans(second)}
    assert len(trace_ids) == 2
    assert before <= _latest_end(first) <= _latest_end(second) <= time.time_ns()
