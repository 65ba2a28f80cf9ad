"""End to end in one process: SDK OTLP exporters -> daemon -> capturing OTLP backend."""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from daemon_harness import (
    CaptureBackend,
    HttpCaptureBackend,
    emit_agent_trace,
    free_port,
    wait_until,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

from collector.config import config_from_dict
from collector.service import Service
from collector.work.registry import ScorerRegistry

HERE = Path(__file__).parent
SCORERS = HERE / "scorers_for_tests.py"


def _config(tmp_path: Path, backend: str, **export: object) -> dict:
    return {
        "receiver": {"grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0",
                     "max_body_bytes": 1024 * 1024},
        "assembly": {"decision_wait": 0.2},
        "queue": {"url": f"sqlite:///{tmp_path / 'queue.db'}"},
        "export": {"endpoint": backend, "timeout_s": 2.0, "max_backoff_s": 0.5, **export},
        "scorers": [
            {"ref": f"{SCORERS}:answer_length"},
            {"ref": f"{SCORERS}:always_fails", "filter": {"service": "support-bot"}},
        ],
    }


async def _service(data: dict) -> Service:
    config = config_from_dict(data, env={})
    service = Service(config, await asyncio.to_thread(ScorerRegistry.load, config.scorers))
    await service.start()
    return service


@pytest.fixture
async def backend() -> AsyncIterator[CaptureBackend]:
    server = await CaptureBackend().start()
    yield server
    await server.stop()


@pytest.mark.parametrize("decide_processes", [0, 1], ids=["decided-in-thread", "decided-in-a-process"])
async def test_scores_reach_backend_as_child_spans(tmp_path: Path, backend: CaptureBackend,
                                                   decide_processes: int) -> None:
    config = _config(tmp_path, backend.endpoint, headers={"X-Tenant": "acme"})
    config["assembly"]["decide_processes"] = decide_processes
    service = await _service(config)
    try:
        assert service.grpc is not None and service.http is not None
        grpc_exp = GrpcExporter(endpoint=f"127.0.0.1:{service.grpc.port}", insecure=True,
                                compression=grpc.Compression.Gzip)
        http_exp = HttpExporter(endpoint=f"http://127.0.0.1:{service.http.port}/v1/traces",
                                compression=HttpCompression.Gzip)
        t1, s1 = await asyncio.to_thread(emit_agent_trace, grpc_exp)
        t2, s2 = await asyncio.to_thread(emit_agent_trace, http_exp, "billing-bot", "billing", "Paris.")
        await wait_until(lambda: len(backend.scores()) == 3, what="three score spans")

        by_key = {(format_trace(s), s.attributes["tracescore.scorer.id"]): s for s in backend.scores()}
        assert set(by_key) == {(t1, "answer-length"), (t1, "always-fails"), (t2, "answer-length")}
        ok = by_key[(t1, "answer-length")]
        assert ok.span.parent_span_id.hex() == s1 and ok.span.trace_id.hex() == t1
        assert ok.span.name == "evaluation Answer length" and ok.span.kind == 1  # INTERNAL
        assert ok.service == "support-bot"  # the scored span's resource: a score never renames the service
        assert {by_key[(t2, "answer-length")].service} == {"billing-bot"}
        assert [e.name for e in ok.span.events] == ["gen_ai.evaluation.result"]
        ev = ok.event_attributes
        assert ev["gen_ai.evaluation.name"] == "Answer length"
        assert ev["gen_ai.evaluation.score.value"] == pytest.approx(0.31)
        assert ev["gen_ai.evaluation.explanation"] == "31 characters"
        assert ev["gen_ai.response.id"] == "chatcmpl-test-1"
        assert ev["tracescore.scorer.version"] == "1"
        assert ev["tracescore.analyze.result"] == '{"chars": 31}'
        assert ev["tracescore.run.id"]
        assert by_key[(t2, "answer-length")].span.parent_span_id.hex() == s2
        assert by_key[(t2, "answer-length")].event_attributes["gen_ai.evaluation.score.value"] == 0.06

        failed = by_key[(t1, "always-fails")]
        assert failed.span.status.code == 2  # ERROR
        assert failed.event_attributes["error.type"] == "RuntimeError"
        assert "gen_ai.evaluation.score.value" not in failed.event_attributes
        assert len(await service.store.dead_letters()) == 1

        # The agent's own spans were forwarded unchanged.
        await wait_until(lambda: len(backend.forwarded()) == 4, what="forwarded spans")
        names = sorted((s.service, s.span.name) for s in backend.forwarded())
        assert names == [("billing-bot", "chat gpt-4o-mini"), ("billing-bot", "invoke_agent billing"),
                         ("support-bot", "chat gpt-4o-mini"), ("support-bot", "invoke_agent support")]
        assert {s.span.span_id.hex() for s in backend.forwarded()} >= {s1, s2}
        # Configured headers reach the backend on score exports and forwards alike.
        assert all(m.get("x-tenant") == "acme" for m in backend.metadata)

        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{service.http.port}/metrics") as resp:
                text = await resp.text()
        assert 'tracescore_spans_received_total{transport="grpc"} 2.0' in text
        assert 'tracescore_runs_found_total{convention="genai"} 2.0' in text
        assert 'tracescore_decisions_total{reason="filtered_out",scorer="always-fails"} 1.0' in text
        assert 'tracescore_decisions_total{reason="scored",scorer="answer-length"} 2.0' in text
        assert 'tracescore_decisions_total{reason="failed",scorer="always-fails"} 1.0' in text
        assert "tracescore_score_duration_seconds_bucket" in text
        assert all(f'tracescore_jobs{{state="{state}"}}' in text for state in ("queued", "in_flight", "failed"))
    finally:
        await service.shutdown()


async def test_steps_read_additional_context_in_the_daemon(tmp_path: Path, backend: CaptureBackend) -> None:
    """Issue 19 (5): a run the daemon scores has ``run.additional_context`` (``{}``: nothing gives
    one), as the README promises every step; reading it used to fail with an AttributeError."""
    data = _config(tmp_path, backend.endpoint, forward_spans=False)
    data["scorers"] = [{"ref": f"{SCORERS}:context_keys"}]
    service = await _service(data)
    try:
        assert service.grpc is not None
        exporter = GrpcExporter(endpoint=f"127.0.0.1:{service.grpc.port}", insecure=True)
        await asyncio.to_thread(emit_agent_trace, exporter)
        await wait_until(lambda: len(backend.scores()) == 1, what="the score")
        (score,) = backend.scores()
        assert "error.type" not in score.event_attributes, score.event_attributes["error.type"]
        assert score.event_attributes["gen_ai.evaluation.score.value"] == 0.0
        assert score.event_attributes["gen_ai.evaluation.explanation"] == "{}"
    finally:
        await service.shutdown()


async def test_http_exporters_at_a_trailing_slash_or_a_wrong_path(tmp_path: Path, backend: CaptureBackend,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Issue 19 (7), with the SDK's OTLP/HTTP exporter: an endpoint given with a trailing slash is
    served; at a wrong path the exporter's own error log names the paths that are."""
    data = _config(tmp_path, backend.endpoint, forward_spans=False)
    data["scorers"] = data["scorers"][:1]
    service = await _service(data)
    try:
        assert service.http is not None
        base = f"http://127.0.0.1:{service.http.port}"
        with caplog.at_level(logging.ERROR, logger="opentelemetry.exporter"):
            await asyncio.to_thread(emit_agent_trace, HttpExporter(endpoint=f"{base}/v1/trace"),
                                    expect_success=False)
        failures = [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry.exporter")]
        assert failures and all("404" in m and "/v1/traces" in m and "/v1/logs" in m for m in failures), failures
        trace_id, _ = await asyncio.to_thread(emit_agent_trace, HttpExporter(endpoint=f"{base}/v1/traces/"))
        await wait_until(lambda: len(backend.scores()) == 1, what="the score of the trace sent to /v1/traces/")
        assert backend.scores()[0].span.trace_id.hex() == trace_id
    finally:
        await service.shutdown()


def format_trace(span: object) -> str:
    return span.span.trace_id.hex()  # type: ignore[attr-defined]


async def test_bad_requests_do_not_stop_the_daemon(tmp_path: Path, backend: CaptureBackend) -> None:
    data = _config(tmp_path, backend.endpoint)
    data["receiver"]["auth_token"] = "s3cret"
    service = await _service(data)
    try:
        assert service.http is not None and service.grpc is not None
        url = f"http://127.0.0.1:{service.http.port}/v1/traces"
        auth = {"Authorization": "Bearer s3cret"}
        pb = {**auth, "Content-Type": "application/x-protobuf"}
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            for headers, body, status in [
                ({"Content-Type": "application/x-protobuf"}, b"", 401),
                (pb, b"\x0a\xff\xff", 400),
                ({**auth, "Content-Type": "application/xml"}, b"<x/>", 415),
                (pb, b"\0" * (1024 * 1024 + 1), 413),
                ({**pb, "Content-Encoding": "gzip"}, gzip.compress(b"\0" * (64 * 1024 * 1024)), 413),
            ]:
                async with session.post(url, data=body, headers=headers) as resp:
                    assert resp.status == status
            async with session.get(f"http://127.0.0.1:{service.http.port}/readyz") as resp:
                assert resp.status == 200
        # Still serving: an authenticated agent trace is scored.
        exporter = HttpExporter(endpoint=url, headers={"Authorization": "Bearer s3cret"})
        trace_id, _ = await asyncio.to_thread(emit_agent_trace, exporter)
        unauth = GrpcExporter(endpoint=f"127.0.0.1:{service.grpc.port}", insecure=True, timeout=2)
        await asyncio.to_thread(emit_agent_trace, unauth, expect_success=False)  # refused: UNAUTHENTICATED
        await wait_until(lambda: len(backend.scores()) == 2, what="scores of the accepted trace")
        assert {s.span.trace_id.hex() for s in backend.scores()} == {trace_id}
    finally:
        await service.shutdown()


async def test_backend_down_then_up_every_score_once(tmp_path: Path) -> None:
    backend = CaptureBackend(port=free_port())
    service = await _service(_config(tmp_path, backend.endpoint, forward_spans=False))
    try:
        assert service.grpc is not None
        exporter = GrpcExporter(endpoint=f"127.0.0.1:{service.grpc.port}", insecure=True)
        traces = [await asyncio.to_thread(emit_agent_trace, exporter) for _ in range(3)]
        await wait_until(lambda: service.metrics.export_failures._value.get() >= 1,
                         what="a failed export while the backend is down")

        async def outbox_full() -> bool:
            return (await service.store.stats()).outbox == 6

        await wait_until(outbox_full, what="six results waiting in the outbox")
        assert not backend.scores()
        await backend.start()
        await wait_until(lambda: len(backend.scores()) >= 6, timeout=30, what="all scores after recovery")
        await wait_until(lambda: service.store.depth() == 0, what="an empty outbox")
        keys = [(s.span.trace_id.hex(), s.attributes["tracescore.scorer.id"]) for s in backend.scores()]
        assert len(keys) == len(set(keys)) == 6
        assert {k[0] for k in keys} == {t for t, _ in traces}
    finally:
        await service.shutdown()
        await backend.stop()


async def test_http_protobuf_export_and_logs_forwarding(tmp_path: Path) -> None:
    backend = await HttpCaptureBackend().start()
    data = _config(tmp_path, backend.endpoint, protocol="http/protobuf")
    data["receiver"]["grpc_endpoint"] = ""
    service = await _service(data)
    try:
        assert service.grpc is None and service.http is not None
        fixtures = HERE.parent / "fixtures" / "openai-v2-events"
        base = f"http://127.0.0.1:{service.http.port}"
        async with aiohttp.ClientSession() as session:
            for path, name in (("/v1/logs", "S1.logs.pb"), ("/v1/traces", "S1.pb")):
                async with session.post(base + path, data=(fixtures / name).read_bytes(),
                                        headers={"Content-Type": "application/x-protobuf"}) as resp:
                    assert resp.status == 200
        await wait_until(lambda: len(backend.scores()) == 1, what="a score over OTLP/HTTP")
        (score,) = backend.scores()
        # The content came from the log records: the answer has 31 characters.
        assert score.event_attributes["gen_ai.evaluation.score.value"] == pytest.approx(0.31)
        await wait_until(lambda: len(backend.log_requests) == 1 and len(backend.forwarded()) >= 1,
                         what="forwarded logs and spans")
    finally:
        await service.shutdown()
        await backend.stop()


async def test_optional_score_log_records_and_metrics(tmp_path: Path, backend: CaptureBackend) -> None:
    data = _config(tmp_path, backend.endpoint, forward_spans=False, score_logs=True, score_metrics=True)
    data["scorers"] = data["scorers"][:1]
    service = await _service(data)
    try:
        assert service.grpc is not None
        exporter = GrpcExporter(endpoint=f"127.0.0.1:{service.grpc.port}", insecure=True)
        trace_id, span_id = await asyncio.to_thread(emit_agent_trace, exporter)
        await wait_until(lambda: len(backend.log_requests) == 1, what="the score as a log record")
        (record,) = [r for req in backend.log_requests for rl in req.resource_logs
                     for sl in rl.scope_logs for r in sl.log_records]
        assert record.event_name == "gen_ai.evaluation.result"
        assert (record.trace_id.hex(), record.span_id.hex()) == (trace_id, span_id)
        attrs = {kv.key: kv.value for kv in record.attributes}
        assert attrs["gen_ai.evaluation.score.value"].double_value == pytest.approx(0.31)
    finally:
        await service.shutdown()  # flushes the metric reader
    points = [(m.name, dp) for req in backend.metric_requests for rm in req.resource_metrics
              for sm in rm.scope_metrics for m in sm.metrics for dp in m.histogram.data_points]
    assert [(name, dp.count, round(dp.sum, 2)) for name, dp in points] == [("gen_ai.evaluation.score", 1, 0.31)]
    assert {kv.key: kv.value.string_value for kv in points[0][1].attributes}["tracescore.scorer.id"] == "answer-length"
