"""Restarts of a real `tracescore serve` process on the SQLite queue: nothing lost, nothing twice."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from daemon_harness import CaptureBackend, agent_trace_body, emit_agent_trace, wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from serve_process import ServeProcess as Daemon
from serve_process import sqlite_daemon

SCORERS = Path(__file__).parent / "scorers_for_tests.py"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[CaptureBackend, Daemon]]:
    async with sqlite_daemon(tmp_path, f"{SCORERS}:answer_length", decision_wait=0.5) as started:
        yield started


async def test_crash_loses_nothing_and_replay_scores_nothing_twice(
    setup: tuple[CaptureBackend, Daemon],
) -> None:
    backend, daemon = setup
    url = f"http://127.0.0.1:{daemon.http_port}/v1/traces"

    # 1. Accepted, then the process dies before the decision is due.
    await daemon.start()
    body_a, trace_a, span_a = agent_trace_body()
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=body_a, headers=PROTOBUF) as resp:
            assert resp.status == 200
    assert await daemon.stop(signal.SIGKILL) == -signal.SIGKILL

    # 2. After a restart the pending decision resumes and the run is scored.
    await daemon.start()
    await wait_until(lambda: len(backend.scores()) == 1, what="the score of the crashed trace")
    (score,) = backend.scores()
    assert (score.span.trace_id.hex(), score.span.parent_span_id.hex()) == (trace_a, span_a)
    trace_b, _ = await asyncio.to_thread(emit_agent_trace, HttpExporter(endpoint=url))
    await wait_until(lambda: len(backend.scores()) == 2, what="the score of a second trace")
    assert await daemon.stop() == 0  # SIGTERM drains and exits cleanly

    # 3. A replayed OTLP batch (the agent's own request, resent) after another restart.
    await daemon.start()
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=body_a, headers=PROTOBUF) as resp:
            assert resp.status == 200

    async def duplicate_counted() -> bool:
        return 'tracescore_decisions_total{reason="duplicate",scorer="answer-length"} 1.0' in (
            await daemon.metrics())

    await wait_until(duplicate_counted, what="the replayed run recognised as a duplicate")
    assert await daemon.stop() == 0
    keys = sorted((s.span.trace_id.hex(), s.span.parent_span_id.hex()) for s in backend.scores())
    assert len(keys) == 2 and {k[0] for k in keys} == {trace_a, trace_b}
