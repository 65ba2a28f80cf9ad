"""Storage faults of the SQLite store (issue 13), injected at the file layer: a fault-injecting
stand-in for the ``os`` module of the body log makes writes fail with ENOSPC (or EIO)
after a given number of bytes, as a full disk does mid-write."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adapters
from collector.assemble.assembler import TraceAssembler
from collector.common.errors import QueueFull, StorageFault
from collector.common.metrics import Metrics
from collector.config import ScorerConfig
from collector.store.split import summarize_spans
from collector.store.sqlite import body_log, faults
from collector.store.sqlite.body_log import BodyLog
from collector.store.sqlite.store import SqliteStore
from collector.work.registry import RegisteredScorer, ScorerRegistry
from scorers import create_scorer


class FullDisk:
    """Stands in for ``os`` in one module: ``write`` and ``fsync`` fail once ``room`` bytes
    were written (a partial write first, as the kernel does), everything else is ``os``'s."""

    def __init__(self, room: int, code: int = errno.ENOSPC) -> None:
        self.room, self.code = room, code

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def write(self, fd: int, data: Any) -> int:
        if self.room <= 0:
            raise OSError(self.code, os.strerror(self.code))
        n = os.write(fd, bytes(data[: self.room]))
        self.room -= n
        return n

    def fsync(self, fd: int) -> None:
        if self.room <= 0:
            raise OSError(self.code, os.strerror(self.code))
        os.fsync(fd)


def test_a_failed_write_is_cut_back_so_later_offsets_match_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = BodyLog(str(tmp_path))
    log.open()
    first = log.append(b"a" * 100)
    monkeypatch.setattr(body_log, "os", FullDisk(room=30))
    with pytest.raises(OSError) as info:
        log.append(b"b" * 100)  # 30 bytes land, then the disk is full
    assert info.value.errno == errno.ENOSPC
    assert (tmp_path / f"{first[0]:08d}.seg").stat().st_size == 100  # cut back to the last good offset
    monkeypatch.setattr(body_log, "os", os)  # space is back
    third = log.append(b"c" * 50)
    log.sync()
    assert third == (first[0], 100)
    assert log.read(*first, 100) == b"a" * 100 and log.read(*third, 50) == b"c" * 50
    log.close()


def _request(trace_byte: int) -> tuple[bytes, list[tuple[bytes, int, int]]]:
    """A whole OTLP request holding one agent run, and its per-trace summary."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a",
             "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "q"}]}]),
             "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}])}
    with provider.get_tracer("t").start_as_current_span("invoke_agent a", attributes=attrs):
        pass
    request = encode_spans(memory.get_finished_spans())
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                span.trace_id = bytes([trace_byte]) * 16
    entries, _ = summarize_spans(list(request.resource_spans), adapters.is_run_candidate)
    return request.SerializeToString(), entries


async def test_a_full_disk_is_refused_retryably_and_recovers_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = SqliteStore(str(tmp_path / "q.db"), decision_wait=0.0)
    await store.start()
    first, first_entries = _request(1)
    await store.append_request("spans", first, first_entries, now=1.0)
    full = FullDisk(room=10)
    monkeypatch.setattr(body_log, "os", full)
    monkeypatch.setattr(faults, "os", full)  # the readiness probe finds the disk full too
    second, second_entries = _request(2)
    for code in (errno.ENOSPC, errno.EIO):
        full.code, full.room = code, 10
        with pytest.raises(StorageFault):  # 503 / UNAVAILABLE: the exporter keeps the data
            await store.append_request("spans", second, second_entries, now=2.0)
        assert not store.reachable  # /readyz: 503
    full.room = 0
    await store.due(10, now=3.0)  # the probe runs on the decision loop's calls
    assert not store.reachable
    full.room = 10**9  # space is back
    faults_probe = store._health  # noqa: SLF001 (the probe waits an interval between tries)
    faults_probe._last_probe = 0.0  # noqa: SLF001
    await store.due(10, now=3.0)
    assert store.reachable
    await store.append_request("spans", second, second_entries, now=4.0)
    due, _ = await store.due(10, now=5.0)
    assert sorted(due) == [b"\x01" * 16, b"\x02" * 16]
    for trace_id in due:  # both bodies read back whole: nothing half-written in between
        assert [c.trace_id for c in await store.load(trace_id)] == [trace_id]
    await store.shutdown()


async def test_max_buffer_bytes_answers_429_before_the_disk_fills(tmp_path: Path) -> None:
    body, entries = _request(1)
    store = SqliteStore(str(tmp_path / "q.db"), max_buffer_bytes=3 * len(body))
    await store.start()
    for i in range(3):
        await store.append_request("spans", body, [(bytes([i + 1]) * 16, 1, e[2]) for e in entries])
    with pytest.raises(QueueFull):
        await store.append_request("spans", body, [(b"\x09" * 16, 1, entries[0][2])])
    assert store.reachable  # full by the cap is not a failing disk
    await store.shutdown()


async def test_an_unreadable_trace_is_dead_lettered_alone_and_blocks_no_decision(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"), decision_wait=0.0)
    await store.start()
    scorer = create_scorer(id="s", description="d").generate_score(lambda run: 1.0)
    metrics = Metrics()
    asm = TraceAssembler(store, store, ScorerRegistry([RegisteredScorer(scorer, ScorerConfig(ref="x:s"))]),
                         metrics, adapters)
    bodies = [_request(i) for i in (1, 2, 3)]
    for body, entries in bodies:
        await store.append_request("spans", body, entries, now=1.0)
    segment = next((tmp_path / "q.db.bodies").glob("*.seg"))
    with segment.open("r+b") as f:  # the second body's bytes rot on disk
        f.seek(len(bodies[0][0]))
        f.write(b"\xff" * len(bodies[1][0]))
    assert await asm.decide_due() == 3
    assert (await store.stats()).queued == 2  # the two readable runs were decided
    dead = await store.dead_letters()
    assert [d["key"] for d in dead] == [f"trace/{'02' * 16}"]
    assert dead[0]["error"]["type"] == "UnreadableTrace"  # type: ignore[index]
    assert await asm.decide_due() == 0  # gone: not retried for ever
    assert metrics.registry.get_sample_value("tracescore_runs_skipped_total", {"reason": "trace_unreadable"}) == 1
    await store.shutdown()
