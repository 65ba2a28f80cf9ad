"""Forwarding: unchanged bodies, retries on retryable answers, counted drops, never blocking."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from collector.config import ExportConfig
from collector.export.forward import Forwarder
from collector.metrics import Metrics


class Backend:
    """An OTLP/HTTP endpoint answering from a script of status codes, then 200."""

    def __init__(self) -> None:
        self.script: list[int] = []
        self.bodies: list[tuple[str, bytes, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        status = self.script.pop(0) if self.script else 200
        if status == 200:
            self.bodies.append((request.path, body, request.headers.get("X-Key", "")))
        return web.Response(status=status, body=b"", content_type="application/x-protobuf")


@pytest.fixture
async def backend() -> AsyncIterator[tuple[Backend, str]]:
    state = Backend()
    app = web.Application()
    app.router.add_post("/v1/traces", state.handle)
    app.router.add_post("/v1/logs", state.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield state, f"http://127.0.0.1:{port}"
    await runner.cleanup()


def _body(name: str) -> bytes:
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name=name)
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])]).SerializeToString()


async def _until(check: object, what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_http_forwarding_retries_and_keeps_bodies(backend: tuple[Backend, str]) -> None:
    state, url = backend
    state.script = [503]
    metrics = Metrics()
    fwd = Forwarder(ExportConfig(endpoint=url, protocol="http/protobuf", headers={"X-Key": "k"}), metrics)
    await fwd.start()
    assert fwd.offer("traces", _body("a")) and fwd.offer("logs", b"")
    await _until(lambda: len(state.bodies) == 2, "two forwarded requests")
    await fwd.shutdown(1.0)
    assert sorted(state.bodies) == [("/v1/logs", b"", "k"), ("/v1/traces", _body("a"), "k")]
    text = metrics.render().decode()
    assert 'tracescore_forwarded_requests_total{outcome="sent",signal="traces"} 1.0' in text


async def test_unreachable_endpoint_drops_are_counted_and_offer_never_blocks() -> None:
    metrics = Metrics()
    fwd = Forwarder(ExportConfig(endpoint="http://127.0.0.1:9", protocol="http/protobuf",
                                 forward_queue_size=2, timeout_s=1.0), metrics, max_tries=1, senders=1)
    accepted = [fwd.offer("traces", _body(str(i))) for i in range(5)]
    assert accepted == [True, True, False, False, False]
    await fwd.start()
    await _until(lambda: b'outcome="dropped_error"' in metrics.render(), "a dropped request")
    await fwd.shutdown(2.0)
    text = metrics.render().decode()
    assert 'tracescore_forwarded_requests_total{outcome="dropped_full",signal="traces"} 3.0' in text
    assert 'tracescore_forwarded_requests_total{outcome="dropped_error",signal="traces"} 2.0' in text
