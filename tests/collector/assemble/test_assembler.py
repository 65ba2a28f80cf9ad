"""Trace assembly on the real store, adapters and registry: decisions, filters, sampling, logs."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from repo_paths import FIXTURES
from shared_redis import REDIS_URL

import adapters
from collector.assemble.assembler import TraceAssembler, split_traces
from collector.common.errors import QueueFull, Unavailable
from collector.common.metrics import Metrics
from collector.config import FilterConfig, ScorerConfig
from collector.store.redis.store import RedisStore
from collector.store.sqlite.store import SqliteStore
from collector.work.registry import RegisteredScorer, ScorerRegistry, sampled
from scorers import create_scorer


async def _poll(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + 30
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def _queued(store: SqliteStore, n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await store.stats()).queued >= n

    return check


def _scorer(scorer_id: str) -> Any:
    return create_scorer(id=scorer_id, description="test", type="agent", version="1").generate_score(
        lambda run: 1.0)


def _agent_request(service: str = "support-bot") -> tuple[ExportTraceServiceRequest, str, str]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    msgs_in = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}])
    msgs_out = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Hello"}]}])
    with tracer.start_as_current_span("invoke_agent helper", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper", "env": "prod",
        "gen_ai.response.id": "resp_9", "gen_ai.input.messages": msgs_in,
        "gen_ai.output.messages": msgs_out,
    }) as span:
        ctx = span.get_span_context()
    return encode_spans(memory.get_finished_spans()), format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


async def _assembler(tmp_path: Path, entries: list[RegisteredScorer], **kw: Any
                     ) -> tuple[TraceAssembler, SqliteStore, Metrics]:
    store = SqliteStore(str(tmp_path / "q.db"), decision_wait=0.0)
    await store.start()
    metrics = Metrics()
    asm = TraceAssembler(store, store, ScorerRegistry(entries), metrics, adapters, **kw)
    return asm, store, metrics


async def test_decision_makes_jobs_for_matching_scorers(tmp_path: Path) -> None:
    entries = [
        RegisteredScorer(_scorer("all"), ScorerConfig(ref="x:all")),
        RegisteredScorer(_scorer("prod-only"), ScorerConfig(
            ref="x:p", filter=FilterConfig(agent="helper", attributes={"env": "prod"}))),
        RegisteredScorer(_scorer("other-service"), ScorerConfig(ref="x:o", filter=FilterConfig(service="x"))),
        RegisteredScorer(_scorer("never"), ScorerConfig(ref="x:n", sampling=0.0)),
    ]
    asm, store, metrics = await _assembler(tmp_path, entries)
    woken: list[int] = []
    asm._on_jobs = lambda: woken.append(1)
    with pytest.raises(Unavailable):
        await asm.consume_traces(ExportTraceServiceRequest())
    await asm.start()
    request, trace_id, span_id = _agent_request()
    accepted = await asm.consume_traces(request)
    assert (accepted.accepted, accepted.rejected) == (1, 0)
    await _poll(_queued(store, 2), "two jobs")
    assert woken
    jobs = await store.take(10)
    assert sorted(j.job.scorer_id for j in jobs) == ["all", "prod-only"]
    run = jobs[0].job.run
    assert (run.trace_id, run.span_id, run.service, run.agent, run.response_id) == (
        trace_id, span_id, "support-bot", "helper", "resp_9")
    assert run.input["input_messages"][0]["content"] == "Hi"
    assert run.output[0]["content"] == "Hello"
    text = metrics.render().decode()
    assert 'tracescore_decisions_total{reason="filtered_out",scorer="other-service"} 1.0' in text
    assert 'tracescore_decisions_total{reason="sampled_out",scorer="never"} 1.0' in text
    assert 'tracescore_runs_found_total{convention="genai"} 1.0' in text
    # The same batch again (a replay) is a duplicate, never a second job.
    await asm.consume_traces(request)

    async def duplicate() -> bool:
        return b'tracescore_decisions_total{reason="duplicate",scorer="all"} 1.0' in metrics.render()

    await _poll(duplicate, "a duplicate decision")
    await asm.shutdown()
    await store.shutdown()


async def test_invalid_ids_are_rejected_partially(tmp_path: Path) -> None:
    asm, store, _ = await _assembler(tmp_path, [])
    await asm.start()
    request, _, _ = _agent_request()
    bad = request.resource_spans[0].scope_spans[0].spans.add()
    bad.trace_id, bad.span_id, bad.name = b"\x01" * 5, b"\x02" * 8, "bad"
    result = await asm.consume_traces(request)
    assert (result.accepted, result.rejected) == (1, 1) and "invalid" in result.message
    await asm.shutdown()
    await store.shutdown()


async def test_full_queue_refuses_retryably(tmp_path: Path) -> None:
    entries = [RegisteredScorer(_scorer("all"), ScorerConfig(ref="x:all"))]
    asm, store, _ = await _assembler(tmp_path, entries, max_pending_jobs=1, retry_after_s=3.0)
    await asm.start()
    await asm.consume_traces(_agent_request()[0])
    await _poll(_queued(store, 1), "one job")
    with pytest.raises(QueueFull) as info:
        await asm.consume_traces(_agent_request()[0])
    assert info.value.retry_after_s == 3.0
    await asm.shutdown()
    await store.shutdown()


async def test_content_in_logs_is_joined(tmp_path: Path) -> None:
    entries = [RegisteredScorer(_scorer("all"), ScorerConfig(ref="x:all"))]
    asm, store, _ = await _assembler(tmp_path, entries)
    await asm.start()
    await asm.consume_logs(adapters.read_logs_file(FIXTURES / "openai-v2-events" / "S1.logs.pb"))
    await asm.consume_traces(adapters.read_trace_file(FIXTURES / "openai-v2-events" / "S1.pb"))
    await _poll(_queued(store, 1), "one job")
    (job,) = await store.take(10)
    assert job.job.run.input["input_messages"][0]["content"] == "What is the capital of France?"
    assert job.job.run.output[-1]["content"] == "The capital of France is Paris."
    await asm.shutdown()
    await store.shutdown()


def test_sampling_agrees_with_ratio_edges() -> None:
    assert sampled("00" * 16, 1.0) and not sampled("00" * 16, 0.0)


async def test_a_trace_that_breaks_the_adapters_is_skipped(tmp_path: Path) -> None:
    class Broken:
        """The adapters module, except that extraction fails on one service's traces."""

        def __getattr__(self, name: str) -> Any:
            return getattr(adapters, name)

        @staticmethod
        def extract_runs(trace: Any) -> Any:
            if trace.spans[0].service == "poison":
                raise ValueError("adapter bug")
            return adapters.extract_runs(trace)

    store = SqliteStore(str(tmp_path / "q.db"), decision_wait=0.0)
    await store.start()
    metrics = Metrics()
    entries = [RegisteredScorer(_scorer("all"), ScorerConfig(ref="x:all"))]
    asm = TraceAssembler(store, store, ScorerRegistry(entries), metrics, Broken())
    await asm.start()
    await asm.consume_traces(_agent_request("poison")[0])
    await asm.consume_traces(_agent_request("fine")[0])
    await _poll(_queued(store, 1), "the healthy trace's job")
    assert b'tracescore_runs_skipped_total{reason="trace_error"} 1.0' in metrics.render()
    await asm.shutdown()
    await store.shutdown()


