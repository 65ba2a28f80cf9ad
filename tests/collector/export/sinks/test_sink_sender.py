"""`SinkSender` drains a sink's outbox in a real SQLite store into the Langfuse stand-in server
(request bodies validated with the langfuse package's own types): retries with backoff,
idempotent resends, credentials, refusals."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from langfuse_server import LangfuseServer

from collector.common.ids import score_span_id_for
from collector.common.metrics import Metrics
from collector.common.types import Done, RunRecord, ScoreJob, ScoreRecord
from collector.config import LangfuseSinkConfig
from collector.export.sinks import LangfuseSink, SinkSender
from collector.store.sqlite.store import SqliteStore

TRACE = "5b8efff798038103d269b633813fc60c"


def record(n: int, score: float | None = 0.25) -> ScoreRecord:
    job = ScoreJob(RunRecord(TRACE, f"{n:016x}", end_ns=1_700_000_000_000_000_000 + n), "relevance", "1")
    return ScoreRecord(job.key, TRACE, job.run.span_id, score_span_id_for(job.key), "relevance", "Relevance",
                       "1", run_id=job.run.run_id, score=score, reason="why", scored_end_ns=job.run.end_ns,
                       error_type=None if score is not None else "RuntimeError")


async def settle(store: SqliteStore, records: list[ScoreRecord]) -> None:
    jobs = [ScoreJob(RunRecord(TRACE, r.span_id), "relevance", "1") for r in records]
    await store.put(jobs)
    leased = await store.take(len(jobs))
    by_key = {r.key: r for r in records}
    for item in leased:
        await store.settle(item, Done(by_key[item.job.key]))


@pytest.fixture
async def langfuse() -> AsyncIterator[LangfuseServer]:
    server = await LangfuseServer().start()
    yield server
    await server.stop()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(str(tmp_path / "q.db"), sinks=["langfuse"])
    await opened.start()
    yield opened
    await opened.shutdown()


def sender(store: SqliteStore, server: LangfuseServer, metrics: Metrics, **cfg: object) -> SinkSender:
    config = LangfuseSinkConfig.model_validate({
        "host": server.url, "public_key": server.public_key, "secret_key": server.secret_key,
        "min_backoff_s": 0.05, "max_backoff_s": 0.2, **cfg})
    return SinkSender(LangfuseSink(config), store.sink_outbox("langfuse"), config, metrics, poll_s=0.02)


async def until(predicate: Callable[[], bool]) -> None:
    """Poll ``predicate`` for up to 30 s (a failure detector)."""
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def drained(store: SqliteStore) -> None:
    deadline = time.monotonic() + 30
    while await store.sink_outbox("langfuse").backlog():
        assert time.monotonic() < deadline, "the sink's outbox did not drain"
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(s: SinkSender) -> AsyncIterator[SinkSender]:
    """A started sender, shut down on the way out."""
    await s.start()
    try:
        yield s
    finally:
        await s.shutdown()


def sent(metrics: Metrics, outcome: str) -> float:
    return metrics.registry.get_sample_value("tracescore_sink_sent_total",
                                             {"sink": "langfuse", "outcome": outcome}) or 0.0


async def test_scores_reach_langfuse_in_its_own_request_type(store: SqliteStore, langfuse: LangfuseServer) -> None:
    metrics = Metrics()
    await settle(store, [record(1), record(2), record(3, score=None)])
    async with running(sender(store, langfuse, metrics)):
        await drained(store)
    assert langfuse.refused == []
    stored = langfuse.by_observation()
    assert sorted(stored) == [(f"{n:016x}", "Relevance") for n in (1, 2)]  # a failure is not a score
    body = stored[(f"{1:016x}", "Relevance")][0]
    assert (body["traceId"], body["value"], body["comment"], body["dataType"]) == (TRACE, 0.25, "why", "NUMERIC")
    assert body["metadata"]["scorer_id"] == "relevance"
    assert (sent(metrics, "sent"), sent(metrics, "skipped_failed")) == (2, 1)
    assert metrics.registry.get_sample_value("tracescore_sink_backlog_records", {"sink": "langfuse"}) == 0


async def test_an_outage_is_retried_with_backoff_and_nothing_is_sent_twice(
    store: SqliteStore, langfuse: LangfuseServer,
) -> None:
    metrics = Metrics()
    langfuse.down = True
    await settle(store, [record(n) for n in range(20)])
    async with running(sender(store, langfuse, metrics)):
        await until(lambda: sent(metrics, "retried") >= 40)  # two rounds at least, each the whole backlog
        assert await store.sink_outbox("langfuse").backlog() == 20 and langfuse.scores == {}
        langfuse.down = False
        langfuse.fail_next = [429, 500]
        await drained(store)
    assert len(langfuse.scores) == 20 and sent(metrics, "sent") == 20


async def test_the_same_score_sent_again_updates_it(store: SqliteStore, langfuse: LangfuseServer,
                                                    tmp_path: Path) -> None:
    metrics = Metrics()
    await settle(store, [record(1)])
    other = SqliteStore(str(tmp_path / "replica.db"), sinks=["langfuse"])  # a replica, or a backfill
    await other.start()
    await settle(other, [record(1)])
    try:
        async with running(sender(store, langfuse, metrics)), running(sender(other, langfuse, Metrics())):
            await drained(store)
            await drained(other)
    finally:
        await other.shutdown()
    assert langfuse.posts == 2 and len(langfuse.scores) == 1


async def test_refused_credentials_keep_the_score_and_a_malformed_score_is_dropped(
    store: SqliteStore, langfuse: LangfuseServer, caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    await settle(store, [record(1)])
    async with running(sender(store, langfuse, metrics, secret_key="sk-wrong-secret")) as held:
        await until(lambda: sent(metrics, "retried") >= 2)
        state = held.state()  # status: held for a configuration fix, in the backend's words
        assert (state["sender"], state["state"], state["destination"]) == ("sink langfuse", "held", langfuse.url)
        assert state["cause"].startswith("HTTP 401 Unauthorized") and "credentials" in state["fix"]
    assert await store.sink_outbox("langfuse").backlog() == 1 and langfuse.refused[0] == "unauthorized"
    assert "sk-wrong-secret" not in caplog.text and "refused the credentials" in caplog.text
    langfuse.fail_next = [400]
    async with running(sender(store, langfuse, metrics)):
        await drained(store)
    assert sent(metrics, "rejected") == 1 and langfuse.scores == {}
    assert "sk-wrong-secret" not in metrics.render().decode()
