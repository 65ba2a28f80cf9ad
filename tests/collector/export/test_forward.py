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
    """An OTLP/HTTP endpoint answering from a script of status codes, or (status, body, headers)
    replies (then 200), refusing with 400 any request holding a span named ``bad``; with
    ``takes_logs`` off it has no ``/v1/logs`` route (405, as Phoenix answers)."""

    def __init__(self, takes_logs: bool = True) -> None:
        self.script: list[int | tuple[int, str, dict[str, str]]] = []
        self.names: list[str] = []  # span names accepted, in arrival order
        self.logs: list[bytes] = []
        self.keys: set[str] = set()
        self.times: list[float] = []  # when each traces request arrived (monotonic)
        self.takes_logs = takes_logs

    async def traces(self, request: web.Request) -> web.Response:
        self.times.append(time.monotonic())
        body = ExportTraceServiceRequest.FromString(await request.read())
        names = [s.name for rs in body.resource_spans for ss in rs.scope_spans for s in ss.spans]
        reply = self.script.pop(0) if self.script else (400 if "bad" in names else 200)
        status, text, headers = reply if isinstance(reply, tuple) else (reply, "", {})
        if status == 200:
            self.names += names
            self.keys.add(request.headers.get("X-Key", ""))
            return web.Response(body=b"", content_type="application/x-protobuf")
        return web.Response(status=status, text=text, headers=headers)

    async def logs_route(self, request: web.Request) -> web.Response:
        if not self.takes_logs:
            return web.Response(status=405, text="Method Not Allowed")
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
    return ExportConfig.model_validate({"endpoint": url, "protocol": "http/protobuf", "timeout_s": 2.0,
                                        "max_backoff_s": 0.2, **options})



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


MLFLOW_NO_EXPERIMENT = '{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "No Experiment with id=1 exists"}'


async def test_an_unknown_experiment_holds_the_requests_in_order_and_says_so_with_the_fix(
    backend: tuple[Backend, str], store: SqliteStore, caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 42 (1): MLflow's 404 for an experiment it does not have (and a 401 after it) keeps
    every request, as an outage does, in order; the forwarder's state is "held" with the backend's
    message and the fix, and the log says so once per kind of trouble; nothing is dropped."""
    state, url = backend
    state.script = [(404, MLFLOW_NO_EXPERIMENT, {})] * 3 + [(401, '{"message": "bad token"}', {})]
    for n in range(3):
        await store.forward_log.forward_append("traces", body(f"s{n}"))
    metrics = Metrics()
    fwd = Forwarder(http(url), store.forward_log, metrics, backoff_s=0.01)
    caplog.set_level(logging.WARNING, logger="collector.export.forward")
    await fwd.start()
    await until(lambda: fwd.state()["state"] == "held", "the forwarder held")
    held = fwd.state()
    assert held["message"] == "No Experiment with id=1 exists" and "create it" in held["fix"]
    assert held["destination"] == f"{url} (http/protobuf)" and held["refused"] == 0
    await until(lambda: len(state.names) == 3, "the requests once the backend takes them")
    await fwd.shutdown(2.0)
    assert state.names == ["s0", "s1", "s2"] and fwd.state()["state"] == "ok"
    lines = outage_lines(caplog)
    assert len(lines) == 3, lines  # held (404), held again for another reason (401), recovered
    assert lines[0].startswith(f"forwarding to {url} (http/protobuf) failed: HTTP 404 Not Found: No Experiment with "
                               "id=1 exists; a configuration change is needed: what the request names does not "
                               "exist on the backend"), lines[0]
    assert "HTTP 401 Unauthorized: bad token; a configuration change is needed: the backend refused the credentials" \
        in lines[1] and "recovered after" in lines[2]
    assert metrics.registry.get_sample_value(
        "tracescore_forwarded_requests_total", {"signal": "traces", "outcome": "rejected"}) is None


async def test_grpc_not_found_and_unauthenticated_hold_the_requests(store: SqliteStore) -> None:
    answers = [grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAUTHENTICATED]
    received: list[bytes] = []

    async def export(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if answers:
            await context.abort(answers.pop(0), "no such project")
        received.append(request)
        return b""

    server, port = await raw_trace_server(export)
    try:
        await store.forward_log.forward_append("traces", body("kept"))
        fwd = Forwarder(ExportConfig(endpoint=f"127.0.0.1:{port}", protocol="grpc", max_backoff_s=0.05),
                        store.forward_log, Metrics(), backoff_s=0.01)
        await fwd.start()
        await until(lambda: fwd.state()["state"] == "held", "the forwarder held")
        assert fwd.state()["cause"].startswith("gRPC ")
        await until(lambda: len(received) == 1, "the request once the backend takes it")
        await fwd.shutdown(2.0)
    finally:
        await server.stop(0)
    assert (await store.forward_log.forward_state()).requests == 0


async def test_logs_to_a_backend_without_logs_are_refused_and_never_hold_the_traces(
    store: SqliteStore, caplog: pytest.LogCaptureFixture,
) -> None:
    """Phoenix has no /v1/logs (405): a forwarded logs request is refused for good and dropped
    (counted, logged with the answer), and the traces before and after it are forwarded."""
    state = Backend(takes_logs=False)
    runner, port = await serve(state)
    try:
        await store.forward_log.forward_append("traces", body("before"))
        await store.forward_log.forward_append("logs", b"")
        await store.forward_log.forward_append("traces", body("after"))
        metrics = Metrics()
        fwd = Forwarder(http(f"http://127.0.0.1:{port}"), store.forward_log, metrics)
        caplog.set_level(logging.ERROR, logger="collector.export.forward")
        await fwd.start()
        await until(lambda: state.names == ["before", "after"], "both traces requests")
        await fwd.shutdown(2.0)
    finally:
        await runner.cleanup()
    assert metrics.registry.get_sample_value(
        "tracescore_forwarded_requests_total", {"signal": "logs", "outcome": "rejected"}) == 1
    (line,) = outage_lines(caplog)
    assert "refused 1 forwarded logs request(s)" in line and "(HTTP 405 Method Not Allowed); dropped" in line
    assert fwd.state()["refused"] == 1 and fwd.state()["state"] == "ok"


async def test_a_retry_after_is_waited_out(backend: tuple[Backend, str], store: SqliteStore) -> None:
    state, url = backend
    state.script = [(429, "", {"Retry-After": "0.4"})]
    await store.forward_log.forward_append("traces", body("s0"))
    fwd = Forwarder(http(url, max_backoff_s=5.0), store.forward_log, Metrics(), backoff_s=0.01)
    await fwd.start()
    await until(lambda: state.names == ["s0"], "the request after the wait")
    await fwd.shutdown(2.0)
    first, second = state.times
    assert second - first >= 0.35  # not the 10 ms backoff: the backend's 0.4 s
