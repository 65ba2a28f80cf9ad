"""Score spans and the outbox-draining exporter (SDK InMemorySpanExporter, error-injecting sink)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from polling import wait_until

from collector.common.metrics import Metrics
from collector.common.types import Done, RunRecord, ScoreJob, ScoreRecord
from collector.config import ExportConfig
from collector.export.evaluation import build_span
from collector.export.scores import ScoreExporter, make_span_exporter
from collector.store.sqlite.store import SqliteStore

TRACE, SPAN = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"


def _record(**kw: object) -> ScoreRecord:
    base: dict = dict(key="k", trace_id=TRACE, span_id=SPAN, score_span_id="00f067aa0ba902b7",
                      scorer_id="quality", scorer_name="Response quality", scorer_version="3",
                      run_id="run-1", score=0.75, reason="mostly right", label="pass",
                      response_id="chatcmpl-1", start_ns=1_000_000, end_ns=3_000_000,
                      judge_models=["openai/gpt-4o-mini"], input_tokens=10, output_tokens=5,
                      cost_usd=0.001, judge_attempts=1, analyze_json='{"ok": true}')
    base.update(kw)
    return ScoreRecord(**base)


def test_score_span_shape() -> None:
    span = build_span(_record())
    assert span.name == "evaluation Response quality"
    assert span.kind is SpanKind.INTERNAL
    assert format(span.context.trace_id, "032x") == TRACE
    assert format(span.parent.span_id, "016x") == SPAN and span.parent.trace_id == span.context.trace_id
    (event,) = span.events
    assert event.name == "gen_ai.evaluation.result"
    attrs = event.attributes
    assert attrs["gen_ai.evaluation.name"] == "Response quality"
    assert attrs["gen_ai.evaluation.score.value"] == 0.75
    assert isinstance(attrs["gen_ai.evaluation.score.value"], float)
    assert attrs["gen_ai.evaluation.score.label"] == "pass"
    assert attrs["gen_ai.evaluation.explanation"] == "mostly right"
    assert attrs["gen_ai.response.id"] == "chatcmpl-1"
    assert attrs["tracescore.scorer.id"] == "quality" and attrs["tracescore.scorer.version"] == "3"
    assert attrs["tracescore.run.id"] == "run-1"
    assert attrs["tracescore.judge.model"] == "openai/gpt-4o-mini"
    assert attrs["tracescore.judge.usage.input_tokens"] == 10
    assert attrs["tracescore.judge.cost_usd"] == 0.001
    assert attrs["tracescore.score.duration_ms"] == 2.0
    assert attrs["tracescore.analyze.result"] == '{"ok": true}'
    assert "tracescore.supersedes" not in attrs  # a first outcome replaces nothing
    assert span.status.status_code is StatusCode.OK  # a score is a definite outcome of the scoring


def test_failure_span() -> None:
    span = build_span(_record(score=None, label=None, reason=None, error_type="RuntimeError",
                              error_message="Scorer Run Failed: boom"))
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "RuntimeError"
    assert span.events[0].attributes["error.type"] == "RuntimeError"
    assert "gen_ai.evaluation.score.value" not in span.events[0].attributes


def test_make_span_exporter_protocols() -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as SdkGrpcExporter,
    )

    grpc_exp = make_span_exporter(ExportConfig(endpoint="http://127.0.0.1:4317"))
    assert isinstance(grpc_exp, SdkGrpcExporter)  # the SDK's exporter, fed spans encoded by tracescore
    grpc_exp.shutdown()


class FlakySink(SpanExporter):
    """An error-injecting sink: fails the first ``failures`` exports, then records."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        if self.calls <= self.failures:
            return SpanExportResult.FAILURE
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


async def _store_with_records(path: Path, n: int) -> SqliteStore:
    store = SqliteStore(str(path))
    await store.start()
    jobs = [ScoreJob(RunRecord(TRACE, f"{i:016x}"), "quality", "3") for i in range(n)]
    await store.put(jobs)
    for leased in await store.take(n):
        await store.settle(leased, Done(_record(key=leased.job.key, span_id=leased.job.run.span_id)))
    return store


