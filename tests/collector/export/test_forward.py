"""Forwarding from the store's forward log: bodies unchanged and in order, kept through
retryable failures and restarts, a request refused for good dropped alone (counted), an
outage logged once with its endpoint and cause and again when it ends, and the endpoint's
own protocols (OTLP/HTTP and OTLP/gRPC servers on loopback)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from aiohttp import web
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from ports import hold_port  # tests/support

from collector.common.metrics import Metrics
from collector.config import ExportConfig
from collector.export.forward import Forwarder
from collector.store.sqlite.store import SqliteStore


class Backend:
    """An OTLP/HTTP endpoint answering from a script of status codes (then 200), refusing
    with 400 any request holding a span named ``bad``."""

    def __init__(self) -> None:
        self.script: list[int] = []
        self.names: list[str] = []  # span names accepted, in arrival order
        self.logs: list[bytes] = []
        self.keys: set[str] = set()

    async def traces(self, request: web.Request) -> web.Response:
        body = ExportTraceServiceRequest.FromString(await request.read())
        names = [s.name for rs in body.resource_spans for ss in rs.scope_spans for s in ss.spans]
        status = self.script.pop(0) if self.script else (400 if "bad" in names else 200)
        if status == 200:
            self.names += names
            self.keys.add(request.headers.get("X-Key", ""))
        return web.Response(status=status, body=b"", content_type="application/x-protobuf")

    async def logs_route(self, request: web.Request) -> web.Response:
        self.logs.append(await request.read())
        return web.Response(body=b"", content_type="application/x-protobuf")


async def serve(state: Backend, port: int = 0) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_post("/v1/traces", state.traces)
    app.router.add_post("/v1/logs", state.logs_route)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest.fixture
async def backend() -> AsyncIterator[tuple[Backend, str]]:
    state = Backend()
    runner, port = await serve(state)
    yield state, f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(str(tmp_path / "q.db"), forward=True)
    await opened.start()
    yield opened
    await opened.shutdown()


def body(*names: str) -> bytes:
    spans = [Span(trace_id=b"\x01" * 16, span_id=bytes([i + 1]) * 8, name=n) for i, n in enumerate(names)]
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
                                     ).SerializeToString()


async def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def http(url: str, **options: object) -> ExportConfig:
    return ExportConfig(endpoint=url, protocol="http/protobuf", timeout_s=2.0, max_backoff_s=0.2, **options)



async def raw_trace_server(export: Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]) -> tuple[
        grpc.aio.Server, int]:
    """A started gRPC TraceService whose Export gets the request's raw bytes (nothing decoded),
    on a free loopback port."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(export)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port

async def test_requests_arrive_unchanged_in_order_and_leave_the_log(
    backend: tuple[Backend, str], store: SqliteStore,
) -> None:
    state, url = backend
    for n in range(20):
        await store.forward_log.forward_append("traces", body(f"s{n}"))
    logs = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(
        log_records=[LogRecord(body=None)])])]).SerializeToString()
    await store.forward_log.forward_append("logs", logs)
    metrics = Metrics()
    fwd = Forwarder(http(url, headers={"X-Key": "k"}), store.forward_log, metrics)
    await fwd.start()
    await until(lambda: len(state.names) == 20 and len(state.logs) == 1, "every request forwarded")
    await fwd.shutdown(2.0)
    assert state.names == [f"s{n}" for n in range(20)]  # merged into few requests, order kept
    assert state.logs == [logs] and state.keys == {"k"}
    assert (await store.forward_log.forward_state()).requests == 0
    assert metrics.registry.get_sample_value(
        "tracescore_forwarded_requests_total", {"signal": "traces", "outcome": "sent"}) == 20


