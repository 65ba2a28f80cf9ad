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
from daemon_harness import CaptureBackend, emit_agent_trace, free_port, wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from serve_process import ServeProcess as Daemon

SCORERS = Path(__file__).parent / "scorers_for_tests.py"


def decision_processes(pid: int, *, with_helper: bool = False) -> set[int]:
    """The pool processes a daemon spawned (``with_helper``: and multiprocessing's resource tracker)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:  # the thread ended meanwhile
            continue
    return found if with_helper else {c for c in found if b"spawn_main" in _cmdline(c)}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def running(pids: set[int]) -> set[int]:
    """The processes of ``pids`` that still run (a zombie has exited)."""
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[CaptureBackend, Daemon]]:
    backend = await CaptureBackend().start()
    http_port = free_port()
    config = tmp_path / "tracescore.toml"
    config.write_text(
        f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
        f'[assembly]\ndecision_wait = 0.2\ndecide_processes = 1\n'
        f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n'
        f'[export]\nendpoint = "{backend.endpoint}"\ntimeout_s = 2.0\nmax_backoff_s = 0.5\n'
        f'[[scorers]]\nref = "{SCORERS}:answer_length"\n'
    )
    daemon = Daemon(config, tmp_path / "daemon.log", http_port)
    yield backend, daemon
    await daemon.kill()
    await backend.stop()


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