async def test_exporter_drains_outbox(tmp_path: Path) -> None:
    store = await _store_with_records(tmp_path / "q.db", 3)
    sink = InMemorySpanExporter()
    exporter = ScoreExporter(store, sink, Metrics(), max_batch=2)
    assert await exporter.export_batch() == 2
    assert await exporter.export_batch() == 1
    assert await exporter.export_batch() == 0
    assert sorted(format(s.parent.span_id, "016x") for s in sink.get_finished_spans()) == [
        f"{i:016x}" for i in range(3)]
    await store.shutdown()


async def test_backend_outage_delays_never_loses(tmp_path: Path) -> None:
    store = await _store_with_records(tmp_path / "q.db", 4)
    sink = FlakySink(failures=2)
    metrics = Metrics()
    exporter = ScoreExporter(store, sink, metrics, backoff_s=0.01, max_backoff_s=0.05, poll_s=0.01)
    await exporter.start()
    deadline = time.monotonic() + 30
    while len(sink.spans) < 4 and time.monotonic() < deadline:
        exporter.notify()
        await store.pending(1)  # yields to the loop while the exporter retries
    await exporter.shutdown(1.0)
    assert len(sink.spans) == 4 and len({s.parent.span_id for s in sink.spans}) == 4
    assert sink.calls >= 3
    assert await store.pending(10) == []
    assert b"tracescore_export_failures_total 2.0" in metrics.render()
    await store.shutdown()


async def test_an_outage_is_one_warning_naming_the_endpoint_and_one_when_it_is_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Three failed exports log one warning (the destination and the cause), the retries
    within the outage only DEBUG lines; the export that works again logs how long it lasted."""
    store = await _store_with_records(tmp_path / "q.db", 1)
    sink = FlakySink(failures=3)
    exporter = ScoreExporter(store, sink, Metrics(), destination="http://backend:4317 (grpc)")
    caplog.set_level(logging.DEBUG, logger="collector.export.scores")
    outcomes = [await exporter.export_batch(within_s=60) for _ in range(4)]
    assert outcomes == [-1, -1, -1, 1]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        "score export to http://backend:4317 (grpc) failed: the span exporter reported a failure; the scores "
        "are kept in the outbox and retried (backoff up to 30 s)",
        "score export to http://backend:4317 (grpc) recovered after "
        + warnings[1].split("recovered after ", 1)[-1],
    ]
    assert warnings[1].endswith("s and 3 failed attempts (3 score records retried); last error: "
                                "the span exporter reported a failure")
    assert sum("failed again" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG) == 2
    await store.shutdown()


async def test_the_sdk_exporters_cause_is_the_outages_cause_and_its_retry_lines_are_debug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK's gRPC exporter against a port where nothing listens: tracescore's warning names
    the endpoint and the gRPC status the SDK logged; the SDK's own lines are not warnings."""
    from ports import hold_port  # tests/support

    store = await _store_with_records(tmp_path / "q.db", 1)
    holder = hold_port()
    try:
        cfg = ExportConfig(endpoint=f"http://127.0.0.1:{holder.getsockname()[1]}", timeout_s=0.5)
        metrics = Metrics()
        exporter = ScoreExporter(store, make_span_exporter(cfg), metrics, destination=cfg.destination())
        caplog.set_level(logging.DEBUG)
        await exporter.start()
        deadline = time.monotonic() + 15
        while b"tracescore_export_failures_total 1.0" not in metrics.render() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await exporter.shutdown(0.1)
    finally:
        holder.close()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["collector.export.scores"], [r.getMessage() for r in warnings]
    line = warnings[0].getMessage()
    assert line.startswith(f"score export to {cfg.endpoint} (grpc) failed: ") and "UNAVAILABLE" in line, line
    assert any(r.name == "collector.export.sdk_errors" and "UNAVAILABLE" in r.getMessage() for r in caplog.records)
    await store.shutdown()