async def test_retryable_answers_keep_the_requests_until_accepted(
    backend: tuple[Backend, str], store: SqliteStore,
) -> None:
    state, url = backend
    state.script = [503, 429, 502]
    for n in range(3):
        await store.forward_log.forward_append("traces", body(f"s{n}"))
    metrics = Metrics()
    fwd = Forwarder(http(url), store.forward_log, metrics, backoff_s=0.01)
    await fwd.start()
    await until(lambda: len(state.names) == 3, "the requests after three refusals")
    await fwd.shutdown(2.0)
    assert state.names == ["s0", "s1", "s2"]
    assert metrics.registry.get_sample_value(
        "tracescore_forwarded_requests_total", {"signal": "traces", "outcome": "retried"}) == 9


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The forwarder's WARNING (and above) lines, in order."""
    return [r.getMessage() for r in caplog.records
            if r.name == "collector.export.forward" and r.levelno >= logging.WARNING]


def recovered(caplog: pytest.LogCaptureFixture) -> bool:
    return any("recovered after" in line for line in outage_lines(caplog))


async def test_an_outage_is_logged_once_naming_the_endpoint_and_cause_and_again_when_it_ends(
    backend: tuple[Backend, str], store: SqliteStore, caplog: pytest.LogCaptureFixture,
) -> None:
    state, url = backend
    state.script = [503] * 4
    for n in range(3):
        await store.forward_log.forward_append("traces", body(f"s{n}"))
    metrics = Metrics()
    fwd = Forwarder(http(url), store.forward_log, metrics, backoff_s=0.01)
    caplog.set_level(logging.DEBUG, logger="collector.export.forward")
    await fwd.start()
    await until(lambda: recovered(caplog), "the line saying forwarding recovered")
    await fwd.shutdown(2.0)
    assert state.names == ["s0", "s1", "s2"]
    first, last = outage_lines(caplog)  # one line as the outage began, one as it ended: none per attempt
    assert first.startswith(f"forwarding to {url} (http/protobuf) failed: HTTP 503 Service Unavailable; "), first
    match = re.fullmatch(rf"forwarding to {re.escape(url)} \(http/protobuf\) recovered after (\S+) s and 4 failed "
                         r"attempts \(12 requests retried\); last error: HTTP 503 Service Unavailable", last)
    assert match and float(match.group(1)) >= 0, last
    retried = metrics.registry.get_sample_value(
        "tracescore_forwarded_requests_total", {"signal": "traces", "outcome": "retried"})
    assert retried == 12  # the log's figure is the metric's
    again = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "failed again" in r.getMessage()]
    assert len(again) == 3 and all(line.endswith("HTTP 503 Service Unavailable") for line in again)


async def test_a_grpc_outage_names_the_status_and_a_refusal_for_good_names_its_cause(
    store: SqliteStore, caplog: pytest.LogCaptureFixture,
) -> None:
    """gRPC: the status code and details of the refusal; a request refused for good is logged
    as an error with its cause, and ends no outage it did not start."""
    unavailable = 2  # the first two calls: the backend is away
    received: list[bytes] = []

    async def export(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        nonlocal unavailable
        if unavailable:
            unavailable -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "backend says unavailable")
        if b"refused" in request:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "backend says invalid_argument")
        received.append(request)
        return b""

    server, port = await raw_trace_server(export)
    caplog.set_level(logging.WARNING, logger="collector.export.forward")
    try:
        await store.forward_log.forward_append("traces", body("refused"))
        await store.forward_log.forward_append("traces", body("accepted"))
        endpoint = f"127.0.0.1:{port}"
        fwd = Forwarder(ExportConfig(endpoint=endpoint, protocol="grpc", max_backoff_s=0.2), store.forward_log,
                        Metrics(), backoff_s=0.01)
        await fwd.start()
        await until(lambda: recovered(caplog) and len(received) == 1, "the outage's end and the second request")
        await fwd.shutdown(2.0)
    finally:
        await server.stop(0)
    first, *middle, last = outage_lines(caplog)
    assert first.startswith(f"forwarding to {endpoint} (grpc) failed: gRPC UNAVAILABLE: backend says unavailable; ")
    # The two requests went as one batch, refused for good, then one by one: the first refused
    # for good again (dropped), the second accepted.
    (dropped,) = middle
    assert re.fullmatch(rf"{re.escape(endpoint)} \(grpc\) refused 1 forwarded traces request\(s\) \(positions "
                        r"(\d+)\.\.\1\) for good \(gRPC INVALID_ARGUMENT: backend says invalid_argument\); dropped",
                        dropped), dropped
    assert last.startswith(f"forwarding to {endpoint} (grpc) recovered after "), last
    assert last.endswith("2 failed attempts (4 requests retried); last error: gRPC UNAVAILABLE: backend says "
                         "unavailable"), last
    assert [s.name for r in received for rs in ExportTraceServiceRequest.FromString(r).resource_spans
            for ss in rs.scope_spans for s in ss.spans] == ["accepted"]


