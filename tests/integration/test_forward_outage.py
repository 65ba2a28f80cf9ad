"""The trace backend away for 30 seconds while agents keep sending, and the daemon SIGKILLed
meanwhile: every received span is forwarded exactly once after the backend is back, each
run's evaluation span after the run's own spans, and every score reaches Langfuse once.
And a full forward backlog refuses new requests retryably (HTTP 429 with Retry-After, gRPC
RESOURCE_EXHAUSTED) without losing what it accepted before.

Real `tracescore serve` processes on both stores (the SQLite file; real Redis, as one process
and as separate receiver and worker), agent traces from the OpenTelemetry SDK's OTLP/HTTP
exporter, a real OTLP/gRPC backend (`CaptureBackend`, stopped and started again on its
port) and the Langfuse stand-in server.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp
import grpc
import pytest
from daemon_harness import (
    CaptureBackend,
    agent_trace_body,
    delete_redis_keys,
    emit_agent_trace,
    free_port,
    wait_until,
)
from google.rpc.error_details_pb2 import RetryInfo
from langfuse_server import LangfuseServer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from serve_process import ServeProcess

pytestmark = pytest.mark.long  # lasts tens of seconds by design: scheduled first (see conftest.py)

SCORERS = Path(__file__).parent / "scorers_for_tests.py"
REDIS_URL = "redis://127.0.0.1:6379/0"
OUTAGE_S = 30.0  # how long the backend (and Langfuse) stay away
KILL_AT_S = 8.0  # into the outage: the daemons are SIGKILLed and started again
SEND_EVERY_S = 2.0  # one agent trace this often, before, during and after the outage
SENT_DURING = 8  # at least this many traces sent during the outage, however long the restart took
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text ``text`` (labels in any order; 0 if absent).

    Example:
        >>> metric('m_total{b="2",a="1"} 3.0\\n', "m_total", a="1", b="2")
        3.0
    """
    for line in text.splitlines():
        match = re.fullmatch(rf"{re.escape(name)}(?:{{(.*)}})? (\S+)", line)
        if match and dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or "")) == labels:
            return float(match.group(2))
    return 0.0


