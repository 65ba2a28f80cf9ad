"""Decided traces read by the adapters in processes of their own (``[assembly] decide_processes``)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from child_processes import decision_processes, running
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import adapters
from collector.assemble.decide import ReadSettings, read_trace
from collector.assemble.processes import DecisionProcesses
from collector.common.types import TraceChunk
from collector.store.split import split_traces

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _batch() -> list[tuple[bytes, list[TraceChunk]]]:
    """Every trace of the shared captures, as the buffer hands them to a decision."""
    batch: dict[bytes, list[TraceChunk]] = {}
    for path in sorted(FIXTURES.glob("*/*.pb")):
        if ".logs" in path.name:
            continue
        request = ExportTraceServiceRequest()
        request.ParseFromString(Path(path).read_bytes())
        for chunk in split_traces(request.resource_spans, adapters.is_run_candidate)[0]:
            batch.setdefault(chunk.trace_id, []).append(chunk)
    return list(batch.items())


def _children() -> set[int]:
    return decision_processes(os.getpid())


async def test_two_processes_read_a_batch_as_the_daemon_would_in_its_order() -> None:
    batch = _batch()
    assert len(batch) >= 8
    settings = ReadSettings(track_sessions=True)
    processes = DecisionProcesses(2, settings)
    await processes.start()
    try:
        readings = await processes.read(batch)
    finally:
        await processes.shutdown()
    here = [read_trace(adapters, trace_id, chunks, settings) for trace_id, chunks in batch]
    assert readings is not None and len(readings) == len(here)
    assert sum(len(r.runs) for r in readings) >= 8
    for there, mine in zip(readings, here, strict=True):
        assert there.error is None and there.skipped == mine.skipped
        assert (there.incomplete, there.ended) == (mine.incomplete, mine.ended)
        # The runs come back whole (records and attributes), the records without the models.
        assert there.runs == mine.runs
        assert all(record.typed is None for record, _ in there.runs)
        assert all(record.typed is not None for record, _ in mine.runs)


async def test_a_process_that_died_loses_no_batch_and_is_started_again() -> None:
    batch = _batch()[:4]
    before = _children()
    processes = DecisionProcesses(1, ReadSettings())
    await processes.start()
    try:
        started = _children() - before
        assert started, "the decision process runs as a child of the daemon"
        for pid in started:
            os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        # The batch in hand is left to the daemon's own thread; the next one is read by a new process.
        assert await processes.read(batch) is None
        again = await processes.read(batch)
        assert again is not None and [r.error for r in again] == [None] * len(batch)
    finally:
        await processes.shutdown()
    assert running(_children() - before) == set()


async def test_a_broken_trace_comes_back_as_an_error_not_as_a_failed_batch() -> None:
    good = _batch()[:2]
    broken = (b"\x09" * 16, [TraceChunk(b"\x09" * 16, "spans", b"not protobuf", 1, True)])
    processes = DecisionProcesses(1, ReadSettings())
    await processes.start()
    try:
        readings = await processes.read([good[0], broken, good[1]])
    finally:
        await processes.shutdown()
    assert readings is not None
    assert [r.error is None for r in readings] == [True, False, True]
    assert readings[1].error is not None and "DecodeError" in readings[1].error


async def test_processes_that_cannot_start_again_are_retried_later_meanwhile_the_daemon_reads() -> None:
    batch = _batch()[:2]
    before = _children()
    processes = DecisionProcesses(1, ReadSettings())
    await processes.start()
    try:
        for pid in _children() - before:
            os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        start_pool = processes._started_pool

        def cannot_start() -> Any:
            raise OSError("no more processes")  # what a full process table answers

        processes._started_pool = cannot_start  # type: ignore[method-assign]
        assert await processes.read(batch) is None  # the batch in hand, then the failed start
        assert await processes.read(batch) is None  # not retried before RESTART_RETRY_S
        processes._started_pool = start_pool  # type: ignore[method-assign]
        processes._restart_at = 0.0  # the retry is due
        again = await processes.read(batch)
        assert again is not None and [r.error for r in again] == [None] * len(batch)
    finally:
        await processes.shutdown()


def test_a_decision_process_keeps_the_imported_adapters_out_of_the_collectors_walks() -> None:
    import gc
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from collector.assemble.processes import _start_process

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_start_process) as pool:
        assert pool.submit(gc.get_freeze_count).result(timeout=60) > 1000