def _reference_split(request: ExportTraceServiceRequest) -> dict[bytes, TracesData]:
    """What a chunk must hold: per trace, its spans under copies of their resource and scope."""
    out: dict[bytes, TracesData] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                data = out.setdefault(span.trace_id, TracesData())
                if not data.resource_spans or data.resource_spans[-1].resource != rs.resource or (
                        data.resource_spans[-1].schema_url != rs.schema_url):
                    data.resource_spans.add(resource=rs.resource, schema_url=rs.schema_url)
                target = data.resource_spans[-1]
                if not target.scope_spans or target.scope_spans[-1].scope != ss.scope or (
                        target.scope_spans[-1].schema_url != ss.schema_url):
                    target.scope_spans.add(scope=ss.scope, schema_url=ss.schema_url)
                target.scope_spans[-1].spans.append(span)
    return out


def test_split_traces_chunks_are_the_traces_spans_with_resource_and_scope() -> None:
    # Every fixture, two resources per trace for some, spans of different traces interleaved.
    request = ExportTraceServiceRequest()
    for path in sorted(FIXTURES.glob("*/*.pb")):
        if not adapters.is_logs_file(path.name):
            request.MergeFrom(adapters.read_trace_file(path))
    extra = request.resource_spans.add(schema_url="https://opentelemetry.io/schemas/1.26.0")
    extra.resource.CopyFrom(request.resource_spans[0].resource)
    scope = extra.scope_spans.add(schema_url="s")
    scope.scope.name = "late"
    first = request.resource_spans[0].scope_spans[0].spans[0]
    late = scope.spans.add()
    late.CopyFrom(first)
    late.span_id, late.parent_span_id, late.name = b"\x09" * 8, first.span_id, "late child"
    reversed_spans = list(request.resource_spans[1].scope_spans[0].spans)[::-1]
    del request.resource_spans[1].scope_spans[0].spans[:]
    request.resource_spans[1].scope_spans[0].spans.extend(reversed_spans)
    request.resource_spans[1].scope_spans[0].spans.add(trace_id=b"\x01" * 5, span_id=b"\x02" * 8)

    chunks, rejected = split_traces(list(request.resource_spans), adapters.is_run_candidate)

    assert rejected == 1
    expected = _reference_split(request)
    del expected[b"\x01" * 5]
    assert [c.trace_id for c in chunks] == list(expected)
    for chunk in chunks:
        data = TracesData.FromString(chunk.data)
        assert data == expected[chunk.trace_id]
        spans = [s for rs in data.resource_spans for ss in rs.scope_spans for s in ss.spans]
        assert chunk.span_count == len(spans)
        assert chunk.has_root == any(not s.parent_span_id for s in spans)
        assert chunk.has_run_candidate == any(
            adapters.is_run_candidate(s.name, [kv.key for kv in s.attributes]) for s in spans)
    assert sum(c.has_run_candidate for c in chunks) == len(chunks)  # every fixture holds a run


