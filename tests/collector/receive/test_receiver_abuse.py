"""Odd bodies, slow and vanishing clients, floods of connections and unauthenticated big
messages, on both receivers over real loopback sockets (issue 13)."""

from __future__ import annotations

import asyncio
import gzip
import logging
import socket
import time
from collections.abc import AsyncIterator

import aiohttp
import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from collector.common.metrics import Metrics
from collector.receive.consumer import Accepted
from collector.receive.grpc import GrpcReceiver
from collector.receive.http import HttpReceiver

PB = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


class Recorder:
    """A TraceConsumer at the receiver boundary that records what reached it."""

    def __init__(self) -> None:
        self.traces: list[trace_service_pb2.ExportTraceServiceRequest] = []

    async def consume_traces(self, request: trace_service_pb2.ExportTraceServiceRequest,
                             raw: bytes | None = None) -> Accepted:
        self.traces.append(request)
        return Accepted(sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans))

    async def consume_logs(self, request: object) -> Accepted:
        return Accepted(0)


def _request(name: str, trace: int = 1) -> trace_service_pb2.ExportTraceServiceRequest:
    span = Span(trace_id=bytes([trace]) * 16, span_id=b"\x02" * 8, name=name)
    return trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
async def http() -> AsyncIterator[tuple[str, Recorder, Metrics, HttpReceiver]]:
    rec, metrics = Recorder(), Metrics()
    receiver = HttpReceiver("127.0.0.1:0", rec, metrics, max_body_bytes=1024 * 1024, max_connections=8,
                            header_timeout_s=0.5, body_timeout_s=1.0, keepalive_timeout_s=5.0)
    await receiver.start()
    yield f"http://127.0.0.1:{receiver.port}", rec, metrics, receiver
    await receiver.shutdown()


async def test_every_gzip_member_is_read_and_trailing_garbage_refused(
    http: tuple[str, Recorder, Metrics, HttpReceiver],
) -> None:
    url, rec, _, _ = http
    first, second = _request("first").SerializeToString(), _request("second", 3).SerializeToString()
    body = gzip.compress(first) + gzip.compress(second)  # protobuf: concatenation = one merged request
    gz = {**PB, "Content-Encoding": "gzip"}
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.post(f"{url}/v1/traces", data=body, headers=gz) as resp:
            assert resp.status == 200
        names = [s.name for rs in rec.traces[0].resource_spans for ss in rs.scope_spans for s in ss.spans]
        assert names == ["first", "second"]
        for tail in (b"garbage", b"\x1f\x8b", b"\x00" * 10):
            async with session.post(f"{url}/v1/traces", data=gzip.compress(first) + tail, headers=gz) as resp:
                assert resp.status == 400, tail
    assert len(rec.traces) == 1


MALFORMED_JSON = [
    b'{"resourceSpans":' + b"[" * 700 + b"]" * 700 + b"}",  # nesting of ~700 levels
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":'
    + b'{"arrayValue":{"values":[' * 400 + b"{}" + b"]}}" * 400 + b"}]}}]}",
    b'{"\\ud800": 1}',  # a lone-surrogate key
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"\\udc00","value":{"stringValue":"x"}}]}}]}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",'
    b'"spanId":"eee19b7ec3c1b174","startTimeUnixNano":1e999}]}]}]}',  # 1e999 in an integer field
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"intValue":1e999}}]}}]}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":1e999}]}]}]}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"droppedAttributesCount":NaN}]}]}]}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}',
    b'{"resourceSpans": 5}', b"[1, 2]", b'"text"', b"\xff\xfe", b"{" * 100_000, b"",
]


async def test_malformed_json_of_any_shape_is_a_short_400_without_an_error_log(
    http: tuple[str, Recorder, Metrics, HttpReceiver], caplog: pytest.LogCaptureFixture,
) -> None:
    url, rec, metrics, _ = http
    caplog.set_level(logging.DEBUG, logger="collector")
    async with aiohttp.ClientSession() as session:
        for body in MALFORMED_JSON:
            async with session.post(f"{url}/v1/traces", data=body, headers=JSON) as resp:
                text = await resp.text()
                assert resp.status == 400, (body[:60], text)
                assert len(text) < 400 and "Traceback" not in text
        # A malformed 47-byte protobuf request: 400, and no ERROR traceback in the log.
        async with session.post(f"{url}/v1/traces", data=b"\x0a\x2d" + b"\xff" * 45, headers=PB) as resp:
            assert resp.status == 400
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert _sample(metrics, "tracescore_errors_total", component="receiver_http") == 0
    assert rec.traces == []


