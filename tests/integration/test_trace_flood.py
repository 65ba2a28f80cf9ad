"""Trace floods against a real daemon (issue 13): one request with 100,000 trace ids does
not evict the runs another client sent before it; a run span arriving after its trace
reached ``max_spans_per_trace`` is kept and the run scored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
from daemon_harness import INPUT, OUTPUT, CaptureBackend, agent_trace_body, wait_until
from fault_daemon import PROTOBUF, FaultDaemon, scoring_config
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def _flood(traces: int) -> bytes:
    """One request of ``traces`` single-span traces with no agent run (~33 bytes a span)."""
    spans = [Span(trace_id=(i + 1).to_bytes(16, "big"), span_id=b"\x01" * 8, name="GET /")
             for i in range(traces)]
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString()


async def test_a_100000_trace_request_does_not_evict_another_clients_accepted_runs(tmp_path: Path) -> None:
    backend = await CaptureBackend().start()
    daemon = FaultDaemon(tmp_path, scoring_config(tmp_path / "queue.db", backend.endpoint, "decision_wait = 4.0\n"))
    # Built before the runs are sent (seconds of CPU on a busy machine): the runs are still
    # waiting for their decision (4 s) when the flood comes.
    flood = await asyncio.to_thread(_flood, 100_000)
    assert len(flood) > 3_000_000
    try:
        await daemon.start()
        expected = set()
        async with aiohttp.ClientSession() as session:
            for _ in range(20):  # waiting for their decision when the flood comes
                body, trace_id, _ = agent_trace_body()
                async with session.post(daemon.url, data=body, headers=PROTOBUF) as resp:
                    assert resp.status == 200
                expected.add(trace_id)
            async with session.post(daemon.url, data=flood, headers=PROTOBUF) as resp:
                assert resp.status == 200
        await wait_until(lambda: {s.span.trace_id.hex() for s in backend.scores()} == expected,
                         timeout=60, what="every run accepted before the flood scored")
        metrics = await daemon.metrics()
        evicted = next(float(line.split()[-1]) for line in metrics.splitlines()
                       if line.startswith('tracescore_traces_evicted_total{reason="max_traces"}'))
        assert evicted >= 20  # the flood's own newest traces made the room
        assert len(backend.scores()) == 20
    finally:
        await daemon.stop()
        await backend.stop()


async def test_a_run_span_after_its_trace_reached_max_spans_is_kept_and_scored(tmp_path: Path) -> None:
    backend = await CaptureBackend().start()
    daemon = FaultDaemon(tmp_path, scoring_config(
        tmp_path / "queue.db", backend.endpoint, "decision_wait = 0.3\nmax_spans_per_trace = 50\n"))
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    attrs = {"gen_ai.input.messages": json.dumps(INPUT), "gen_ai.output.messages": json.dumps(OUTPUT)}
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", **attrs}) as run:
        for i in range(60):  # children end (and are exported) before their run span
            with tracer.start_as_current_span(f"db.query {i}"):
                pass
    trace_id = format(run.get_span_context().trace_id, "032x")
    finished = memory.get_finished_spans()
    parts = [(encode_spans(finished[:50]).SerializeToString(), 0),  # the trace reaches the limit
             (encode_spans(finished[50:60]).SerializeToString(), 10),  # more children: dropped
             (encode_spans(finished[60:]).SerializeToString(), 0)]  # the run span: kept
    try:
        await daemon.start()
        async with aiohttp.ClientSession() as session:
            for body, rejected in parts:
                async with session.post(daemon.url, data=body, headers=PROTOBUF) as resp:
                    assert resp.status == 200
                    answer = ExportTraceServiceResponse.FromString(await resp.read())
                    assert answer.partial_success.rejected_spans == rejected
        await wait_until(lambda: [s.span.trace_id.hex() for s in backend.scores()] == [trace_id],
                         timeout=30, what="the run scored")
    finally:
        provider.shutdown()
        await daemon.stop()
        await backend.stop()