def test_split_traces_reads_keys_only_when_the_name_does_not_decide() -> None:
    spans = [Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="chat x",
                  attributes=[KeyValue(key="a")]),
             Span(trace_id=b"\x01" * 16, span_id=b"\x03" * 8, name="other"),
             Span(trace_id=b"\x04" * 16, span_id=b"\x05" * 8, name="GET /",
                  attributes=[KeyValue(key="http.route"), KeyValue(key="gen_ai.system")])]
    seen: list[tuple[str, list[str] | None]] = []

    def is_candidate(name: str, keys: Any) -> bool:
        if name.startswith("chat "):
            seen.append((name, None))
            return True
        listed = list(keys)
        seen.append((name, listed))
        return "gen_ai.system" in listed

    chunks, _ = split_traces([ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])], is_candidate)
    assert [(c.span_count, c.has_run_candidate, c.has_root) for c in chunks] == [(2, True, True), (1, True, True)]
    # The second span of a trace already known to hold a candidate is not tested at all.
    assert seen == [("chat x", None), ("GET /", ["http.route", "gen_ai.system"])]


def test_split_traces_slices_spans_out_of_the_received_encoding() -> None:
    request = ExportTraceServiceRequest()
    for path in sorted(FIXTURES.glob("*/*.pb")):
        if not adapters.is_logs_file(path.name):
            request.MergeFrom(adapters.read_trace_file(path))
    request.resource_spans[0].scope_spans[0].spans.add(trace_id=b"\x01" * 5, span_id=b"\x02" * 8)
    raw = request.SerializeToString()
    serialised, rejected = split_traces(list(request.resource_spans), adapters.is_run_candidate)
    sliced, rejected_too = split_traces(list(request.resource_spans), adapters.is_run_candidate, raw)
    assert sliced == serialised and rejected == rejected_too == 1
    # An encoding that is not this request's (or not an encoding at all) is not used.
    other = ExportTraceServiceRequest(resource_spans=[request.resource_spans[0]]).SerializeToString()
    for wrong in (other, b"\x0a\xff", b"\x0b"):
        assert split_traces(list(request.resource_spans), adapters.is_run_candidate, wrong) == (serialised, 1)


async def test_what_an_adapter_skips_is_counted_per_scorer(tmp_path: Path) -> None:
    """SPEC: every decision, "skipped by an adapter" included, is counted per scorer."""
    entries = [RegisteredScorer(_scorer("a"), ScorerConfig(ref="x:a")),
               RegisteredScorer(_scorer("b"), ScorerConfig(ref="x:b"))]
    asm, store, metrics = await _assembler(tmp_path, entries)
    await asm.start()
    request, _, _ = _agent_request()
    spans = request.resource_spans[0].scope_spans[0].spans
    spans.append(spans[0])  # the same span id twice: the adapters keep one and skip the other
    await asm.consume_traces(request)
    await _poll(_queued(store, 2), "a job per scorer for the run that is still there")
    text = metrics.render().decode()
    assert 'tracescore_runs_skipped_total{reason="duplicate_span_id"} 1.0' in text
    assert 'tracescore_decisions_total{reason="skipped",scorer="a"} 1.0' in text
    assert 'tracescore_decisions_total{reason="skipped",scorer="b"} 1.0' in text
    await asm.shutdown()
    await store.shutdown()


