"""Helpers for daemon integration tests: a capturing OTLP backend, agent traces, polling.

Only the network boundary is faked here (the trace backend). Agent traces are produced by
the OpenTelemetry SDK and sent with its own OTLP exporters.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from polling import WAIT_S as WAIT_S  # tests/support; re-exported: the tests import it from here
from polling import wait_until as wait_until
from ports import hold_port  # tests/support

from collector.store.redis.partitioned import open_redis_store

INPUT = [
    {"role": "system", "parts": [{"type": "text", "content": "You are a terse assistant."}]},
    {"role": "user", "parts": [{"type": "text", "content": "What is the capital of France?"}]},
]
OUTPUT = [{"role": "assistant", "parts": [{"type": "text", "content": "The capital of France is Paris."}],
           "finish_reason": "stop"}]


_HELD_PORTS: list[socket.socket] = []
"""The sockets holding the ports `free_port` handed out, closed after each test (conftest)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that stays this test's until it ends (`ports.hold_port`).

    A port merely found free is anyone's again at once: a daemon binding it after its
    start-up (seconds, more on a busy machine), a backend down for a while, or one started
    again on its old port could find it taken by another xdist worker's server or by an
    outgoing connection. Held, it refuses connections as a free port does, and the daemon's
    and the test servers' listeners (``SO_REUSEADDR``) still bind it.
    """
    holder = hold_port()
    _HELD_PORTS.append(holder)
    return int(holder.getsockname()[1])


def release_ports() -> None:
    """Close the sockets holding the ports `free_port` handed out (at the end of each test)."""
    while _HELD_PORTS:
        _HELD_PORTS.pop().close()


def _value(v: AnyValue) -> object:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@dataclass
class CapturedSpan:
    """A span as the backend received it."""

    span: Span
    service: str

    @property
    def attributes(self) -> dict[str, object]:
        return {kv.key: _value(kv.value) for kv in self.span.attributes}

    @property
    def event_attributes(self) -> dict[str, object]:
        (event,) = self.span.events
        return {kv.key: _value(kv.value) for kv in event.attributes}


class CaptureBackend:
    """An OTLP/gRPC trace backend that records every request."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.received_at: list[float] = []  # time.monotonic() when each of `requests` arrived
        self.log_requests: list[logs_service_pb2.ExportLogsServiceRequest] = []
        self.metadata: list[dict[str, str]] = []
        self.metric_requests: list[Any] = []
        self._server: grpc.aio.Server | None = None

    async def start(self) -> CaptureBackend:
        backend = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            async def Export(self, request, context):  # noqa: N802
                backend.metadata.append({k: v for k, v in context.invocation_metadata() or ()})
                backend.received_at.append(time.monotonic())
                backend.requests.append(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            async def Export(self, request, context):  # noqa: N802
                backend.log_requests.append(request)
                return logs_service_pb2.ExportLogsServiceResponse()

        from opentelemetry.proto.collector.metrics.v1 import (
            metrics_service_pb2,
            metrics_service_pb2_grpc,
        )

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            async def Export(self, request, context):  # noqa: N802
                backend.metric_requests.append(request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        if not self.port:  # a held port (see free_port): stopped and started again, it is still ours
            self.port = free_port()
        self._server = grpc.aio.server()
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self._server)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self._server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{self.port}")
        await self._server.start()
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=0.2)
            self._server = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def spans(self) -> list[CapturedSpan]:
        out = []
        for req in list(self.requests):
            for rs in req.resource_spans:
                service = next((kv.value.string_value for kv in rs.resource.attributes
                                if kv.key == "service.name"), "")
                for ss in rs.scope_spans:
                    out.extend(CapturedSpan(span, service) for span in ss.spans)
        return out

    def scores(self) -> list[CapturedSpan]:
        return [s for s in self.spans() if s.span.name.startswith("evaluation ")]

    def forwarded(self) -> list[CapturedSpan]:
        return [s for s in self.spans() if not s.span.name.startswith("evaluation ")]

    def first_scored_at(self) -> dict[str, float]:
        """Trace id (hex) -> when the first evaluation span of that trace arrived (monotonic)."""
        at: dict[str, float] = {}
        for when, request in zip(list(self.received_at), list(self.requests), strict=False):
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        if span.name.startswith("evaluation "):
                            at.setdefault(span.trace_id.hex(), when)
        return at


class _CheckedExporter(SpanExporter):
    """An exporter that remembers its results: the SDK's span processor drops them."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.results: list[SpanExportResult] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def emit_agent_trace(exporter: SpanExporter, service: str = "support-bot", agent: str = "support",
                     answer: str | None = None, expect_success: bool = True) -> tuple[str, str]:
    """Send one agent trace (invoke_agent -> chat, GenAI semconv) with the SDK; blocking.

    Returns the trace id and the agent span id as hex. An export that failed (the daemon
    refused it, or did not answer within the exporter's timeout) fails here, unless
    ``expect_success`` is False: otherwise the test would wait for a score that cannot come.
    """
    checked = _CheckedExporter(exporter)
    exporter = checked
    output = OUTPUT if answer is None else [
        {"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
    provider = TracerProvider(resource=Resource({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test-agent")
    attrs = {"gen_ai.input.messages": json.dumps(INPUT), "gen_ai.output.messages": json.dumps(output)}
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
        "gen_ai.response.id": "chatcmpl-test-1", **attrs,
    }) as root:
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", **attrs,
        }):
            pass
        ctx = root.get_span_context()
    provider.force_flush()
    if expect_success:
        assert checked.results and all(r is SpanExportResult.SUCCESS for r in checked.results), (
            f"the agent's export failed: {checked.results}")
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def agent_trace_body(answer: str | None = None) -> tuple[bytes, str, str]:
    """One agent trace as the bytes the SDK's OTLP/HTTP exporter would post (replayable);
    ``answer``: the agent's answer (default: `OUTPUT`'s)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    trace_id, span_id = emit_agent_trace(memory, answer=answer)
    return encode_spans(memory.get_finished_spans()).SerializeToString(), trace_id, span_id


class HttpCaptureBackend(CaptureBackend):
    """An OTLP/HTTP (protobuf) trace backend that records every request."""

    async def start(self) -> HttpCaptureBackend:
        import gzip as _gzip

        from aiohttp import web

        async def traces(request: web.Request) -> web.Response:
            body = await request.read()
            if request.headers.get("Content-Encoding") == "gzip":
                body = _gzip.decompress(body)
            request_ = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            self.received_at.append(time.monotonic())
            self.requests.append(request_)
            return web.Response(body=trace_service_pb2.ExportTraceServiceResponse().SerializeToString(),
                                content_type="application/x-protobuf")

        async def logs(request: web.Request) -> web.Response:
            self.log_requests.append(logs_service_pb2.ExportLogsServiceRequest.FromString(await request.read()))
            return web.Response(body=b"", content_type="application/x-protobuf")

        app = web.Application()
        app.router.add_post("/v1/traces", traces)
        app.router.add_post("/v1/logs", logs)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        if not self.port:  # a held port (see free_port)
            self.port = free_port()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        runner = getattr(self, "_runner", None)
        if runner is not None:
            await runner.cleanup()
            self._runner = None


async def delete_redis_keys(url: str, prefix: str, partitions: int = 1) -> None:
    """Delete every key a test's Redis deployment (``prefix``, of ``partitions``) wrote."""
    cleaner = open_redis_store(url, key_prefix=prefix, partitions=partitions)
    try:
        await cleaner.delete_all()
    finally:
        await cleaner.shutdown()
