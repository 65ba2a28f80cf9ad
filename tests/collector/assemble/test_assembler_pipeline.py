"""Assembly's decision loop as a pipeline (on a store whose `due` claims what it returns): the next
batch is taken while one is read and a batch's jobs are queued while the next one is read, in
decision order; on a store that does not claim (SQLite) a batch is taken only once the last one
is finished, so no trace is decided twice."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from shared_redis import REDIS_URL

import adapters
from collector.assemble.assembler import TraceAssembler
from collector.common.metrics import Metrics
from collector.config import ScorerConfig
from collector.store.redis.store import RedisStore
from collector.store.sqlite.store import SqliteStore
from collector.work.registry import RegisteredScorer, ScorerRegistry
from scorers import create_scorer

TRACES = 150  # three batches of 64 and one of 22


class SlowAdapters:
    """The adapters, reading each trace 2 ms more slowly: a batch takes long enough to be read
    that the store's round trips around it can be seen to overlap it or not."""

    def __getattr__(self, name: str) -> Any:
        return getattr(adapters, name)

    @staticmethod
    def extract_runs(trace: Any, *args: Any) -> Any:
        time.sleep(0.002)
        return adapters.extract_runs(trace, *args)


def _request(traces: int) -> ExportTraceServiceRequest:
    """One request holding ``traces`` agent traces (one run each)."""
    text = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}])
    spans = []
    for n in range(traces):
        attributes = [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in (
            ("gen_ai.operation.name", "invoke_agent"), ("gen_ai.agent.name", "bot"), ("gen_ai.input.messages", text))]
        spans.append(Span(trace_id=(n + 1).to_bytes(16, "big"), span_id=(n + 1).to_bytes(8, "big"),
                          name="invoke_agent bot", start_time_unix_nano=1, end_time_unix_nano=2, attributes=attributes))
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])


def _record(store: Any, events: list[tuple[str, list[bytes]]]) -> None:
    """Note, in order, each non-empty batch `due` returned, and each batch's jobs and finish as
    they are asked for (the store itself is the real one)."""
    due, put, finish_many = store.due, store.put, store.finish_many

    async def recorded_due(limit: int, now: float | None = None) -> tuple[list[bytes], int]:
        ids, expired = await due(limit, now)
        if ids:
            events.append(("due", list(ids)))
        return ids, expired

    async def recorded_put(jobs: Sequence[Any]) -> list[bool]:
        events.append(("put", [bytes.fromhex(job.run.trace_id) for job in jobs]))
        return await put(jobs)

    async def recorded_finish(trace_ids: Sequence[bytes]) -> None:
        events.append(("finish", list(trace_ids)))
        await finish_many(trace_ids)

    store.due, store.put, store.finish_many = recorded_due, recorded_put, recorded_finish


@pytest.fixture
async def redis_store() -> AsyncIterator[RedisStore]:
    store = RedisStore(REDIS_URL, key_prefix=f"test-pipe-{uuid.uuid4().hex[:8]}:", decision_wait=0.0)
    await store.client.ping()  # fail loudly when Redis is missing
    await store.start()
    yield store
    await store.delete_all()
    await store.shutdown()


async def _decide_all(store: Any, events: list[tuple[str, list[bytes]]]) -> Metrics:
    """Every trace of one request decided by an assembler on ``store``."""
    _record(store, events)
    metrics = Metrics()
    scorer = create_scorer(id="s", description="d", type="agent", version="1").generate_score(lambda run: 1.0)
    asm = TraceAssembler(store, store, ScorerRegistry([RegisteredScorer(scorer, ScorerConfig(ref="x:s"))]),
                         metrics, SlowAdapters())
    await asm.start()
    try:
        await asm.consume_traces(_request(TRACES))
        deadline = time.monotonic() + 30
        while sum(len(ids) for kind, ids in events if kind == "finish") < TRACES:
            assert time.monotonic() < deadline, f"not every trace was decided: {[(k, len(i)) for k, i in events]}"
            await asyncio.sleep(0.01)
    finally:
        await asm.shutdown()
    return metrics


def _batches(events: list[tuple[str, list[bytes]]], kind: str) -> list[list[bytes]]:
    return [ids for k, ids in events if k == kind]


async def test_the_next_batch_is_taken_while_one_is_read_and_jobs_keep_decision_order(
        redis_store: RedisStore) -> None:
    events: list[tuple[str, list[bytes]]] = []
    metrics = await _decide_all(redis_store, events)
    taken = _batches(events, "due")
    assert [len(ids) for ids in taken] == [64, 64, 22]
    # each batch's jobs queued, and its traces finished, in the order the batches were taken
    assert _batches(events, "put") == _batches(events, "finish") == taken
    kinds = [kind for kind, _ in events]
    assert kinds.index("due", 1) < kinds.index("finish")  # the second batch was taken before the first finished
    assert metrics.registry.get_sample_value(
        "tracescore_decisions_total", {"scorer": "s", "reason": "queued"}) == TRACES
    assert not metrics.registry.get_sample_value("tracescore_errors_total", {"component": "assembly"})


async def test_a_store_that_does_not_claim_is_asked_again_only_once_a_batch_is_finished(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"), decision_wait=0.0)
    await store.start()
    events: list[tuple[str, list[bytes]]] = []
    try:
        metrics = await _decide_all(store, events)
    finally:
        await store.shutdown()
    assert [kind for kind, _ in events] == ["due", "put", "finish"] * 3
    assert _batches(events, "put") == _batches(events, "finish") == _batches(events, "due")
    assert metrics.registry.get_sample_value(
        "tracescore_decisions_total", {"scorer": "s", "reason": "queued"}) == TRACES  # none twice
    assert not metrics.registry.get_sample_value("tracescore_decisions_total", {"scorer": "s", "reason": "duplicate"})