async def test_a_client_that_disconnects_mid_body_is_no_error(
    http: tuple[str, Recorder, Metrics, HttpReceiver], caplog: pytest.LogCaptureFixture,
) -> None:
    url, rec, metrics, receiver = http
    caplog.set_level(logging.DEBUG)
    head = (b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 100000\r\n\r\n")
    for _ in range(3):
        _, writer = await asyncio.open_connection("127.0.0.1", receiver.port)
        writer.write(head + b"\x0a" * 1000)
        await writer.drain()
        writer.close()
        await writer.wait_closed()
    deadline = time.monotonic() + 30
    while _sample(metrics, "tracescore_requests_refused_total", transport="http",
                  reason="client_disconnected") < 3:
        assert time.monotonic() < deadline, "the disconnects were not seen"
        await asyncio.sleep(0.02)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert _sample(metrics, "tracescore_errors_total", component="receiver_http") == 0
    assert rec.traces == []


async def test_slow_bodies_time_out_and_idle_connections_make_room(
    http: tuple[str, Recorder, Metrics, HttpReceiver],
) -> None:
    url, rec, metrics, receiver = http
    # Twice the cap of idle connections that never send a request (a slowloris).
    idle = []
    for _ in range(16):
        sock = socket.create_connection(("127.0.0.1", receiver.port))
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")  # headers never finished
        idle.append(sock)
    try:
        deadline = time.monotonic() + 30
        while _sample(metrics, "tracescore_requests_refused_total", transport="http",
                      reason="max_connections") < 8:  # the flood was accepted up to the cap
            assert time.monotonic() < deadline, "the idle connections were not accepted"
            await asyncio.sleep(0.02)
        # Served (not refused at the cap): an idle connection made room. The timeout only
        # detects a hang; a busy machine may take seconds.
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            async with session.post(f"{url}/v1/traces", data=_request("normal").SerializeToString(),
                                    headers=PB) as resp:
                assert resp.status == 200
        assert _sample(metrics, "tracescore_requests_refused_total", transport="http",
                       reason="max_connections") >= 9
        # A body that trickles in slower than body_timeout_s is answered 408.
        reader, writer = await asyncio.open_connection("127.0.0.1", receiver.port)
        writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                     b"Content-Length: 1000\r\n\r\n\x0a")
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 30)  # after body_timeout_s (1 s)
        assert status.startswith(b"HTTP/1.1 408"), status
        writer.close()
    finally:
        for sock in idle:
            sock.close()
    assert [r.resource_spans[0].scope_spans[0].spans[0].name for r in rec.traces] == ["normal"]


async def test_grpc_checks_the_token_before_reading_the_message() -> None:
    rec, metrics = Recorder(), Metrics()
    receiver = GrpcReceiver("127.0.0.1:0", rec, metrics, token="s3cret", max_body_bytes=20 * 1024 * 1024)
    await receiver.start()
    try:
        big = _request("x" * (16 * 1024 * 1024))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{receiver.port}", options=[
                ("grpc.max_send_message_length", 32 * 1024 * 1024)]) as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                         request_serializer=lambda m: m.SerializeToString(),
                                         response_deserializer=trace_service_pb2.ExportTraceServiceResponse.FromString)
            for metadata in ((), (("authorization", "Bearer wrong"),)):
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await export(big, metadata=metadata, timeout=30)
                assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
            ok = await export(_request("small"), metadata=(("authorization", "Bearer s3cret"),), timeout=30)
            assert ok == trace_service_pb2.ExportTraceServiceResponse()
    finally:
        await receiver.shutdown()
    assert [r.resource_spans[0].scope_spans[0].spans[0].name for r in rec.traces] == ["small"]
    assert _sample(metrics, "tracescore_requests_refused_total", transport="grpc", reason="Unauthenticated") == 2