class RecordingExporter(SpanExporter):
    """The SDK's OTLP/HTTP exporter, remembering each export's span ids and result."""

    def __init__(self, url: str) -> None:
        self._inner = HttpExporter(endpoint=url, timeout=10)
        self.results: list[tuple[list[str], SpanExportResult]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        self.results.append(([format(s.context.span_id, "016x") for s in spans if s.context], result))
        return result

    def shutdown(self) -> None:
        """Each trace's provider shuts its exporter down at exit; this one is shared: the test closes it."""

    def close(self) -> None:
        self._inner.shutdown()


def daemon(tmp_path: Path, name: str, queue: str, backend: CaptureBackend, langfuse: LangfuseServer | None = None,
           role: str = "all", export: str = "") -> ServeProcess:
    """A `tracescore serve` process forwarding to ``backend`` (OTLP/gRPC), scoring answer length."""
    http_port = free_port()
    config = tmp_path / f"{name}.toml"
    sink = ""
    env = {}
    if langfuse is not None:
        sink = (f'[sinks.langfuse]\nhost = "{langfuse.url}"\npublic_key = "env:TEST_LANGFUSE_PUBLIC"\n'
                f'secret_key = "env:TEST_LANGFUSE_SECRET"\nmin_backoff_s = 0.2\nmax_backoff_s = 0.5\n')
        env = {"TEST_LANGFUSE_PUBLIC": langfuse.public_key, "TEST_LANGFUSE_SECRET": langfuse.secret_key}
    config.write_text(
        f'[receiver]\ngrpc_endpoint = "127.0.0.1:{free_port()}"\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
        f'retry_after_s = 3.0\n[workers]\nhttp_endpoint = "127.0.0.1:{http_port}"\n'  # a worker's own listener
        f'[assembly]\ndecision_wait = 0.3\n[queue]\n{queue}\n'
        f'[export]\nendpoint = "{backend.endpoint}"\ntimeout_s = 2.0\nmax_backoff_s = 1.0\n{export}'
        f'{sink}[[scorers]]\nref = "{SCORERS}:answer_length"\n')
    return ServeProcess(config, tmp_path / f"{name}.log", http_port, env=env, flags=("-v", "--role", role))


def request_index(backend: CaptureBackend) -> dict[str, list[int]]:
    """Span id (hex) -> the indices of the backend's requests that held it."""
    seen: dict[str, list[int]] = {}
    for index, request in enumerate(list(backend.requests)):
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    seen.setdefault(span.span_id.hex(), []).append(index)
    return seen


async def test_forwarded_spans_wait_out_an_outage_and_a_crash_and_arrive_once(
    tmp_path: Path, deployment: tuple[str, bool],
) -> None:
    queue, split = deployment
    backend = await CaptureBackend().start()
    langfuse = await LangfuseServer(secret_key="sk-lf-never-logged").start()
    if split:
        receiver = daemon(tmp_path, "receiver", queue, backend, langfuse, role="receiver")
        scorer = daemon(tmp_path, "worker", queue, backend, langfuse, role="worker")
        daemons = [receiver, scorer]
    else:
        receiver = scorer = daemon(tmp_path, "daemon", queue, backend, langfuse)
        daemons = [receiver]
    agent = RecordingExporter(f"http://127.0.0.1:{receiver.http_port}/v1/traces")
    runs: list[str] = []  # the run (invoke_agent) span ids, in the order sent
    answers: dict[str, int] = {}  # run span id -> its answer's length

    async def send() -> None:
        n = len(runs)
        _, run_span = await asyncio.to_thread(emit_agent_trace, agent, answer="x" * (7 * n + 5))
        runs.append(run_span)
        answers[run_span] = 7 * n + 5

    async def forward_metric(process: ServeProcess, outcome: str) -> float:
        return metric(await process.metrics(), "tracescore_forwarded_requests_total", signal="traces", outcome=outcome)

    try:
        for d in daemons:
            await d.start()
        for _ in range(2):  # the backend up: forwarded, then scored
            await send()
        await wait_until(lambda: len(backend.scores()) == 2, timeout=30, what="the first two scores")
        assert {s.span.parent_span_id.hex() for s in backend.scores()} == set(runs)

        await backend.stop()
        langfuse.down = True
        sent_before = len(backend.requests)
        outage = time.monotonic()
        killed = False
        # The outage lasts OUTAGE_S and SENT_DURING traces at least: a restart slowed down by a
        # busy machine makes it longer, never leaves fewer traces sent during it.
        for _ in range(int(OUTAGE_S / SEND_EVERY_S) + SENT_DURING + 1):  # bounded
            if killed and time.monotonic() - outage >= OUTAGE_S and len(runs) - 2 >= SENT_DURING:
                break
            if not killed and time.monotonic() - outage >= KILL_AT_S:
                # The forwarder met the outage and holds what was received since.
                async def retrying() -> bool:
                    return await forward_metric(receiver, "retried") >= 1

                await wait_until(retrying, timeout=30, what="the forwarder retrying")
                for d in daemons:
                    assert await d.stop(signal.SIGKILL) == -signal.SIGKILL
                for d in daemons:
                    await d.start()
                killed = True
            await send()
            await asyncio.sleep(SEND_EVERY_S)
        assert killed
        during = len(runs) - 2
        assert during >= SENT_DURING, f"only {during} traces sent during the outage"

        async def backlog() -> float:
            return metric(await receiver.metrics(), "tracescore_backlog_items", backlog="forward", destination="otlp")

        async def held() -> bool:
            return await backlog() == 2 * during  # two requests per trace (SimpleSpanProcessor)

        await wait_until(held, timeout=30, what="the forward backlog holding every request sent in the outage")
        assert len(backend.requests) == sent_before  # nothing arrived while it was down

        await backend.start()  # the same port
        langfuse.down = False
        for _ in range(2):  # agents keep sending
            await send()
            await asyncio.sleep(SEND_EVERY_S)

        sent_ids = {span_id for ids, _ in agent.results for span_id in ids}

        def all_arrived() -> bool:
            return (sent_ids <= {s.span.span_id.hex() for s in backend.forwarded()}
                    and len(backend.scores()) >= len(runs) and len(langfuse.scores) >= len(runs))

        await wait_until(all_arrived, timeout=90, what="every span, evaluation span and Langfuse score")

        async def drained() -> bool:
            return await backlog() == 0

        await wait_until(drained, timeout=30, what="the forward backlog to drain")
        assert await forward_metric(receiver, "retried") > 0  # the restarted forwarder met the outage too
        assert await forward_metric(receiver, "sent") > 0
        assert await forward_metric(receiver, "rejected") == 0
        for d in daemons:
            assert await d.stop() == 0
    finally:
        for d in daemons:
            await d.kill()
        await backend.stop()
        await langfuse.stop()
        agent.close()

    # The receiver answered success for every export, the outage included.
    assert [result for _, result in agent.results] == [SpanExportResult.SUCCESS] * (2 * len(runs))
    # Every agent span exactly once; the backend received nothing but them and the evaluation spans.
    forwarded = Counter(s.span.span_id.hex() for s in backend.forwarded())
    assert sorted(forwarded) == sorted(sent_ids) and set(forwarded.values()) == {1}, forwarded
    # One evaluation span per run, each after (or with) the run span it scores.
    scores = Counter(s.span.span_id.hex() for s in backend.scores())
    assert set(scores.values()) == {1}, scores
    assert sorted(s.span.parent_span_id.hex() for s in backend.scores()) == sorted(runs)
    where = request_index(backend)
    for score in backend.scores():
        (score_at,) = where[score.span.span_id.hex()]
        (run_at,) = where[score.span.parent_span_id.hex()]
        assert run_at <= score_at, (score.span.name, run_at, score_at)
    # Langfuse: one score per run, with the run's value.
    assert langfuse.refused == []
    stored = langfuse.by_observation()
    assert sorted(stored) == sorted((run, "Answer length") for run in runs)
    assert all(len(scores) == 1 for scores in stored.values())
    assert {obs: scores[0]["value"] for (obs, _), scores in stored.items()} == pytest.approx(
        {run: min(1.0, answers[run] / 100) for run in runs})


def grpc_export(port: int, body: bytes) -> None:
    """Post one OTLP/gRPC trace request (its encoding) to the receiver on ``port``; blocking."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        channel.unary_unary(TRACE_EXPORT)(body, timeout=10)


@pytest.fixture(params=["sqlite", "redis"])
async def queue(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The ``[queue]`` table of a one-process deployment."""
    if request.param == "sqlite":
        yield f'url = "sqlite:///{tmp_path / "queue.db"}"'
        return
    prefix = f"test-forward-full-{uuid.uuid4().hex[:12]}:"
    yield f'url = "{REDIS_URL}"\nkey_prefix = "{prefix}"'
    await delete_redis_keys(REDIS_URL, prefix)


async def test_a_full_forward_backlog_refuses_retryably_and_loses_nothing_it_accepted(
    tmp_path: Path, queue: str,
) -> None:
    backend = CaptureBackend(port=free_port())  # held, not started yet: the endpoint is down
    process = daemon(tmp_path, "daemon", queue, backend, export="max_forward_backlog_bytes = 6000\n")
    grpc_port = int(re.findall(r'grpc_endpoint = "127\.0\.0\.1:(\d+)"', process.config.read_text())[0])
    accepted: list[tuple[str, str]] = []  # (trace id, run span id) of requests answered 200
    refused: list[tuple[str, str]] = []
    try:
        await process.start()
        url = f"http://127.0.0.1:{process.http_port}/v1/traces"
        async with aiohttp.ClientSession() as session:
            for _ in range(50):  # bounded: 6000 bytes hold a few agent traces
                body, trace_id, span_id = await asyncio.to_thread(agent_trace_body)
                async with session.post(url, data=body, headers=PROTOBUF) as resp:
                    if resp.status == 200:
                        accepted.append((trace_id, span_id))
                        continue
                    assert resp.status == 429, await resp.text()
                    assert resp.headers["Retry-After"] == "3"
                    refused.append((trace_id, span_id))
                    break
        assert refused and len(accepted) >= 2, (accepted, refused)

        body, trace_id, span_id = await asyncio.to_thread(agent_trace_body)
        with pytest.raises(grpc.RpcError) as caught:
            await asyncio.to_thread(grpc_export, grpc_port, body)
        assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value
        info = dict(caught.value.trailing_metadata() or ())["google.rpc.retryinfo-bin"]
        assert RetryInfo.FromString(info).retry_delay.seconds == 3
        refused.append((trace_id, span_id))

        text = await process.metrics()
        assert metric(text, "tracescore_forwarded_requests_total", signal="traces", outcome="sent") == 0

        await backend.start()  # the endpoint comes up: what was accepted is forwarded and scored
        await wait_until(lambda: len(backend.scores()) >= len(accepted), timeout=60,
                         what="every accepted run forwarded and scored")

        async def drained() -> bool:
            text = await process.metrics()
            return metric(text, "tracescore_backlog_items", backlog="forward", destination="otlp") == 0

        await wait_until(drained, timeout=30, what="the forward backlog to drain")
        # A refused request that was stored anyway would be in the store until forwarded and
        # scored: once the store holds nothing, it would be in the backend (checked below).
        await wait_until(process.idle, timeout=30, what="nothing left in the store")
        text = await process.metrics()
        assert metric(text, "tracescore_forwarded_requests_total", signal="traces", outcome="rejected") == 0
        assert await process.stop() == 0
    finally:
        await process.kill()
        await backend.stop()
    traces = Counter(s.span.trace_id.hex() for s in backend.forwarded())
    assert sorted(traces) == sorted(t for t, _ in accepted)  # none of the refused ones
    assert set(traces.values()) == {2}  # both spans of each accepted trace, once
    assert sorted(s.span.parent_span_id.hex() for s in backend.scores()) == sorted(s for _, s in accepted)
