"""The SQLite store's job queue: the ``jobs``, ``done`` and ``dead_letters`` tables.

Functions of a connection, run on the store's thread inside its transactions (see
`collector.store.sqlite.runner`): a key in ``done`` (completed or dead-lettered) is never
queued again; a taken job is leased until ``lease_until``; a job taken more than
``max_attempts`` times is dead-lettered; a job settled done or dead leaves with its judge
replies. A job handed back by `collector.common.judge_types.Park` gets its attempt back (the take
is undone) and keeps ``parked_since`` (its first park) and ``park_reason`` until it is
settled otherwise (`Retry`, `Done`, `Dead`) or dead-lettered: that is what "parked" means
(`count_parked`), whether it waits for its delay or was taken again meanwhile. A settlement
of a job still leased adds its tally to the totals in its transaction, and a job dead-lettered
at take counts ``failed`` for its scorer (`collector.store.totals`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence

from collector.common.judge_types import Park
from collector.common.types import (
    Dead,
    Done,
    LeasedJob,
    Retry,
    RunRecord,
    ScoreJob,
    ScoreRecord,
    Settlement,
)
from collector.store.kept import KeptRecords
from collector.store.sqlite.totals import add_totals
from collector.store.totals import field, settlement_tally


def put_jobs(db: sqlite3.Connection, jobs: Sequence[ScoreJob], now: float,
             kept: KeptRecords[str, RunRecord] | None = None) -> list[bool]:
    """Queue jobs idempotently; each flag says whether that job was new. ``kept`` keeps each new
    job's run (by job key) for `lease_jobs` in this process.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")
        >>> put_jobs(db, [job, job], now=0.0)
        [True, False]
    """
    flags = []
    payloads: dict[int, str] = {}  # a run's JSON, made once for all its scorers' jobs
    for job in jobs:
        key = job.key
        if db.execute("SELECT 1 FROM done WHERE key = ?", (key,)).fetchone():
            flags.append(False)
            continue
        payload = payloads.get(id(job.run))
        if payload is None:
            payload = payloads[id(job.run)] = job.run.to_json()
        cur = db.execute(
            "INSERT OR IGNORE INTO jobs(key, payload, scorer_id, scorer_version, available_at, supersedes)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (key, payload, job.scorer_id, job.scorer_version, now, job.supersedes),
        )
        flags.append(cur.rowcount == 1)
        if kept is not None and cur.rowcount == 1:
            kept.keep(key, job.run, chars=len(payload))
    return flags


def lease_jobs(
    db: sqlite3.Connection, limit: int, now: float, lease: str, visibility_s: float, max_attempts: int,
    kept: KeptRecords[str, RunRecord] | None = None,
) -> tuple[list[LeasedJob], int]:
    """Lease up to ``limit`` available jobs; returns them and how many were dead-lettered
    instead (taken more than ``max_attempts`` times). A job whose run ``kept`` holds (queued
    by this process) gets that run instead of one parsed from its row.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> _ = put_jobs(db, [ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q")], now=0.0)
        >>> taken, dead = lease_jobs(db, 10, now=1.0, lease="l", visibility_s=5.0, max_attempts=3)
        >>> [(j.job.scorer_id, j.attempt) for j in taken], dead
        ([('q', 1)], 0)
        >>> lease_jobs(db, 10, now=2.0, lease="m", visibility_s=5.0, max_attempts=3)  # still leased
        ([], 0)
    """
    rows = db.execute(
        "UPDATE jobs SET lease = ?, lease_until = ?, attempts = attempts + 1"
        " WHERE id IN (SELECT id FROM jobs WHERE available_at <= ?"
        " AND (lease_until IS NULL OR lease_until <= ?) ORDER BY id LIMIT ?)"
        " RETURNING id, key, payload, scorer_id, scorer_version, attempts, supersedes, parked_since",
        (lease, now + visibility_s, now, now, limit),
    ).fetchall()
    taken, dead = [], 0
    for job_id, key, payload, scorer_id, version, attempts, supersedes, parked_since in sorted(rows):
        run = kept.take(key) if kept is not None else None
        if attempts > max_attempts:
            dead_letter(db, job_id, key, payload, attempts,
                        json.dumps({"type": "LeaseExpired", "message": "the job's lease ran out too many times"}))
            add_totals(db, {field("scorer", scorer_id, "failed"): 1.0})
            dead += 1
            continue
        job = ScoreJob(run if run is not None else RunRecord.from_json(payload), scorer_id, version, supersedes)
        since = None if parked_since is None else float(parked_since)  # RETURNING may give a whole REAL as int
        taken.append(LeasedJob(job, job_id, lease, attempts, since))
    return taken, dead


def renew_leases(db: sqlite3.Connection, leased: Sequence[LeasedJob], until: float) -> int:
    """Extend the leases of running jobs to ``until``; returns how many are still held."""
    return sum(db.execute("UPDATE jobs SET lease_until = ? WHERE id = ? AND lease = ?",
                          (until, j.job_id, j.lease)).rowcount for j in leased)


def dead_letter(db: sqlite3.Connection, job_id: int, key: str, payload: str, attempts: int, error: str) -> None:
    """Move a job to the dead letters (``error``: its error JSON); its key is never queued again."""
    db.execute(
        "INSERT INTO dead_letters(key, payload, error, attempts, failed_at) VALUES (?, ?, ?, ?, ?)",
        (key, payload, error, attempts, time.time()),
    )
    _forget(db, job_id, key)


def settle_job(
    db: sqlite3.Connection, leased: LeasedJob, outcome: Settlement, error: str, now: float,
) -> tuple[bool, ScoreRecord | None]:
    """Finish, hand back or dead-letter a leased job (``error``: the dead letter's error JSON).

    Returns whether the job left the queue, and the record to put in the outbox (None when
    there is none, or when the lease was lost: another worker owns the job now). `Park`
    hands the job back like `Retry` but undoes this take's attempt and marks it parked.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> _ = put_jobs(db, [ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q")], now=0.0)
        >>> def take_and_settle(outcome, now):
        ...     (leased,), _ = lease_jobs(db, 1, now, f"l{now}", visibility_s=5.0, max_attempts=2)
        ...     settle_job(db, leased, outcome, "", now)
        ...     return leased.attempt, leased.parked_since
        >>> [take_and_settle(Park(0.0, "budget_exhausted"), t) for t in (1.0, 2.0, 3.0)]
        [(1, None), (1, 1.0), (1, 1.0)]
        >>> count_parked(db), take_and_settle(Retry(0.0, "boom"), 4.0), count_parked(db)
        ({'budget_exhausted': 1}, (1, 1.0), {})
        >>> take_and_settle(Retry(0.0, "boom"), 5.0)
        (2, None)
    """
    owned = db.execute(
        "SELECT key, payload FROM jobs WHERE id = ? AND lease = ?", (leased.job_id, leased.lease)
    ).fetchone()
    if owned is None:
        return False, None
    key, payload = owned
    add_totals(db, settlement_tally(leased.job, outcome))  # a leased job was never settled done or dead
    if isinstance(outcome, Retry):
        db.execute(
            "UPDATE jobs SET lease = NULL, lease_until = NULL, available_at = ?, last_error = ?,"
            " parked_since = NULL, park_reason = NULL WHERE id = ?",
            (now + outcome.delay_s, outcome.error, leased.job_id),
        )
        return False, None
    if isinstance(outcome, Park):
        db.execute(
            "UPDATE jobs SET lease = NULL, lease_until = NULL, available_at = ?, attempts = max(0, attempts - 1),"
            " parked_since = coalesce(parked_since, ?), park_reason = ? WHERE id = ?",
            (now + outcome.delay_s, now, outcome.reason, leased.job_id),
        )
        return False, None
    if isinstance(outcome, Dead):
        dead_letter(db, leased.job_id, key, payload, leased.attempt, error)
    elif isinstance(outcome, Done):
        _forget(db, leased.job_id, key)
    return True, outcome.record


def count_parked(db: sqlite3.Connection) -> dict[str, int]:
    """Jobs parked now (see the module docstring), per park reason.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> count_parked(db)
        {}
    """
    return dict(db.execute(
        "SELECT park_reason, count(*) FROM jobs WHERE park_reason IS NOT NULL GROUP BY park_reason").fetchall())


def _forget(db: sqlite3.Connection, job_id: int, key: str) -> None:
    """A job left for good: its key is done, its row and its judge replies go."""
    db.execute("INSERT OR IGNORE INTO done(key, at) VALUES (?, ?)", (key, time.time()))
    db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
    db.execute("DELETE FROM judge_replies WHERE job_key = ?", (key,))
