"""The SQLite judge ledger's durability: budgets, breakers and parked jobs survive a restart,
and a file an earlier version wrote is upgraded (the parked columns, the judge tables)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from collector.common.judge_types import Breaker, BudgetUse, Park
from collector.common.types import RunRecord, ScoreJob
from collector.store.sqlite.judge_ledger import SqliteJudgeAdmin
from collector.store.sqlite.store import SqliteStore

WINDOW = "1d:2026-12-05"


def _job(n: int = 1) -> ScoreJob:
    return ScoreJob(RunRecord(trace_id="ab" * 16, span_id=f"{n:016x}"), "q", "1")


async def test_the_ledger_and_parked_jobs_survive_reopening_the_store(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    store = SqliteStore(path)
    await store.start()
    limits = [("global", 1.0), ("scorer:q", 0.5)]
    assert await store.reserve_judge_spend("settled", WINDOW, limits, 0.5, 100.0, 600.0) is None
    await store.settle_judge_spend("settled", WINDOW, ["global", "scorer:q"], 0.25)
    assert await store.reserve_judge_spend("in-flight", WINDOW, limits, 0.2, 100.0, 600.0) is None
    opened = Breaker("m#k", "m", "401 invalid api key", 100.0, 160.0, 60.0)
    await store.open_judge_breaker(opened)
    await store.put([_job()])
    (leased,) = await store.take(1)
    await store.settle(leased, Park(0.0, "judge_unavailable"))
    await store.cool_down_judge("m", 3600.0)  # in memory: the process's own
    await store.shutdown()

    store = SqliteStore(path)
    await store.start()
    try:
        assert await store.judge_spend(WINDOW, 100.0) == [BudgetUse("global", 0.25, 0.2), BudgetUse("scorer:q", 0.25, 0.2)]
        assert await store.reserve_judge_spend("more", WINDOW, limits, 0.1, 100.0, 600.0) == "scorer:q"
        assert await store.judge_breakers() == [opened]
        assert await store.parked_jobs() == {"judge_unavailable": 1}
        (leased,) = await store.take(1)
        assert leased.attempt == 1 and leased.parked_since is not None
        assert await store.take_judge_rate("m", 60, 0, 0) == 0.0  # a restart forgets cool-downs
        assert await SqliteJudgeAdmin(path).judge_breakers() == [opened]  # beside the running store
    finally:
        await store.shutdown()


async def test_a_file_of_an_earlier_version_gains_the_parked_columns_and_judge_tables(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,"
               " payload TEXT NOT NULL, scorer_id TEXT NOT NULL, scorer_version TEXT, available_at REAL NOT NULL,"
               " lease TEXT, lease_until REAL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT)")
    db.execute("INSERT INTO jobs(key, payload, scorer_id, scorer_version, available_at, attempts)"
               " VALUES (?, ?, 'q', '1', 0, 1)", (_job().key, _job().run.to_json()))
    db.commit()
    db.close()
    admin = SqliteJudgeAdmin(path)  # `tracescore judges` before the new daemon ever ran
    assert await admin.parked_jobs() == {} and await admin.judge_breakers() == []
    store = SqliteStore(path)
    await store.start()
    try:
        (leased,) = await store.take(1)
        assert (leased.job, leased.attempt, leased.parked_since) == (_job(), 2, None)
        await store.settle(leased, Park(0.0, "budget_exhausted"))
        assert await admin.parked_jobs() == {"budget_exhausted": 1}
        (leased,) = await store.take(1)
        assert leased.attempt == 2
    finally:
        await store.shutdown()
