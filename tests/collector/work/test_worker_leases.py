"""A worker renews the leases of the jobs it runs (issue 13): a job running far longer than
its lease is never taken again (by this or another worker) while its worker lives."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from collector.common.metrics import Metrics
from collector.common.types import RunRecord, ScoreJob
from collector.config import ScorerConfig
from collector.store.sqlite.store import SqliteStore
from collector.work.registry import RegisteredScorer, ScorerRegistry
from collector.work.worker import Worker
from scorers import create_scorer

RUN = RunRecord(trace_id="ab" * 16, span_id="cd" * 8)


async def test_a_job_longer_than_its_lease_runs_once_and_is_settled(tmp_path: Path) -> None:
    calls = []

    async def slow(run: object) -> float:
        calls.append(time.monotonic())
        await asyncio.sleep(4.0)  # four leases long
        return 1.0

    scorer = create_scorer(id="slow", description="d").generate_score(slow)
    # A 1 s lease renewed every third of it: a renewal may come up to 2/3 s late (a busy
    # machine) before the lease runs out; with 0.3 s, a 0.2 s stall let the job be taken again.
    store = SqliteStore(str(tmp_path / "q.db"), visibility_timeout_s=1.0, max_attempts=2)
    await store.start()
    await store.put([ScoreJob(RUN, "slow", None)])
    registry = ScorerRegistry([RegisteredScorer(scorer, ScorerConfig(ref="x:slow"))])
    worker = Worker(store, registry, Metrics(), concurrency=4, lease_s=1.0, poll_s=0.02)
    await worker.start()
    deadline = time.monotonic() + 60
    while (await store.stats()).outbox == 0:
        assert time.monotonic() < deadline, "the job was never settled"
        await asyncio.sleep(0.05)
    await worker.shutdown(1.0)
    stats = await store.stats()
    await store.shutdown()
    assert len(calls) == 1  # never taken again while it ran
    assert (stats.queued, stats.in_flight, stats.dead, stats.outbox) == (0, 0, 0, 1)
