"""A native sink's backend away while runs are scored, and the scoring daemon SIGKILLed meanwhile:
once the backend is back every score arrives exactly once. Real `tracescore serve` processes on
both stores (the SQLite file; real Redis, as one process and as separate receiver and worker),
agent traces from the OpenTelemetry SDK, and the Langfuse stand-in server (request bodies
checked with the langfuse package's own types)."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import pytest
from daemon_harness import emit_agent_trace, free_port, wait_until
from langfuse_server import LangfuseServer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from serve_process import ServeProcess

SCORERS = Path(__file__).parent / "scorers_for_tests.py"
RUNS = 4
REDIS_URL = "redis://127.0.0.1:6379/0"


def metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(rf"^{re.escape(name)}{{{re.escape(want)}}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def daemon(tmp_path: Path, name: str, queue: str, langfuse: LangfuseServer, role: str = "all") -> ServeProcess:
    http_port = free_port()
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f'[receiver]\ngrpc_endpoint = "127.0.0.1:{free_port()}"\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
        f'[workers]\nhttp_endpoint = "127.0.0.1:{http_port}"\n'  # a worker's own listener
        f'[assembly]\ndecision_wait = 0.3\n[queue]\n{queue}\n'
        f'[sinks.langfuse]\nhost = "{langfuse.url}"\npublic_key = "env:TEST_LANGFUSE_PUBLIC"\n'
        f'secret_key = "env:TEST_LANGFUSE_SECRET"\nmin_backoff_s = 0.2\nmax_backoff_s = 0.5\n'
        f'[[scorers]]\nref = "{SCORERS}:answer_length"\n')
    env = {"TEST_LANGFUSE_PUBLIC": langfuse.public_key, "TEST_LANGFUSE_SECRET": langfuse.secret_key}
    return ServeProcess(config, tmp_path / f"{name}.log", http_port, env=env, flags=("-v", "--role", role))


async def test_scores_wait_out_an_outage_and_a_crash_and_arrive_once(
    tmp_path: Path, deployment: tuple[str, bool],
) -> None:
    queue, split = deployment
    langfuse = await LangfuseServer(secret_key="sk-lf-never-logged").start()
    langfuse.down = True
    if split:
        receiver = daemon(tmp_path, "receiver", queue, langfuse, role="receiver")
        scorer = daemon(tmp_path, "worker", queue, langfuse, role="worker")
        daemons = [receiver, scorer]
    else:
        receiver = scorer = daemon(tmp_path, "daemon", queue, langfuse)
        daemons = [receiver]
    try:
        for d in daemons:
            await d.start()
        url = f"http://127.0.0.1:{receiver.http_port}/v1/traces"
        spans = []
        for n in range(RUNS):
            _, span_id = await asyncio.to_thread(emit_agent_trace, HttpExporter(endpoint=url), answer="x" * (10 * n + 5))
            spans.append(span_id)

        async def scored_and_waiting() -> bool:
            text = await scorer.metrics()
            return (metric(text, "tracescore_decisions_total", reason="scored", scorer="answer-length") == RUNS
                    and metric(text, "tracescore_sink_backlog_records", sink="langfuse") == RUNS
                    and metric(text, "tracescore_sink_sent_total", outcome="retried", sink="langfuse") >= 1)

        await wait_until(scored_and_waiting, timeout=60, what="every run scored and waiting for Langfuse")
        assert langfuse.scores == {}
        assert await scorer.stop(signal.SIGKILL) == -signal.SIGKILL  # a crash during the outage

        await scorer.start()
        langfuse.down = False
        await wait_until(lambda: len(langfuse.scores) == RUNS, timeout=60, what="every score in Langfuse")

        async def drained() -> bool:
            return metric(await scorer.metrics(), "tracescore_sink_backlog_records", sink="langfuse") == 0

        await wait_until(drained, timeout=30, what="the sink's backlog to drain")
        for d in daemons:
            assert await d.stop() == 0
    finally:
        for d in daemons:
            await d.kill()
        await langfuse.stop()
    assert langfuse.refused == []
    stored = langfuse.by_observation()
    assert sorted(stored) == sorted((span, "Answer length") for span in spans)
    assert all(len(scores) == 1 for scores in stored.values())  # exactly once each
    expected = {spans[n]: min(1.0, (10 * n + 5) / 100) for n in range(RUNS)}
    assert {obs: scores[0]["value"] for (obs, _), scores in stored.items()} == pytest.approx(expected)
    for d in daemons:
        assert "sk-lf-never-logged" not in d.log.read_text()
