"""Conversations in the SQLite file (SPEC §7): tables ``sessions``, ``session_turns`` and
``session_counts``, under the store's `SessionRules`.

`SqliteSessions` is the `collector.store.interface.SessionLog` half of `SqliteStore` (a
mixin: it runs on the store's connection thread, ``_runner``). Each call is one
transaction. A session row is open (``wake_at``: its due time, or when its claim runs out)
or scored (``forget_at``: its last turn noted + ``retain_s``). Forgetting is done a bounded
number of rows at a time, inside `note_turns` and `take_due_sessions`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from collector.common.session_types import DueSession, SessionTurn, arrival
from collector.common.types import RunRecord
from collector.store.interface import PARTIAL_REASONS, SESSION_COUNTS, SessionRules
from collector.store.sqlite.runner import SqliteRunner

FORGET_BATCH = 64
"""Scored sessions forgotten per call at most (the rest on later calls)."""

FORCE_BATCH = 256
"""Open sessions forced out per call at most (after ``max_open`` was lowered, the rest later)."""

_PRIORITY = {"ended": 0, "forced": 1, "max_turns": 2, "max_age": 3, "idle": 4}


def schedule(
    rules: SessionRules, now: float, opened_at: float, *, ended: bool, turns: int,
    sticky: tuple[float, str] | None = None, idle_from: float | None = None,
) -> tuple[float, str]:
    """When an open session is due after turns were noted, and why: the earliest of its idle
    timer (``idle_s`` after ``idle_from``, its latest turn's arrival; default ``now``), the end
    marker, ``max_turns``, its ``max_age`` cap and an earlier reason that still holds
    (``sticky``); on a tie the end marker wins, then the partial reasons.

    Example:
        >>> rules = SessionRules(idle_s=10, max_age_s=100, max_turns=3)
        >>> schedule(rules, 50.0, 0.0, ended=False, turns=1), schedule(rules, 95.0, 0.0, ended=False, turns=1)
        ((60.0, 'idle'), (100.0, 'max_age'))
        >>> schedule(rules, 50.0, 0.0, ended=True, turns=3), schedule(rules, 50.0, 0.0, ended=False, turns=3)
        ((50.0, 'ended'), (50.0, 'max_turns'))
        >>> schedule(rules, 50.0, 0.0, ended=False, turns=1, sticky=(40.0, "forced"))
        (40.0, 'forced')
        >>> schedule(rules, 50.0, 0.0, ended=False, turns=1, idle_from=45.0)  # it arrived 5 s before it was noted
        (55.0, 'idle')
    """
    options = [((now if idle_from is None else idle_from) + rules.idle_s, "idle"),
               (opened_at + rules.max_age_s, "max_age")]
    if ended:
        options.append((now, "ended"))
    if turns >= rules.max_turns:
        options.append((now, "max_turns"))
    if sticky is not None:
        options.append(sticky)
    return min(options, key=lambda option: (option[0], _PRIORITY[option[1]]))


def _bump(db: sqlite3.Connection, name: str, by: int = 1) -> None:
    db.execute("INSERT INTO session_counts(name, value) VALUES (?, ?)"
               " ON CONFLICT(name) DO UPDATE SET value = value + excluded.value", (name, by))


def _forget(db: sqlite3.Connection, now: float) -> None:
    scopes = db.execute("SELECT scope FROM sessions WHERE forget_at <= ? ORDER BY forget_at LIMIT ?",
                        (now, FORGET_BATCH)).fetchall()
    db.executemany("DELETE FROM session_turns WHERE scope = ?", scopes)
    db.executemany("DELETE FROM sessions WHERE scope = ?", scopes)


def _note_one(db: sqlite3.Connection, rules: SessionRules, group: list[SessionTurn], now: float) -> None:
    first = group[0]
    scope = first.scope
    arrived = arrival(group, now)
    known = {(t, s) for t, s in db.execute(
        "SELECT trace_id, span_id FROM session_turns WHERE scope = ?", (scope,))}
    fresh = {(t.run.trace_id, t.run.span_id) for t in group} - known
    db.executemany("INSERT OR REPLACE INTO session_turns(scope, trace_id, span_id, run) VALUES (?, ?, ?, ?)",
                   [(scope, t.run.trace_id, t.run.span_id, t.run.to_json()) for t in group])
    row = db.execute("SELECT open, opened_at, due_at, reason, claim_until, scored_rev, last_noted FROM sessions"
                     " WHERE scope = ?", (scope,)).fetchone()
    opened_at, claim, sticky = now, None, None
    if row is None:
        db.execute("INSERT INTO sessions(scope, session_id, service, open, opened_at, last_noted)"
                   " VALUES (?, ?, ?, 1, ?, ?)", (scope, first.session_id, first.run.service, now, arrived))
    else:
        arrived = max(arrived, row[6])  # idle counts from the latest turn's arrival, whichever came first
    if row is not None and not row[0]:  # scored (or closed short): a new turn reopens it, unless scored often enough
        if not fresh or row[5] >= rules.max_revisions:
            if fresh:
                _bump(db, "capped_total", len(fresh))
            db.execute("UPDATE sessions SET last_noted = ?, forget_at = ? WHERE scope = ?",
                       (arrived, arrived + rules.retain_s, scope))
            return
        if row[5]:  # it was scored: this is a reopening (a session closed short was never scored)
            _bump(db, "reopened_total")
        db.execute("UPDATE sessions SET open = 1, opened_at = ?, forced = 0, forget_at = NULL WHERE scope = ?",
                   (now, scope))
    elif row is not None and row[4] is not None and row[4] > now:  # claimed: these turns open the next revision
        claim = row[4]
        db.execute("UPDATE sessions SET opened_at = ?, forced = 0 WHERE scope = ?", (now, scope))
    elif row is not None:
        opened_at = row[1]
        sticky = (row[2], row[3]) if row[3] != "idle" else None
    count = int(db.execute("SELECT count(*) FROM session_turns WHERE scope = ?", (scope,)).fetchone()[0])
    due_at, reason = schedule(rules, now, opened_at, ended=any(t.ended for t in group), turns=count, sticky=sticky,
                              idle_from=arrived)
    db.execute("UPDATE sessions SET due_at = ?, reason = ?, wake_at = ?, last_noted = ? WHERE scope = ?",
               (due_at, reason, max(due_at, claim or due_at), arrived, scope))


def _force_excess(db: sqlite3.Connection, rules: SessionRules, now: float) -> None:
    unforced = int(db.execute("SELECT count(*) FROM sessions WHERE open = 1 AND forced = 0").fetchone()[0])
    excess = min(unforced - rules.max_open, FORCE_BATCH)
    if excess <= 0:
        return
    victims = db.execute("SELECT scope FROM sessions WHERE open = 1 AND forced = 0"
                         " ORDER BY opened_at, scope LIMIT ?", (excess,)).fetchall()
    # Due now, unless it was due earlier already (an ended session stays "ended"); a claim holds.
    db.executemany("UPDATE sessions SET forced = 1, reason = CASE WHEN due_at <= ? THEN reason ELSE 'forced' END,"
                   " due_at = min(due_at, ?), wake_at = max(min(due_at, ?), coalesce(claim_until, 0))"
                   " WHERE scope = ?", [(now, now, now, scope) for (scope,) in victims])
    _bump(db, "forced_total", len(victims))


def note_turns(db: sqlite3.Connection, rules: SessionRules, turns: Sequence[SessionTurn], now: float) -> None:
    """`SessionLog.note_turns` inside the caller's transaction."""
    _forget(db, now)
    groups: dict[str, list[SessionTurn]] = {}
    for turn in turns:
        groups.setdefault(turn.scope, []).append(turn)
    for group in groups.values():
        _note_one(db, rules, group, now)
    _force_excess(db, rules, now)


def take_due(db: sqlite3.Connection, rules: SessionRules, now: float, limit: int, lease_s: float) -> list[DueSession]:
    """`SessionLog.take_due_sessions` inside the caller's transaction."""
    _forget(db, now)
    rows = db.execute("SELECT scope, session_id, service, scored_rev, reason, last_noted FROM sessions"
                      " WHERE wake_at <= ? ORDER BY wake_at, scope LIMIT ?", (now, limit)).fetchall()
    taken = []
    for scope, session_id, service, scored_rev, reason, last_noted in rows:
        runs = [RunRecord.from_json(text) for (text,) in db.execute(
            "SELECT run FROM session_turns WHERE scope = ?", (scope,))]
        if len(runs) < rules.min_turns:  # too short to score: closed as it is, its revision unused
            _bump(db, "short_total")
            db.execute("UPDATE sessions SET open = 0, claim_until = NULL, wake_at = NULL, due_at = NULL,"
                       " reason = 'idle', forced = 0, forget_at = ? WHERE scope = ?",
                       (last_noted + rules.retain_s, scope))
            continue
        db.execute("UPDATE sessions SET claim_until = ?, wake_at = ? WHERE scope = ?", (now + lease_s, now + lease_s, scope))
        runs.sort(key=lambda run: (run.start_ns, run.trace_id, run.span_id))
        taken.append(DueSession(scope, session_id, service, tuple(runs), scored_rev + 1, reason in PARTIAL_REASONS,
                                reason))
    return taken


def mark_scored(db: sqlite3.Connection, rules: SessionRules, due: Sequence[DueSession], now: float) -> None:
    """`SessionLog.sessions_scored` inside the caller's transaction."""
    for session in due:
        row = db.execute("SELECT open, scored_rev, last_noted FROM sessions WHERE scope = ?",
                         (session.scope,)).fetchone()
        if row is None or not row[0] or row[1] >= session.revision:
            continue  # forgotten, or this revision was already recorded (a claim that ran out)
        scored = {(run.trace_id, run.span_id) for run in session.turns}
        later = [key for key in db.execute("SELECT trace_id, span_id FROM session_turns WHERE scope = ?",
                                           (session.scope,)) if key not in scored]
        _bump(db, "scored_total")
        if later and session.revision < rules.max_revisions:  # turns noted after the claim: open still
            _bump(db, "reopened_total")
            db.execute("UPDATE sessions SET scored_rev = ?, opened_at = ?, claim_until = NULL, wake_at = due_at"
                       " WHERE scope = ?", (session.revision, now, session.scope))
            continue
        if later:
            _bump(db, "capped_total", len(later))
        db.execute("UPDATE sessions SET open = 0, scored_rev = ?, claim_until = NULL, wake_at = NULL,"
                   " due_at = NULL, reason = 'idle', forced = 0, forget_at = ? WHERE scope = ?",
                   (session.revision, row[2] + rules.retain_s, session.scope))


def counts(db: sqlite3.Connection) -> dict[str, int]:
    """`SessionLog.session_counts` (every name of `SESSION_COUNTS`, 0 when nothing happened)."""
    found = dict.fromkeys(SESSION_COUNTS, 0)
    for is_open, n in db.execute("SELECT open, count(*) FROM sessions GROUP BY open"):
        found["open" if is_open else "scored"] = int(n)
    found.update({name: int(value) for name, value in db.execute("SELECT name, value FROM session_counts")})
    return found


class SqliteSessions:
    """The `SessionLog` methods of `collector.store.sqlite.store.SqliteStore` (see the module)."""

    _runner: SqliteRunner
    session_rules: SessionRules

    async def note_turns(self, turns: Sequence[SessionTurn], now: float) -> None:
        """Record turns and move their sessions' timers (see `SessionLog.note_turns`)."""
        if turns:
            await self._runner.call(lambda db: note_turns(db, self.session_rules, turns, now))

    async def take_due_sessions(self, now: float, limit: int, lease_s: float) -> list[DueSession]:
        """Claim due sessions with their turns (see `SessionLog.take_due_sessions`)."""
        return await self._runner.call(lambda db: take_due(db, self.session_rules, now, limit, lease_s))

    async def sessions_scored(self, due: Sequence[DueSession], now: float) -> None:
        """Mark claimed sessions scored (see `SessionLog.sessions_scored`)."""
        if due:
            await self._runner.call(lambda db: mark_scored(db, self.session_rules, due, now))

    async def next_session_due(self) -> float | None:
        """When the earliest open session is due or its claim runs out (None: none open)."""
        found = await self._runner.call(lambda db: db.execute("SELECT min(wake_at) FROM sessions").fetchone()[0])
        return None if found is None else float(found)

    async def session_counts(self) -> dict[str, int]:
        """Open and retained sessions, and the totals (see `SessionLog.session_counts`)."""
        return await self._runner.call(counts)
