"""A real `tracescore serve` with ``[assembly] decide_processes = 1``: its decision process is
the daemon's child, scores flow through it, one that dies is replaced, and none outlives the
daemon (drained with SIGTERM, or killed)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from child_processes import decision_processes, running
from daemon_harness import CaptureBackend, emit_agent_trace, wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from serve_process import ServeProcess as Daemon
from serve_process import sqlite_daemon

SCORERS = Path(__file__).parent / "scorers_for_tests.py"


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[CaptureBackend, Daemon]]:
    async with sqlite_daemon(tmp_path, f"{SCORERS}:answer_length", decision_wait=0.2,
                             assembly="decide_processes = 1\n") as started:
        yield started


async def test_runs_are_decided_in_a_child_process_that_is_replaced_and_never_outlives_the_daemon(
    setup: tuple[CaptureBackend, Daemon],
) -> None:
    backend, daemon = setup
    url = f"http://127.0.0.1:{daemon.http_port}/v1/traces"
    await daemon.start()
    assert daemon.proc is not None
    first = await asyncio.to_thread(decision_processes, daemon.proc.pid)
    assert len(first) == 1, "one decision process, the daemon's child"
    await asyncio.to_thread(emit_agent_trace, HttpExporter(endpoint=url))
    await wait_until(lambda: len(backend.scores()) == 1, what="the first score")

    # A decision process that dies is replaced; the next trace is scored as usual.
    for pid in first:
        os.kill(pid, signal.SIGKILL)
    await asyncio.to_thread(emit_agent_trace, HttpExporter(endpoint=url))
    await wait_until(lambda: len(backend.scores()) == 2, what="a score after the decision process died")
    pid = daemon.proc.pid

    async def replaced() -> bool:
        return len(await asyncio.to_thread(decision_processes, pid) - first) == 1

    await wait_until(replaced, what="a new decision process")
    second = await asyncio.to_thread(lambda: decision_processes(pid, with_helper=True))
    assert len(second) == 2

    # Drained with SIGTERM, the daemon exits cleanly and takes its processes along.
    assert await daemon.stop() == 0

    async def exited(pids: set[int]) -> bool:
        return await asyncio.to_thread(running, pids) == set()

    await wait_until(lambda: exited(second), timeout=15, what="the drained daemon's processes to exit")

    # Killed outright, the daemon cannot stop it: the process sees its parent gone and exits
    # (and multiprocessing's helper with it).
    await daemon.start()
    assert daemon.proc is not None
    pid = daemon.proc.pid
    third = await asyncio.to_thread(lambda: decision_processes(pid, with_helper=True))
    assert len(third) == 2
    assert await daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    await wait_until(lambda: exited(third), timeout=15, what="the killed daemon's processes to exit")
