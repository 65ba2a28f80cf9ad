"""A full disk under a real daemon (issue 13): the SQLite store lives on a small tmpfs that
the test fills mid-load. While full the daemon answers 503 with Retry-After (OTLP
exporters retry it and keep the data) and ``/readyz`` says 503; once space returns, with
no restart, every run it accepted is scored exactly once.

Mounting a tmpfs needs root (CI runs as root); elsewhere the store's file-layer fault
injection (tests/collector/store/sqlite/test_store_faults.py) covers the same paths.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from daemon_harness import CaptureBackend, agent_trace_body, wait_until
from fault_daemon import PROTOBUF, FaultDaemon, scoring_config
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@pytest.fixture
def small_disk(tmp_path: Path) -> AsyncIterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the file-layer fault tests run everywhere)")
    mount = tmp_path / "vol"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full; returns it."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as f:
        chunk = b"\0" * (256 * 1024)
        for _ in range(1000):  # bounded: 24 MiB fill within 100 chunks
            try:
                f.write(chunk)
            except OSError as err:
                assert err.errno == errno.ENOSPC
                break
        try:
            while f.write(b"\0" * 512):  # the last free bytes
                pass
        except OSError:
            pass
    return filler


def _padded_agent_body(pad: int) -> tuple[bytes, str]:
    """An agent run's request with a ``pad``-byte span in the same trace."""
    body, trace_id, _ = agent_trace_body()
    request = ExportTraceServiceRequest.FromString(body)
    request.resource_spans[0].scope_spans[0].spans.add(
        trace_id=bytes.fromhex(trace_id), span_id=os.urandom(8), name="x" * pad)
    return request.SerializeToString(), trace_id


async def _post(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[int, str | None]:
    async with session.post(url, data=body, headers=PROTOBUF) as resp:
        await resp.read()
        return resp.status, resp.headers.get("Retry-After")


async def test_a_full_disk_answers_503_and_every_accepted_run_is_scored_once_after_space_returns(
    tmp_path: Path, small_disk: Path,
) -> None:
    backend = await CaptureBackend().start()
    daemon = FaultDaemon(tmp_path, scoring_config(small_disk / "queue.db", backend.endpoint))
    try:
        await daemon.start()
        accepted: set[str] = set()
        refused: list[tuple[bytes, str]] = []
        async with aiohttp.ClientSession() as session:
            for _ in range(10):  # before: accepted
                body, trace_id, _ = agent_trace_body()
                assert (await _post(session, daemon.url, body))[0] == 200
                accepted.add(trace_id)
            await wait_until(lambda: len(backend.scores()) == 10, timeout=30, what="the first scores")

            filler = _fill(small_disk)
            # A little room comes back: bodies larger than it are written partly, then ENOSPC
            # (the body log must cut such a write back, or later offsets miss the file).
            os.truncate(filler, max(0, filler.stat().st_size - 200 * 1024))
            statuses = []
            for _ in range(30):  # the disk is full: refused retryably, never 500 nor 200-and-lost
                body, trace_id = _padded_agent_body(48 * 1024)
                status, retry_after = await _post(session, daemon.url, body)
                statuses.append(status)
                assert status in (200, 503), status
                if status == 200:
                    accepted.add(trace_id)
                else:
                    assert retry_after is not None
                    refused.append((body, trace_id))
            assert statuses.count(503) >= 20, statuses
            assert await daemon.readyz() == 503

            filler.unlink()  # space returns; no restart
            await wait_until(daemon.ready, timeout=30, what="/readyz ready again")
            for body, trace_id in refused:  # the exporters' retries
                assert (await _post(session, daemon.url, body))[0] == 200
                accepted.add(trace_id)
            for _ in range(10):  # after: accepted
                body, trace_id, _ = agent_trace_body()
                assert (await _post(session, daemon.url, body))[0] == 200
                accepted.add(trace_id)

        def scored() -> list[str]:
            return [s.span.trace_id.hex() for s in backend.scores()]

        await wait_until(lambda: set(scored()) == accepted, timeout=60, what="every accepted run scored")
        # A second score would be in the store (a job, a score to export) until exported: once
        # the store holds nothing, it would be in the backend. The short sleep only adds margin.
        await wait_until(daemon.idle, timeout=30, what="nothing left in the store")
        await asyncio.sleep(0.5)
        assert sorted(scored()) == sorted(accepted), "a run was scored twice"
        log = daemon.log.read_text()
        assert log.count("trace decision failed") <= 5, "decisions kept failing after space returned"
        assert "Traceback" not in log.split("the store can write again")[-1]
        daemon.assert_alive()
    finally:
        await daemon.stop()
        await backend.stop()
