"""Score spans and the outbox-draining exporter, against an OTLP/HTTP endpoint on loopback that
answers from a script (and an OTLP/gRPC port where nothing listens)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from otlp_http_backend import OtlpHttpBackend
from polling import wait_until

from collector.common.metrics import Metrics
from collector.common.types import Done, RunRecord, ScoreJob, ScoreRecord
from collector.config import ExportConfig
from collector.export.evaluation import build_span
from collector.export.scores import ScoreExporter
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


@pytest.fixture
async def backend() -> AsyncIterator[OtlpHttpBackend]:
    started = await OtlpHttpBackend().start()
    yield started
    await started.stop()


def http(backend: OtlpHttpBackend, **options: Any) -> ExportConfig:
    return ExportConfig(endpoint=backend.url, protocol="http/protobuf", timeout_s=2.0, **options)


def parents(backend: OtlpHttpBackend) -> list[str]:
    """The scored span ids of the evaluation spans the backend took, in arrival order."""
    return [span.parent_span_id.hex() for span in backend.spans()]


async def next_round(exporter: ScoreExporter) -> int:
    """The next round that finds a record due (a deferred record waits out its short backoff)."""
    deadline = time.monotonic() + 10
    while (done := await exporter.round()) == 0:
        assert time.monotonic() < deadline, "no record came due"
        await asyncio.sleep(0.005)
    return done


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


async def _store_with_records(path: Path, n: int) -> SqliteStore:
    store = SqliteStore(str(path))
    await store.start()
    jobs = [ScoreJob(RunRecord(TRACE, f"{i:016x}"), "quality", "3") for i in range(n)]
    await store.put(jobs)
    for leased in await store.take(n):
        await store.settle(leased, Done(_record(key=leased.job.key, span_id=leased.job.run.span_id)))
    return store


async def test_exporter_drains_outbox(tmp_path: Path, backend: OtlpHttpBackend) -> None:
    store = await _store_with_records(tmp_path / "q.db", 3)
    exporter = ScoreExporter(store, http(backend), Metrics(), max_batch=2)
    await exporter.course.open()
    assert [await exporter.round() for _ in range(3)] == [2, 1, 0]
    await exporter.course.close()
    assert sorted(parents(backend)) == [f"{i:016x}" for i in range(3)]
    assert backend.paths == ["/v1/traces"] * 2
    await store.shutdown()


async def test_backend_outage_delays_never_loses(tmp_path: Path, backend: OtlpHttpBackend) -> None:
    store = await _store_with_records(tmp_path / "q.db", 4)
    backend.script = [(503, "")] * 2
    metrics = Metrics()
    exporter = ScoreExporter(store, http(backend, max_backoff_s=0.05), metrics, backoff_s=0.01, poll_s=0.01)
    await exporter.start()
    await wait_until(lambda: len(backend.spans()) == 4, timeout=30, what="the four scores")
    await exporter.shutdown(1.0)
    assert sorted(parents(backend)) == [f"{i:016x}" for i in range(4)]  # each once
    assert len(backend.paths) == 3
    assert await store.pending(10) == []
    assert b"tracescore_export_failures_total 2.0" in metrics.render()
    await store.shutdown()


async def test_an_outage_is_one_warning_naming_the_endpoint_and_one_when_it_is_over(
    tmp_path: Path, backend: OtlpHttpBackend, caplog: pytest.LogCaptureFixture,
) -> None:
    """Three failed exports log one warning (the destination and the cause), the retries
    within the outage only DEBUG lines; the export that works again logs how long it lasted."""
    store = await _store_with_records(tmp_path / "q.db", 1)
    backend.script = [(503, "")] * 3
    exporter = ScoreExporter(store, http(backend), Metrics(), backoff_s=0.001)
    await exporter.course.open()
    caplog.set_level(logging.DEBUG, logger="collector.export.scores")
    outcomes = [await next_round(exporter) for _ in range(4)]
    await exporter.course.close()
    assert outcomes == [-1, -1, -1, 1]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    destination = f"{backend.url} (http/protobuf)"
    assert warnings == [
        f"score export to {destination} failed: HTTP 503 Service Unavailable; the scores are kept in the outbox "
        "and retried (backoff up to 30 s)",
        f"score export to {destination} recovered after " + warnings[1].split("recovered after ", 1)[-1],
    ]
    assert warnings[1].endswith("s and 3 failed attempts (3 score records retried); last error: "
                                "HTTP 503 Service Unavailable")
    assert sum("failed again" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG) == 2
    await store.shutdown()


async def test_an_unknown_experiment_holds_the_scores_and_says_so_in_the_backends_words(
    tmp_path: Path, backend: OtlpHttpBackend, caplog: pytest.LogCaptureFixture,
) -> None:
    """A 404 carrying the backend's message (MLflow's answer for an experiment that does not exist)
    keeps the scores, as an outage would, and the sender's state is "held" with that message and
    the fix; once the backend takes them, each score arrives once."""
    store = await _store_with_records(tmp_path / "q.db", 2)
    missing = '{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "No Experiment with id=1 exists"}'
    backend.script = [(404, missing)] * 2
    exporter = ScoreExporter(store, http(backend), Metrics(), backoff_s=0.001)
    await exporter.course.open()
    caplog.set_level(logging.WARNING, logger="collector.export.scores")
    assert await next_round(exporter) == -1
    state = exporter.state()
    assert (state["state"], state["message"], state["attempts"]) == ("held", "No Experiment with id=1 exists", 1)
    assert state["cause"] == "HTTP 404 Not Found: No Experiment with id=1 exists" and "create it" in state["fix"]
    assert "a configuration change is needed" in caplog.records[0].getMessage()
    assert [await next_round(exporter) for _ in range(2)] == [-1, 2]
    await exporter.course.close()
    assert exporter.state()["state"] == "ok" and sorted(parents(backend)) == [f"{i:016x}" for i in range(2)]
    assert await store.pending(10) == []
    await store.shutdown()


async def test_a_batch_refused_for_good_is_sent_record_by_record_and_only_the_refused_one_is_dropped(
    tmp_path: Path, backend: OtlpHttpBackend, caplog: pytest.LogCaptureFixture,
) -> None:
    store = await _store_with_records(tmp_path / "q.db", 3)
    backend.script = [(400, '{"detail": "Invalid OpenTelemetry format"}'), (200, ""), (400, "bad span")]
    metrics = Metrics()
    exporter = ScoreExporter(store, http(backend), metrics)
    await exporter.course.open()
    caplog.set_level(logging.ERROR, logger="collector.export.scores")
    assert await exporter.round() == 3
    await exporter.course.close()
    assert len(backend.paths) == 4  # the batch, then each record alone
    assert len(backend.spans()) == 2
    assert await store.pending(10) == []
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.endswith("refused 1 score record(s) for good (HTTP 400 Bad Request: bad span); dropped"), line
    assert exporter.state()["refused"] == 1
    assert metrics.registry.get_sample_value("tracescore_errors_total", {"component": "export"}) == 1
    await store.shutdown()


async def test_a_grpc_endpoint_where_nothing_listens_is_one_warning_naming_it_and_the_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """OTLP/gRPC to a port where nothing listens: one warning, naming the endpoint and the gRPC
    status; the score stays in the outbox."""
    from ports import hold_port  # tests/support

    store = await _store_with_records(tmp_path / "q.db", 1)
    holder = hold_port()
    try:
        cfg = ExportConfig(endpoint=f"http://127.0.0.1:{holder.getsockname()[1]}", timeout_s=0.5)
        metrics = Metrics()
        exporter = ScoreExporter(store, cfg, metrics, backoff_s=0.01)
        caplog.set_level(logging.DEBUG)
        await exporter.start()
        await wait_until(lambda: b"tracescore_export_failures_total 2.0" in metrics.render(), timeout=15,
                         what="two failed attempts")
        await exporter.shutdown(0.1)
    finally:
        holder.close()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["collector.export.scores"], [r.getMessage() for r in warnings]
    line = warnings[0].getMessage()
    assert line.startswith(f"score export to {cfg.endpoint} (grpc) failed: gRPC UNAVAILABLE"), line
    assert len(await store.pending(10, 60.0)) == 1
    await store.shutdown()


def test_score_signals_disabled_without_endpoint_or_flags() -> None:
    from collector.export.signals import ScoreSignals, build_log_record

    assert not ScoreSignals(ExportConfig(endpoint="http://127.0.0.1:1")).enabled
    assert not ScoreSignals(ExportConfig(score_logs=True)).enabled  # no endpoint
    rec = build_log_record(_record())
    assert rec.log_record.attributes["gen_ai.evaluation.score.value"] == 0.75
    assert format(rec.log_record.trace_id, "032x") == TRACE


async def test_unexportable_record_is_dropped_not_blocking(tmp_path: Path, backend: OtlpHttpBackend) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    jobs = [ScoreJob(RunRecord(TRACE, f"{i:016x}"), "quality", "3") for i in range(2)]
    await store.put(jobs)
    first, second = await store.take(2)
    await store.settle(first, Done(_record(key=first.job.key, trace_id="not-hex")))
    await store.settle(second, Done(_record(key=second.job.key, span_id=second.job.run.span_id)))
    metrics = Metrics()
    exporter = ScoreExporter(store, http(backend), metrics)
    await exporter.course.open()
    assert await exporter.round() == 2  # one exported, one dropped
    await exporter.course.close()
    assert await store.pending(10) == []
    assert len(backend.spans()) == 1
    assert b'tracescore_errors_total{component="export"} 1.0' in metrics.render()
    await store.shutdown()


async def test_export_never_waits_behind_user_code_on_the_default_executor(
    tmp_path: Path, backend: OtlpHttpBackend,
) -> None:
    """Sync scorer steps occupying every default-executor thread: the export, and its optional
    copies (on the exporter's own thread), still go."""
    import threading

    store = await _store_with_records(tmp_path / "q.db", 3)
    copied: list[int] = []
    exporter = ScoreExporter(store, http(backend), Metrics(), on_exported=lambda records: copied.append(len(records)))
    await exporter.course.open()
    release = threading.Event()
    loop = asyncio.get_running_loop()
    blockers = [loop.run_in_executor(None, release.wait) for _ in range(64)]
    try:
        async with asyncio.timeout(5):
            assert await exporter.round() == 3
    finally:
        release.set()
        await asyncio.gather(*blockers)
    await exporter.course.close()
    assert copied == [3]
    await store.shutdown()


async def test_an_otel_endpoint_with_a_path_is_a_base_url(tmp_path: Path, backend: OtlpHttpBackend) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT is a base URL (OpenTelemetry spec): a backend that lives
    under a path (Langfuse's /api/public/otel) gets scores at <base>/v1/traces."""
    from collector.config import config_from_dict

    config = config_from_dict({}, env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"{backend.url}/api/public/otel",
                                       "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    store = await _store_with_records(tmp_path / "q.db", 1)
    exporter = ScoreExporter(store, config.export, Metrics())
    await exporter.course.open()
    assert await exporter.round() == 1
    await exporter.course.close()
    assert backend.paths == ["/api/public/otel/v1/traces"]
    await store.shutdown()


async def test_a_score_waits_until_its_runs_spans_were_forwarded(tmp_path: Path, backend: OtlpHttpBackend) -> None:
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
    exporter = ScoreExporter(store, http(backend), Metrics(), forwarded=store.forward_log, hold_s=0.0)
    await exporter.course.open()
    assert await exporter.round() == 1
    assert parents(backend) == [f"{0:016x}"]
    await store.forward_log.forward_release(1)
    assert await exporter.round() == 0  # position 2 not forwarded yet: still held
    await store.forward_log.forward_release(2)
    assert await exporter.round() == 1
    await exporter.course.close()
    assert len(backend.spans()) == 2
    await store.shutdown()


@pytest.mark.parametrize("store_kind", ["sqlite", "redis"])
async def test_a_score_held_for_its_spans_leaves_with_the_flush_before_the_daemon_stops(
    tmp_path: Path, store_kind: str, backend: OtlpHttpBackend,
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
        exporter = ScoreExporter(store, http(backend), Metrics(), forwarded=store.forward_log, hold_s=600.0)
        assert await exporter.round() == 0  # held: the spans were not forwarded yet
        assert len(await store.forward_log.forward_pending(1 << 20, 10)) == 1  # as the forwarder reads them
        await store.forward_log.forward_release(1)  # the forwarder sent them, then stopped
        await exporter.start()
        await exporter.shutdown(timeout=30.0)
        assert parents(backend) == [f"{1:016x}"]
    finally:
        if store_kind == "redis":
            await store.delete_all()
        await store.shutdown()


async def _settle_apart(store: SqliteStore, exporter: ScoreExporter, n: int, gap_s: float) -> None:
    """Settle ``n`` queued jobs ``gap_s`` apart, waking the exporter after each, as a worker does."""
    for leased in await store.take(n):
        await store.settle(leased, Done(_record(key=leased.job.key, span_id=leased.job.run.span_id)))
        exporter.notify()
        await asyncio.sleep(gap_s)


@pytest.mark.parametrize(("delay_s", "sizes"), [(0.0, [1, 1, 1]), (0.5, [3])])
async def test_scores_finished_within_the_batch_delay_share_one_export_call(
        tmp_path: Path, backend: OtlpHttpBackend, delay_s: float, sizes: list[int]) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    await store.put([ScoreJob(RunRecord(TRACE, f"{i:016x}"), "quality", "3") for i in range(3)])
    exporter = ScoreExporter(store, http(backend), Metrics(), batch_delay_s=delay_s)
    await exporter.start()
    try:
        # woken from idle by the first, the exporter waits out the delay: all three (0.1 s apart) share a call
        await _settle_apart(store, exporter, 3, 0.1)
        await wait_until(lambda: sum(backend.sizes()) >= 3, timeout=5, what="3 scores exported")
        assert backend.sizes() == sizes
    finally:
        await exporter.shutdown()
        await store.shutdown()


async def test_a_full_batch_goes_without_the_batch_delay_and_the_delay_never_holds_shutdown(
    tmp_path: Path, backend: OtlpHttpBackend,
) -> None:
    store = await _store_with_records(tmp_path / "q.db", 5)
    exporter = ScoreExporter(store, http(backend), Metrics(), max_batch=2, batch_delay_s=60.0)
    await exporter.start()
    await wait_until(lambda: sum(backend.sizes()) >= 5, timeout=5, what="5 scores exported")
    assert backend.sizes() == [2, 2, 1]  # full batches back to back; only the last, partial one waits after it
    started = time.monotonic()
    await exporter.shutdown(timeout=10)
    assert time.monotonic() - started < 5  # the 60 s delay it was in did not hold it
    await store.shutdown()