async def test_a_request_refused_for_good_is_dropped_alone(backend: tuple[Backend, str], store: SqliteStore) -> None:
    state, url = backend
    for names in (("a",), ("bad",), ("b",), ("c",)):
        await store.forward_log.forward_append("traces", body(*names))
    metrics = Metrics()
    fwd = Forwarder(http(url), store.forward_log, metrics)
    await fwd.start()
    await until(lambda: len(state.names) == 3, "the good requests")
    await fwd.shutdown(2.0)
    assert state.names == ["a", "b", "c"]
    assert metrics.registry.get_sample_value(
        "tracescore_forwarded_requests_total", {"signal": "traces", "outcome": "rejected"}) == 1
    assert (await store.forward_log.forward_state()).requests == 0


async def test_an_endpoint_down_then_back_gets_everything_after_a_restart(tmp_path: Path) -> None:
    """Requests wait in the file while nothing listens, survive the process (a new store and
    forwarder on the same file), and arrive once the endpoint is up."""
    state = Backend()
    holder = hold_port()  # nothing listens (connections are refused), and nobody else takes it
    port = holder.getsockname()[1]
    first = SqliteStore(str(tmp_path / "q.db"), forward=True)
    await first.start()
    for n in range(5):
        await first.forward_log.forward_append("traces", body(f"s{n}"))
    metrics = Metrics()
    fwd = Forwarder(http(f"http://127.0.0.1:{port}"), first.forward_log, metrics)
    await fwd.start()

    def retried() -> float:
        return metrics.registry.get_sample_value(
            "tracescore_forwarded_requests_total", {"signal": "traces", "outcome": "retried"}) or 0.0

    await until(lambda: retried() >= 10, "a few refused attempts")  # counted per request carried
    await fwd.shutdown(0.5)
    await first.shutdown()

    second = SqliteStore(str(tmp_path / "q.db"), forward=True)
    await second.start()
    assert (await second.forward_log.forward_state()).requests == 5
    runner, _ = await serve(state, port)
    holder.close()
    fwd = Forwarder(http(f"http://127.0.0.1:{port}"), second.forward_log, Metrics())
    try:
        await fwd.start()
        await until(lambda: len(state.names) == 5, "the kept requests")
        await fwd.shutdown(2.0)
        assert state.names == [f"s{n}" for n in range(5)]
        assert (await second.forward_log.forward_state()).requests == 0
    finally:
        await second.shutdown()
        await runner.cleanup()


async def test_grpc_forwarding_sends_the_bytes_through(store: SqliteStore) -> None:
    """Over gRPC the bodies are not decoded and encoded again: what arrives parses as one
    export request holding the merged requests' spans in order."""
    received: list[bytes] = []

    async def export(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        received.append(request)
        return b""

    server, port = await raw_trace_server(export)
    try:
        for n in range(4):
            await store.forward_log.forward_append("traces", body(f"s{n}"))
        fwd = Forwarder(ExportConfig(endpoint=f"127.0.0.1:{port}", protocol="grpc"), store.forward_log, Metrics())
        await fwd.start()
        await until(lambda: sum(len(ExportTraceServiceRequest.FromString(r).resource_spans) for r in received) == 4,
                    "four requests' spans")
        await fwd.shutdown(2.0)
    finally:
        await server.stop(0)
    names = [s.name for r in received for rs in ExportTraceServiceRequest.FromString(r).resource_spans
             for ss in rs.scope_spans for s in ss.spans]
    assert names == ["s0", "s1", "s2", "s3"]
    assert b"".join(received) == b"".join(body(f"s{n}") for n in range(4))