async def test_spans_over_max_spans_per_trace_are_reported_as_rejected(tmp_path: Path) -> None:
    """The client learns (OTLP partial success) that spans were dropped, not a plain success."""
    store = SqliteStore(str(tmp_path / "q.db"), decision_wait=60.0, max_spans_per_trace=2)
    await store.start()
    metrics = Metrics()
    asm = TraceAssembler(store, store, ScorerRegistry([]), metrics, adapters)
    await asm.start()
    request, _, _ = _agent_request()
    spans = request.resource_spans[0].scope_spans[0].spans
    template = spans[0]
    for i in range(4):  # five spans of one trace in one request: over twice the limit of two
        extra = spans.add()  # (a chunk holding a run span is kept up to twice the limit)
        extra.CopyFrom(template)
        extra.span_id = bytes([9, 9, 9, 9, 9, 9, 9, i + 1])
    accepted = await asm.consume_traces(request)
    assert (accepted.accepted, accepted.rejected) == (0, 5)
    assert "over max_spans_per_trace" in accepted.message
    assert b'tracescore_spans_dropped_total{reason="max_spans_per_trace"} 5.0' in metrics.render()
    await asm.shutdown()
    await store.shutdown()


async def test_with_forwarding_each_request_enters_the_forward_log_and_jobs_carry_its_head(tmp_path: Path) -> None:
    """Forwarding on: the request as received is in the forward log (with the logs request),
    and the job decided from it carries the log's head, so its score waits for them."""
    store = SqliteStore(str(tmp_path / "q.db"), decision_wait=0.0, forward=True)
    await store.start()
    asm = TraceAssembler(store, store, ScorerRegistry([RegisteredScorer(_scorer("all"), ScorerConfig(ref="x:a"))]),
                         Metrics(), adapters, forward_log=store.forward_log)
    await asm.start()
    other, _, _ = _agent_request("other")
    await asm.consume_traces(other, other.SerializeToString())
    request, _, span_id = _agent_request()
    await asm.consume_traces(request)
    await asm.consume_logs(ExportLogsServiceRequest())  # no trace-linked record: forwarded all the same
    await _poll(_queued(store, 2), "two jobs")
    items = await store.forward_log.forward_pending(1 << 24, 10)
    assert [(i.signal, i.body) for i in items] == [
        ("traces", other.SerializeToString()), ("traces", request.SerializeToString()), ("logs", b"")]
    marks = {j.job.run.span_id: j.job.run.forward_mark for j in await store.take(10)}
    assert marks[span_id] >= 2 and all(mark >= 1 for mark in marks.values())
    await asm.shutdown()
    await store.shutdown()


async def test_a_decision_whose_jobs_no_replica_acknowledged_leaves_its_trace_to_be_decided_again() -> None:
    """``wait_replicas``: the jobs decided from an accepted request wait for the replicas as its
    append did. The shared test Redis has none, so the put is refused and the trace is not marked
    decided: it is decided again once its claim runs out (a failover between jobs the replicas
    never got and that mark would lose the run)."""
    prefix = f"test-asm-{uuid.uuid4().hex[:8]}:"
    buffer = RedisStore(REDIS_URL, key_prefix=prefix, decision_wait=0.0)  # the request is accepted
    queue = RedisStore(REDIS_URL, key_prefix=prefix, wait_replicas=1, wait_timeout_ms=50)
    await buffer.start()
    await queue.start()
    queue.replicated.within_s = 0.2
    metrics = Metrics()
    asm = TraceAssembler(buffer, queue, ScorerRegistry([RegisteredScorer(_scorer("all"), ScorerConfig(ref="x:a"))]),
                         metrics, adapters)
    await asm.start()
    try:
        request, trace_id, _ = _agent_request()
        await asm.consume_traces(request)

        async def failed() -> bool:
            return (metrics.registry.get_sample_value("tracescore_errors_total", {"component": "assembly"}) or 0) >= 1

        await _poll(failed, "the decision refused")
        keys = buffer.keys
        assert await buffer.client.zscore(keys.traces_decided, trace_id) is None  # not marked decided
        assert await buffer.client.zscore(keys.decide, trace_id) is not None  # still to decide, once its claim ends
        assert await buffer.client.xlen(keys.jobs) == 1  # written, not acknowledged: queued again as a duplicate
    finally:
        await asm.shutdown()
        await buffer.delete_all()
        await buffer.shutdown()
        await queue.shutdown()
