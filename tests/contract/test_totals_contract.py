"""The deployment's totals on both stores (issue 42, point 6): every settlement the store
accepts adds its outcome, once, in the same step; one it refuses (a lost lease) adds nothing;
a job dead-lettered for its leases counts as failed; judge calls settled by any process add to
one total per model; totals outlive the process that wrote them (a second store instance on
the same file or Redis keys reads them)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from test_judge_ledger_contract import beside
from test_queue_contract import StoreFactory, job, take_until
from test_session_contract import _reopen

from collector.common.judge_types import Park
from collector.common.types import Dead, Done, Retry, ScoreRecord
from collector.store.sqlite.store import SqliteStore
from collector.store.totals import nested

__all__ = ["beside"]  # the fixture, shared with the judge ledger's contract


def scored(j: Any, score: float | None) -> Done:
    return Done(ScoreRecord(j.key, j.run.trace_id, j.run.span_id, "ef" * 8, j.scorer_id, j.scorer_id, score=score))


async def view(store: Any) -> dict[str, Any]:
    return nested(await store.totals())


class TestTotalsContract:
    async def test_each_accepted_settlement_counts_once_per_scorer(self, make_store: StoreFactory) -> None:
        store = await make_store()
        assert await view(store) == {"scorers": {}, "judge": {}}
        jobs = [job(n) for n in range(6)] + [job(9, scorer="other")]
        await store.put(jobs)
        taken = {leased.job.key: leased for leased in await take_until(store, 7)}
        outcomes = [scored(jobs[0], 0.31), scored(jobs[1], 0.95), Done(None), Dead("E", "boom", None),
                    Retry(0.0, "transient"), Park(0.0, "budget_exhausted"), scored(jobs[6], None)]
        await asyncio.gather(*(store.settle(taken[j.key], outcome) for j, outcome in zip(jobs, outcomes, strict=True)))
        totals = await view(store)
        q = totals["scorers"]["q"]
        assert {k: q[k] for k in ("scored", "not_scorable", "failed", "retried", "parked")} == {
            "scored": 2, "not_scorable": 1, "failed": 1, "retried": 1, "parked": 1}
        assert q["scores"]["count"] == 2 and abs(q["scores"]["sum"] - 1.26) < 1e-9
        assert q["scores"]["buckets"]["0.3"] == 0 and q["scores"]["buckets"]["0.4"] == 1
        assert q["scores"]["buckets"]["1.0"] == q["scores"]["buckets"]["+Inf"] == 2
        other = totals["scorers"]["other"]  # a score without a value: scored, no histogram entry
        assert (other["scored"], other["scores"]["count"]) == (1, 0)

        # The retried and the parked job come back: settled done once more each, counted once each.
        again = await take_until(store, 2)
        for leased in again:
            await store.settle(leased, scored(leased.job, 1.0))
        q = (await view(store))["scorers"]["q"]
        assert (q["scored"], q["retried"], q["parked"], q["scores"]["count"]) == (4, 1, 1, 4)

    async def test_a_settlement_whose_lease_was_lost_counts_nothing(self, make_store: StoreFactory) -> None:
        store = await make_store(visibility_timeout_s=0.3)
        j = job(1)
        await store.put([j])
        (first,) = await store.take(1)
        (second,) = await take_until(store)  # the first worker "died": its lease ran out
        await store.settle(second, scored(j, 0.5))
        await store.settle(first, scored(j, 0.5))  # the dead worker's late settle: refused
        await store.settle(first, Dead("E", "late", None))
        q = (await view(store))["scorers"]["q"]
        assert (q["scored"], q["failed"], q["scores"]["count"]) == (1, 0, 1)

    async def test_a_job_dead_lettered_for_its_leases_counts_as_failed(self, make_store: StoreFactory) -> None:
        store = await make_store(visibility_timeout_s=0.1, max_attempts=2)
        await store.put([job(1)])
        deadline = time.monotonic() + 30
        while not await store.dead_letters():
            await store.take(1)  # never settled
            assert time.monotonic() < deadline, "the job was never dead-lettered"
            await asyncio.sleep(0.02)
        assert (await view(store))["scorers"]["q"]["failed"] == 1

    async def test_judge_calls_from_any_process_add_up_per_model_and_outlive_it(
        self, make_store: StoreFactory, beside: Any,
    ) -> None:
        store = await make_store()
        other = beside(store)  # another replica (Redis) or a command beside the daemon (SQLite)
        await store.count_judge_call("openai/gpt-4o-mini", failed=False, input_tokens=100, output_tokens=7,
                                     cost_usd=0.0015)
        await other.count_judge_call("openai/gpt-4o-mini", failed=True, input_tokens=0, output_tokens=0, cost_usd=0.0)
        await other.count_judge_call("anthropic/claude-3-5-haiku", failed=False, input_tokens=10, output_tokens=2,
                                     cost_usd=0.0001)
        await store.put([job(1)])
        (leased,) = await take_until(store)
        await store.settle(leased, scored(leased.job, 0.5))
        again = await _reopen(store)  # the process that wrote them is gone: the totals are the store's
        try:
            totals = await view(again)
        finally:
            if not isinstance(again, SqliteStore):
                await again.delete_all()
            await again.shutdown()
        mini = totals["judge"]["openai/gpt-4o-mini"]
        assert (mini["calls"], mini["errors"], mini["input_tokens"], mini["output_tokens"]) == (2, 1, 100, 7)
        assert abs(mini["cost_usd"] - 0.0015) < 1e-12
        assert totals["judge"]["anthropic/claude-3-5-haiku"]["calls"] == 1
        assert totals["scorers"]["q"]["scored"] == 1