def test_score_signals_disabled_without_endpoint_or_flags() -> None:
    from collector.export.signals import ScoreSignals, build_log_record

    assert not ScoreSignals(ExportConfig(endpoint="http://127.0.0.1:1")).enabled
    assert not ScoreSignals(ExportConfig(score_logs=True)).enabled  # no endpoint
    rec = build_log_record(_record())
    assert rec.log_record.attributes["gen_ai.evaluation.score.value"] == 0.75
    assert format(rec.log_record.trace_id, "032x") == TRACE


async def test_unexportable_record_is_dropped_not_blocking(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    jobs = [ScoreJob(RunRecord(TRACE, f"{i:016x}"), "quality", "3") for i in range(2)]
    await store.put(jobs)
    first, second = await store.take(2)
    await store.settle(first, Done(_record(key=first.job.key, trace_id="not-hex")))
    await store.settle(second, Done(_record(key=second.job.key, span_id=second.job.run.span_id)))
    sink = InMemorySpanExporter()
    metrics = Metrics()
    exporter = ScoreExporter(store, sink, metrics)
    assert await exporter.export_batch() == 1
    assert await store.pending(10) == []
    assert len(sink.get_finished_spans()) == 1
    assert b'tracescore_errors_total{component="export"} 1.0' in metrics.render()
    await store.shutdown()


async def test_export_never_waits_behind_user_code_on_the_default_executor(tmp_path: Path) -> None:
    import asyncio
    import threading

    store = await _store_with_records(tmp_path / "q.db", 3)
    sink = InMemorySpanExporter()
    exporter = ScoreExporter(store, sink, Metrics())
    release = threading.Event()
    loop = asyncio.get_running_loop()
    # Sync scorer steps occupying every default-executor thread (and more queued behind them).
    blockers = [loop.run_in_executor(None, release.wait) for _ in range(64)]
    try:
        async with asyncio.timeout(5):
            assert await exporter.export_batch() == 3
    finally:
        release.set()
        await asyncio.gather(*blockers)
    await store.shutdown()


async def test_an_otel_endpoint_with_a_path_is_a_base_url() -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT is a base URL (OpenTelemetry spec): a backend that lives
    under a path (Langfuse's /api/public/otel) gets scores at <base>/v1/traces."""
    import asyncio

    from aiohttp import web
    from web_app import start_app

    from collector.config import config_from_dict

    paths: list[str] = []

    async def receive(request: web.Request) -> web.Response:
        paths.append(request.path)
        await request.read()
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/{tail:.*}", receive)
    runner, port = await start_app(app)
    try:
        config = config_from_dict({}, env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}/api/public/otel",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        exporter = make_span_exporter(config.export)
        assert exporter is not None
        result = await asyncio.to_thread(exporter.export, [build_span(_record())])
        exporter.shutdown()
        assert result is SpanExportResult.SUCCESS
        assert paths == ["/api/public/otel/v1/traces"]
    finally:
        await runner.cleanup()


async def test_a_score_waits_until_its_runs_spans_were_forwarded(tmp_path: Path) -> None:
    """A record decided when the forward log's head was 2 is exported only once the log was
    sent through position 2; one decided before anything was received goes at once."""
    store = SqliteStore(str(tmp_path / "q.db"), forward=True)
    await store.start()
    for n in range(3):
        await store.forward_log.forward_append("traces", f"request {n}".encode())
    jobs = [ScoreJob(RunRecord(TRACE, f"{i:016x}", forward_mark=mark), "quality", "3")
            for i, mark in enumerate((0, 2))]
    await store.put(jobs)
    for leased in await store.take(2):
        run = leased.job.run
        await store.settle(leased, Done(_record(key=leased.job.key, span_id=run.span_id,
                                                forward_mark=run.forward_mark)))
    sink = InMemorySpanExporter()
    exporter = ScoreExporter(store, sink, Metrics(), forwarded=store.forward_log, hold_s=0.0)
    assert await exporter.export_batch() == 1
    assert [format(s.parent.span_id, "016x") for s in sink.get_finished_spans()] == [f"{0:016x}"]
    await store.forward_log.forward_release(1)
    assert await exporter.export_batch() == 0  # position 2 not forwarded yet: still held
    await store.forward_log.forward_release(2)
    assert await exporter.export_batch() == 1
    assert len(sink.get_finished_spans()) == 2
    await store.shutdown()


@pytest.mark.parametrize("store_kind", ["sqlite", "redis"])
async def test_a_score_held_for_its_spans_leaves_with_the_flush_before_the_daemon_stops(
    tmp_path: Path, store_kind: str,
) -> None:
    """Held back while the run's spans were on their way, then forwarded: the flush at shutdown
    sends the score now, not after a restart (the hold would otherwise outlast the flush)."""
    import uuid

    from collector.store.redis.store import RedisStore

    store: Any = (SqliteStore(str(tmp_path / "q.db"), forward=True) if store_kind == "sqlite"
                  else RedisStore("redis://127.0.0.1:6379/0", key_prefix=f"test-{uuid.uuid4().hex[:12]}:",
                                  forward=True, block_ms=0))
    await store.start()
    try:
        await store.forward_log.forward_append("traces", b"the run's spans")
        (job,) = [ScoreJob(RunRecord(TRACE, f"{1:016x}", forward_mark=1), "quality", "3")]
        await store.put([job])
        (leased,) = await store.take(1)
        await store.settle(leased, Done(_record(key=job.key, span_id=job.run.span_id, forward_mark=1)))
        sink = InMemorySpanExporter()
        exporter = ScoreExporter(store, sink, Metrics(), forwarded=store.forward_log, hold_s=600.0)
        assert await exporter.export_batch() == 0  # held: the spans were not forwarded yet
        assert len(await store.forward_log.forward_pending(1 << 20, 10)) == 1  # as the forwarder reads them
        await store.forward_log.forward_release(1)  # the forwarder sent them, then stopped
        await exporter.start()
        await exporter.shutdown(timeout=30.0)
        assert [format(s.parent.span_id, "016x") for s in sink.get_finished_spans()] == [f"{1:016x}"]
    finally:
        if store_kind == "redis":
            await store.delete_all()
        await store.shutdown()


class CallSizes(SpanExporter):
    """A sink recording how many spans each export call carried."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.sizes.append(len(spans))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


async def _settle_apart(store: SqliteStore, exporter: ScoreExporter, n: int, gap_s: float) -> None:
    """Settle ``n`` queued jobs ``gap_s`` apart, waking the exporter after each, as a worker does."""
    for leased in await store.take(n):
        await store.settle(leased, Done(_record(key=leased.job.key, span_id=leased.job.run.span_id)))
        exporter.notify()
        await asyncio.sleep(gap_s)


@pytest.mark.parametrize(("delay_s", "sizes"), [(0.0, [1, 1, 1]), (0.5, [3])])
async def test_scores_finished_within_the_batch_delay_share_one_export_call(
        tmp_path: Path, delay_s: float, sizes: list[int]) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    await store.put([ScoreJob(RunRecord(TRACE, f"{i:016x}"), "quality", "3") for i in range(3)])
    sink = CallSizes()
    exporter = ScoreExporter(store, sink, Metrics(), batch_delay_s=delay_s)
    await exporter.start()
    try:
        # woken from idle by the first, the exporter waits out the delay: all three (0.1 s apart) share a call
        await _settle_apart(store, exporter, 3, 0.1)
        await wait_until(lambda: sum(sink.sizes) >= 3, timeout=5, what="3 scores exported")
        assert sink.sizes == sizes
    finally:
        await exporter.shutdown()
        await store.shutdown()


async def test_a_full_batch_goes_without_the_batch_delay_and_the_delay_never_holds_shutdown(tmp_path: Path) -> None:
    store = await _store_with_records(tmp_path / "q.db", 5)
    sink = CallSizes()
    exporter = ScoreExporter(store, sink, Metrics(), max_batch=2, batch_delay_s=60.0)
    await exporter.start()
    await wait_until(lambda: sum(sink.sizes) >= 5, timeout=5, what="5 scores exported")
    assert sink.sizes == [2, 2, 1]  # full batches back to back; only the last, partial one waits after it
    started = time.monotonic()
    await exporter.shutdown(timeout=10)
    assert time.monotonic() - started < 5  # the 60 s delay it was in did not hold it
    await store.shutdown()
