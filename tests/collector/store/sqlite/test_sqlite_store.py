"""The SQLite store: durable trace buffer, leased idempotent queue, dead letters, outbox."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from collector.common.handoff import Once
from collector.common.types import Dead, Done, Retry, RunRecord, ScoreJob, ScoreRecord, TraceChunk
from collector.store.sqlite.store import SqliteStore

T1, T2, T3 = b"\x01" * 16, b"\x02" * 16, b"\x03" * 16


def _job(span: str = "cd" * 8, scorer: str = "q", version: str | None = "1") -> ScoreJob:
    return ScoreJob(RunRecord(trace_id="ab" * 16, span_id=span, span_name="invoke_agent"), scorer, version)


def _record(key: str) -> ScoreRecord:
    return ScoreRecord(key, "ab" * 16, "cd" * 8, "ef" * 8, "q", "q", score=1.0)


async def test_buffer_decides_after_wait_and_survives_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    store = SqliteStore(path, decision_wait=5.0)
    await store.start()
    now = 1000.0
    await store.append([TraceChunk(T1, "spans", b"a", 2, False)], now=now)
    await store.append([TraceChunk(T1, "spans", b"b", 1, True, has_root=True),
                        TraceChunk(T1, "logs", b"l", 0, False)], now=now + 1)
    assert (await store.due(10, now=now + 5.9))[0] == []
    await store.shutdown()

    store = SqliteStore(path, decision_wait=5.0)
    await store.start()
    assert (await store.due(10, now=now + 6.0))[0] == [T1]
    chunks = await store.load(T1)
    assert [(c.signal, c.data) for c in chunks] == [("spans", b"a"), ("spans", b"b"), ("logs", b"l")]
    await store.finish(T1)
    assert (await store.due(10, now=now + 7))[0] == []
    assert (await store.stats()).traces == 0  # decided: kept only as context
    await store.shutdown()


async def test_jobs_are_idempotent_on_key(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    assert await store.put([_job(), _job(), _job(version="2"), _job(scorer="other")]) == [True, False, True, True]
    leased = await store.take(10)
    assert len(leased) == 3 and store.depth() == 3
    for item in leased:
        await store.settle(item, Done(_record(item.job.key)))
    assert await store.put([_job()]) == [False]  # done keys are never queued again
    assert store.depth() == 3  # three records wait in the outbox
    pending = await store.pending(10)
    assert sorted(p.record.key for p in pending) == sorted(i.job.key for i in leased)
    await store.release([p.item_id for p in pending])
    assert store.depth() == 0 and await store.pending(10) == []
    await store.shutdown()


async def test_expired_lease_is_redelivered_and_late_settle_ignored(tmp_path: Path) -> None:
    # A 1 s lease: the second take, however slow the machine, comes while it is held.
    store = SqliteStore(str(tmp_path / "q.db"), visibility_timeout_s=1.0)
    await store.start()
    await store.put([_job()])
    first = (await store.take(1))[0]
    assert await store.take(1) == []
    deadline = time.monotonic() + 30
    second = []
    while not second and time.monotonic() < deadline:  # until the lease ran out
        second = await store.take(1)
        await asyncio.sleep(0.02)
    assert second and second[0].attempt == 2
    await store.settle(first, Done(_record(first.job.key)))  # lost its lease: ignored
    assert await store.pending(10) == []
    await store.settle(second[0], Done(_record(first.job.key)))
    assert len(await store.pending(10)) == 1
    await store.shutdown()


async def test_retry_dead_letter_and_restart_releases_leases(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    store = SqliteStore(path, max_attempts=2)
    await store.start()
    await store.put([_job("01" * 8), _job("02" * 8)])
    a, b = await store.take(2)
    await store.settle(a, Retry(60.0, "judge 429"))
    assert await store.take(5) == []  # a waits for its delay, b is leased
    await store.settle(b, Dead("ScorerRunError", "boom", _record(b.job.key)))
    dead = await store.dead_letters()
    assert dead == [{"key": b.job.key, "attempts": 1, "error": {
        "type": "ScorerRunError", "message": "boom", "traceback": "", "partial": None,
        "scorer_id": "q", "scorer_version": "1", "evaluation_span_id": "ef" * 8}}]
    assert await store.put([b.job]) == [False]
    assert [p.record.key for p in await store.pending(5)] == [b.job.key]
    await store.put([_job("03" * 8)])
    crashed = await store.take(1)
    assert crashed
    await store.shutdown()

    store = SqliteStore(path, max_attempts=2)
    await store.start()  # the crashed process's lease is released at once
    again = await store.take(5)
    assert [j.job.key for j in again] == [crashed[0].job.key]
    stats = await store.stats()
    assert (stats.in_flight, stats.dead, stats.outbox) == (1, 1, 1)
    await store.shutdown()


async def test_job_taken_too_often_goes_to_dead_letters(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    for _ in range(3):
        store = SqliteStore(path, max_attempts=2)
        await store.start()
        await store.put([_job()])
        await store.take(1)  # a worker that dies every time
        await store.shutdown()
    store = SqliteStore(path, max_attempts=2)
    await store.start()
    assert await store.take(1) == []
    assert (await store.dead_letters())[0]["error"]["type"] == "LeaseExpired"
    await store.shutdown()


async def test_outbox_defer(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    await store.put([_job()])
    leased = (await store.take(1))[0]
    await store.settle(leased, Done(_record(leased.job.key)))
    items = await store.pending(5)
    await store.defer([i.item_id for i in items], 60.0)
    assert await store.pending(5) == []
    assert await store.prune(3600.0) == 0
    assert await store.prune(3600.0, now=time.time() + 7200) == 1  # the done key
    assert await store.put([_job()]) == [True]  # replay protection ends with retention
    await store.shutdown()
    await store.shutdown()


async def test_group_commit_isolates_a_failing_call(tmp_path: Path) -> None:
    import asyncio
    import sqlite3

    from collector.store.sqlite.runner import SqliteRunner

    runner = SqliteRunner(str(tmp_path / "r.db"))
    await runner.open()

    def insert(key: str) -> Callable[[sqlite3.Connection], None]:
        return lambda db: db.execute("INSERT INTO done(key, at) VALUES (?, 0)", (key,)) and None

    def failing(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO done(key, at) VALUES ('bad', 0)")
        raise ValueError("boom")

    results = await asyncio.gather(runner.call(insert("a")),
                                   runner.call(failing), runner.call(insert("b")), return_exceptions=True)
    assert isinstance(results[1], ValueError) and results[0] is None and results[2] is None
    keys = await runner.call(lambda db: [r[0] for r in db.execute("SELECT key FROM done ORDER BY key")])
    assert keys == ["a", "b"]
    await runner.close()


async def test_one_process_per_queue_file_and_busy_database_fails_not_hangs(tmp_path: Path) -> None:
    import sqlite3

    import pytest

    from collector.store.sqlite.runner import SqliteRunner

    path = str(tmp_path / "q.db")
    store = SqliteStore(path)
    await store.start()
    with pytest.raises(RuntimeError, match="in use by another tracescore process"):
        await SqliteStore(path).start()
    await store.shutdown()

    runner = SqliteRunner(path)
    await runner.open()
    await runner.call(lambda db: db.execute("PRAGMA busy_timeout=50"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # someone else holds the write lock
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        await runner.call(lambda db: db.execute("INSERT INTO done(key, at) VALUES ('k', 0)"))
    other.execute("ROLLBACK")
    other.close()
    await runner.call(lambda db: db.execute("INSERT INTO done(key, at) VALUES ('k', 0)"))
    await runner.close()


async def test_a_file_of_the_earlier_layout_is_upgraded_and_keeps_its_traces(tmp_path: Path) -> None:
    import sqlite3

    path = str(tmp_path / "q.db")
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE traces (trace_id BLOB PRIMARY KEY, first_seen REAL NOT NULL,"
        " span_count INTEGER NOT NULL DEFAULT 0, decide_at REAL, has_candidate INTEGER NOT NULL DEFAULT 0,"
        " root_seen INTEGER NOT NULL DEFAULT 0, decided INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX traces_first_seen ON traces(first_seen);"
        "CREATE TABLE chunks (id INTEGER PRIMARY KEY AUTOINCREMENT, trace_id BLOB NOT NULL,"
        " signal TEXT NOT NULL, data BLOB NOT NULL);")
    db.execute("INSERT INTO traces VALUES (?, 0, 1, 5, 1, 1, 0)", (T1,))
    db.execute("INSERT INTO chunks(trace_id, signal, data) VALUES (?, 'spans', x'61')", (T1,))
    db.commit()
    db.close()
    store = SqliteStore(path, decision_wait=5.0)
    await store.start()
    await store.append([TraceChunk(T1, "spans", b"b", 1, True), TraceChunk(T2, "spans", b"c", 1, True, True)], now=1.0)
    assert (await store.due(10, now=6.0))[0] == [T1, T2]
    assert [c.data for c in await store.load(T1)] == [b"a", b"b"]
    assert [c.data for c in await store.load(T2)] == [b"c"]
    await store.shutdown()


async def test_eviction_takes_the_newest_traces_and_spares_runs_accepted_before(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"), max_traces=2)
    await store.start()
    await store.append([TraceChunk(T1, "spans", b"1", 1, False)], now=1.0)
    await store.append([TraceChunk(T2, "spans", b"2", 1, True)], now=2.0)  # a run span
    # T1 is the oldest, but this request adds to it: T3, the newest without a run, goes.
    result = await store.append([TraceChunk(T1, "spans", b"1b", 1, False),
                                 TraceChunk(T3, "spans", b"3", 1, False)], now=3.0)
    assert result.evicted_traces == 1
    assert [c.data for c in await store.load(T1)] == [b"1", b"1b"]
    assert await store.load(T3) == []
    # More new traces in one request than the buffer holds (a flood): they go, not T2's run.
    t4, t5, t6 = b"\x04" * 16, b"\x05" * 16, b"\x06" * 16
    result = await store.append([TraceChunk(t, "spans", t[:1], 1, False) for t in (t4, t5, t6)], now=4.0)
    assert result.evicted_traces == 3
    assert [bool(await store.load(t)) for t in (T1, T2, t4, t5, t6)] == [True, True, False, False, False]
    await store.shutdown()


async def test_trace_map_is_read_back_after_a_failed_commit(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"), decision_wait=1.0)
    await store.start()
    await store.append([TraceChunk(T1, "spans", b"1", 1, True, True)], now=0.0)
    buffer = store._buffer
    # What a rolled-back group commit leaves: an index that no longer matches the file.
    buffer.index.add([(T2, 1, 3)], now=0.0, rows=999)
    store._runner._on_rollback()  # type: ignore[misc]
    assert await store.load(T2) == [] and [c.data for c in await store.load(T1)] == [b"1"]
    await store.append([TraceChunk(T2, "spans", b"2", 1, True, True)], now=0.0)
    assert (await store.due(10, now=1.0))[0] == [T1, T2] and buffer.count == 2
    await store.shutdown()


async def test_a_job_queued_here_is_taken_with_its_run_object_once(tmp_path: Path) -> None:
    typed = ("input models", "output models")
    run = RunRecord(trace_id="ab" * 16, span_id="cd" * 8, span_name="invoke_agent", typed=Once(typed))
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    assert await store.put([ScoreJob(run, "q", "1"), ScoreJob(run, "r", "1")]) == [True, True]
    first, second = await store.take(10)
    # Both jobs of the run get the object queued (its JSON was made once); its models go to one.
    assert first.job.run is run and second.job.run is run
    assert first.job.run.typed is not None and first.job.run.typed.take() == typed
    assert second.job.run.typed is not None and second.job.run.typed.take() is None
    await store.settle(first, Retry(0.0, "again"))
    (again,) = await store.take(10)
    # Taken again, the job's run is read from its row: equal, a new object, no models.
    assert again.job.run == run and again.job.run is not run and again.job.run.typed is None
    rows = await store._runner.call(lambda db: db.execute("SELECT payload FROM jobs").fetchall())
    assert all('"typed"' not in payload for (payload,) in rows)
    await store.shutdown()


async def test_a_record_settled_here_is_exported_as_that_object(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    await store.put([_job()])
    (leased,) = await store.take(1)
    record = _record(leased.job.key)
    await store.settle(leased, Done(record))
    (item,) = await store.pending(10)
    assert item.record is record
    await store.defer([item.item_id], 0.0)
    (item,) = await store.pending(10)  # read again after a failed export: parsed from its row
    assert item.record == record and item.record is not record
    await store.shutdown()


async def test_after_a_failed_commit_runs_and_records_are_read_from_their_rows(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    job = _job()
    await store.put([job])
    store._runner._on_rollback()  # type: ignore[misc]  # what a failed group commit does
    (leased,) = await store.take(1)
    assert leased.job.run == job.run and leased.job.run is not job.run
    record = _record(leased.job.key)
    await store.settle(leased, Done(record))
    store._runner._on_rollback()  # type: ignore[misc]
    (item,) = await store.pending(10)
    assert item.record == record and item.record is not record
    await store.shutdown()


async def test_a_kept_record_is_used_only_for_the_row_that_names_it(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    await store.put([_job()])
    (leased,) = await store.take(1)
    await store.settle(leased, Done(_record(leased.job.key)))
    (item,) = await store.pending(10)
    # A row id reused by another record (SQLite may reuse a rolled-back row's id).
    store._kept_scores.keep(item.item_id, _record("another key"), chars=10)
    await store.defer([item.item_id], 0.0)
    (again,) = await store.pending(10)
    assert again.record.key == leased.job.key
    await store.shutdown()
