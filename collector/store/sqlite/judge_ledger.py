"""The judge ledger of the SQLite store (SPEC §8): budgets and breakers in the file, rates in memory.

One daemon process serves a SQLite deployment, so budgets and breakers only need to be
durable (they survive a restart) and readable by ``tracescore judges`` from another
process: tables ``judge_spend``, ``judge_reservations``, ``judge_limits`` and ``judge_breakers``
(`collector.store.sqlite.schema.JUDGE_TABLES`). Parked jobs are counted from the ``jobs``
table (`collector.store.sqlite.jobs.count_parked`). Rates and cool-downs are the process's
own (`collector.store.sqlite.judge_rates.LocalRates`).

`SqliteJudgeLedger` is the `collector.store.judge_interface.JudgeLedger` half of
`SqliteStore` (a mixin on its connection thread, ``_runner``); `SqliteJudgeAdmin` is the
same ledger opened beside the daemon, one connection per call.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from collector.common.judge_types import Breaker, BudgetUse
from collector.store.judge_interface import AMOUNT_TOLERANCE, WINDOW_RETENTION_S
from collector.store.sqlite.jobs import count_parked
from collector.store.sqlite.judge_rates import LocalRates
from collector.store.sqlite.runner import SqliteRunner, run_beside
from collector.store.sqlite.totals import add_totals
from collector.store.totals import judge_tally

T = TypeVar("T")


def reserve_spend(db: sqlite3.Connection, reservation: str, window: str, limits: Sequence[tuple[str, float]],
                  amount: float, now: float, ttl_s: float, wall: float) -> str | None:
    """`JudgeLedger.reserve_judge_spend` in one transaction (``wall``: the store's clock, for
    forgetting windows not written for `WINDOW_RETENTION_S`).

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> limits = [("global", 0.05), ("scorer:q", 0.02)]
        >>> [reserve_spend(db, f"r{i}", "1d:x", limits, 0.01, now=0.0, ttl_s=60.0, wall=0.0) for i in range(3)]
        [None, None, 'scorer:q']
        >>> reserve_spend(db, "r3", "1d:x", limits, 0.01, now=60.0, ttl_s=60.0, wall=0.0)  # r0, r1 expired
    """
    db.execute("DELETE FROM judge_reservations WHERE expires_at <= ?", (now,))
    db.execute("DELETE FROM judge_spend WHERE kept_until < ?", (wall,))
    set_by_hand = limits_set(db)
    for scope, limit in limits:
        usd, configured = set_by_hand.get(scope, (limit, limit))
        limit = usd if configured == limit else limit
        spent = db.execute("SELECT spent FROM judge_spend WHERE budget_window = ? AND scope = ?",
                           (window, scope)).fetchone()
        reserved = db.execute("SELECT coalesce(sum(amount), 0.0) FROM judge_reservations"
                              " WHERE budget_window = ? AND scope = ?", (window, scope)).fetchone()[0]
        if (spent[0] if spent else 0.0) + reserved + amount > limit + AMOUNT_TOLERANCE:
            return scope
    db.executemany("INSERT OR REPLACE INTO judge_reservations(reservation, budget_window, scope, amount, expires_at)"
                   " VALUES (?, ?, ?, ?, ?)", [(reservation, window, scope, amount, now + ttl_s) for scope, _ in limits])
    return None


def settle_spend(db: sqlite3.Connection, reservation: str, window: str, scopes: Sequence[str], actual: float,
                 wall: float) -> None:
    """`JudgeLedger.settle_judge_spend` in one transaction.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> reserve_spend(db, "r", "w", [("global", 1.0)], 0.5, now=0.0, ttl_s=60.0, wall=0.0)
        >>> settle_spend(db, "r", "w", ["global"], 0.2, wall=0.0); settle_spend(db, "s", "w", ["global"], 0.1, wall=0.0)
        >>> spend_of(db, "w", now=0.0)
        [BudgetUse(scope='global', spent=0.30000000000000004, reserved=0.0)]
    """
    db.execute("DELETE FROM judge_reservations WHERE budget_window = ? AND reservation = ?", (window, reservation))
    db.executemany(
        "INSERT INTO judge_spend(budget_window, scope, spent, kept_until) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(budget_window, scope) DO UPDATE SET spent = spent + excluded.spent, kept_until = excluded.kept_until",
        [(window, scope, actual, wall + WINDOW_RETENTION_S) for scope in dict.fromkeys(scopes)])


def set_limit(db: sqlite3.Connection, scope: str, usd: float, configured: float) -> None:
    """`JudgeLedger.set_judge_limit`: the scope's row, replaced (removed at ``configured``).

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> set_limit(db, "global", 0.10, 0.05)
        >>> [reserve_spend(db, f"r{i}", "w", [("global", 0.05)], 0.04, now=0.0, ttl_s=60.0, wall=0.0) for i in range(3)]
        [None, None, 'global']
        >>> reserve_spend(db, "r9", "w", [("global", 0.2)], 0.04, now=0.0, ttl_s=60.0, wall=0.0)  # configured anew
        >>> set_limit(db, "global", 0.05, 0.05); limits_set(db)
        {}
    """
    if float(usd) == float(configured):
        db.execute("DELETE FROM judge_limits WHERE scope = ?", (scope,))
    else:
        db.execute("INSERT OR REPLACE INTO judge_limits(scope, usd, configured) VALUES (?, ?, ?)",
                   (scope, float(usd), float(configured)))


def limits_set(db: sqlite3.Connection) -> dict[str, tuple[float, float]]:
    """`JudgeLedger.judge_limits`: scope -> (usd, configured)."""
    return {scope: (float(usd), float(conf)) for scope, usd, conf in db.execute(
        "SELECT scope, usd, configured FROM judge_limits")}


def wake_parked(db: sqlite3.Connection, reason: str, now: float) -> int:
    """`JudgeLedger.wake_parked_jobs`: the jobs parked for ``reason`` and waiting become due now."""
    return db.execute("UPDATE jobs SET available_at = ? WHERE park_reason = ? AND lease IS NULL AND available_at > ?",
                      (now, reason, now)).rowcount


def spend_of(db: sqlite3.Connection, window: str, now: float) -> list[BudgetUse]:
    """Every scope's spent and live reserved USD in ``window``, ``global`` first, then by name.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> _ = reserve_spend(db, "r", "w", [("scorer:q", 1.0), ("global", 1.0)], 0.5, now=0.0, ttl_s=60.0, wall=0.0)
        >>> [(u.scope, u.reserved) for u in spend_of(db, "w", now=0.0)], spend_of(db, "w", now=60.0)
        ([('global', 0.5), ('scorer:q', 0.5)], [])
    """
    uses: dict[str, list[float]] = {}
    for scope, spent in db.execute("SELECT scope, spent FROM judge_spend WHERE budget_window = ?", (window,)):
        uses.setdefault(scope, [0.0, 0.0])[0] = spent
    for scope, reserved in db.execute("SELECT scope, sum(amount) FROM judge_reservations"
                                      " WHERE budget_window = ? AND expires_at > ? GROUP BY scope", (window, now)):
        uses.setdefault(scope, [0.0, 0.0])[1] = reserved
    return [BudgetUse(scope, float(spent), float(reserved)) for scope, (spent, reserved) in sorted(
        uses.items(), key=lambda item: (item[0] != "global", item[0]))]


def open_breaker(db: sqlite3.Connection, breaker: Breaker) -> None:
    """`JudgeLedger.open_judge_breaker`: the breaker's row, replaced."""
    db.execute("INSERT OR REPLACE INTO judge_breakers(key, model, reason, since, next_probe, interval_s)"
               " VALUES (?, ?, ?, ?, ?, ?)", (breaker.key, breaker.model, breaker.reason, breaker.since,
                                              breaker.next_probe, breaker.interval_s))


def claim_probe(db: sqlite3.Connection, key: str, now: float, hold_s: float) -> bool:
    """`JudgeLedger.claim_judge_probe` in one statement.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> open_breaker(db, Breaker("m#k", "m", "401", 0.0, 60.0, 60.0))
        >>> [claim_probe(db, "m#k", now, 60.0) for now in (59.0, 60.0, 61.0, 120.0)]
        [False, True, False, True]
    """
    return db.execute("UPDATE judge_breakers SET next_probe = ? WHERE key = ? AND next_probe <= ?",
                      (now + hold_s, key, now)).rowcount == 1


def close_breakers(db: sqlite3.Connection, model: str | None, key: str | None) -> int:
    """`JudgeLedger.close_judge_breakers`: delete the breakers matching every filter given
    (neither: every breaker); returns how many.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> for k in ("m#a", "m#b", "n#a"): open_breaker(db, Breaker(k, k[0], "401", 0.0, 60.0, 60.0))
        >>> close_breakers(db, "m", None), close_breakers(db, None, "n#a"), close_breakers(db, None, "n#a")
        (2, 1, 0)
    """
    return db.execute("DELETE FROM judge_breakers WHERE (? IS NULL OR model = ?) AND (? IS NULL OR key = ?)",
                      (model, model, key, key)).rowcount


def list_breakers(db: sqlite3.Connection) -> list[Breaker]:
    """Every open breaker, by key."""
    rows = db.execute("SELECT key, model, reason, since, next_probe, interval_s FROM judge_breakers ORDER BY key")
    return [Breaker(k, m, r, float(s), float(n), float(i)) for k, m, r, s, n, i in rows]


class SqliteJudgeLedger:
    """`JudgeLedger` on the SQLite file (module docstring); mixed into `SqliteStore`."""

    _runner: SqliteRunner

    def _judge_call(self, fn: Callable[[sqlite3.Connection], T]) -> Awaitable[T]:
        """Run ``fn`` on the store's connection thread (`SqliteJudgeAdmin`: a connection of its own)."""
        return self._runner.call(fn)

    @functools.cached_property
    def _judge_rates(self) -> LocalRates:
        return LocalRates()

    async def reserve_judge_spend(self, reservation: str, window: str, limits: Sequence[tuple[str, float]],
                                  amount: float, now: float, ttl_s: float) -> str | None:
        """Reserve ``amount`` against every limit, or return the first scope it would cross."""
        wall = time.time()
        return await self._judge_call(
            lambda db: reserve_spend(db, reservation, window, limits, amount, now, ttl_s, wall))

    async def settle_judge_spend(self, reservation: str, window: str, scopes: Sequence[str], actual: float) -> None:
        """Drop the reservation and add ``actual`` to each scope's spend (runs even if cancelled)."""
        wall = time.time()
        await self._judge_call(lambda db: settle_spend(db, reservation, window, scopes, actual, wall))

    async def judge_spend(self, window: str, now: float) -> list[BudgetUse]:
        """Every scope's spent and live reserved USD in ``window``."""
        return await self._judge_call(lambda db: spend_of(db, window, now))

    async def take_judge_rate(self, model: str, rpm: int, tpm: int, tokens: int) -> float:
        """Take one request and ``tokens`` from the process's limits, or say how long to wait."""
        return self._judge_rates.take(model, rpm, tpm, tokens)

    async def add_judge_tokens(self, model: str, tpm: int, tokens: int) -> None:
        """Charge a call's output tokens to the model's token limit."""
        self._judge_rates.add_tokens(model, tpm, tokens)

    async def cool_down_judge(self, model: str, seconds: float) -> None:
        """No request to ``model`` for ``seconds`` (a longer cool-down is kept)."""
        self._judge_rates.cool_down(model, seconds)

    async def open_judge_breaker(self, breaker: Breaker) -> None:
        """Open (or re-open) a breaker, durably."""
        await self._judge_call(lambda db: open_breaker(db, breaker))

    async def claim_judge_probe(self, key: str, now: float, hold_s: float) -> bool:
        """Claim the breaker's due probe (pushing the next one to ``now + hold_s``)."""
        return await self._judge_call(lambda db: claim_probe(db, key, now, hold_s))

    async def close_judge_breakers(self, model: str | None = None, key: str | None = None) -> int:
        """Close the breaker ``key``, or every breaker of ``model`` (neither: all); returns how many."""
        return await self._judge_call(lambda db: close_breakers(db, model, key))

    async def judge_breakers(self) -> list[Breaker]:
        """Every open breaker."""
        return await self._judge_call(list_breakers)

    async def count_judge_call(self, model: str, *, failed: bool, input_tokens: int, output_tokens: int,
                               cost_usd: float) -> None:
        """Add one settled judge call to the totals (`collector.store.sqlite.totals`)."""
        tally = judge_tally(model, failed=failed, input_tokens=input_tokens, output_tokens=output_tokens,
                            cost_usd=cost_usd)
        await self._judge_call(lambda db: add_totals(db, tally))

    async def set_judge_limit(self, scope: str, usd: float, configured: float) -> None:
        """Set (or, at ``configured``, remove) the limit of ``scope``, durably."""
        await self._judge_call(lambda db: set_limit(db, scope, usd, configured))

    async def judge_limits(self) -> dict[str, tuple[float, float]]:
        """The limits set by hand: scope -> (usd, configured)."""
        return await self._judge_call(limits_set)

    async def wake_parked_jobs(self, reason: str) -> int:
        """Make the jobs parked for ``reason`` due now (the daemon's next take runs them)."""
        now = time.time()
        return await self._judge_call(lambda db: wake_parked(db, reason, now))

    async def parked_jobs(self) -> dict[str, int]:
        """Jobs parked now, per reason (`collector.store.sqlite.jobs.count_parked`)."""
        return await self._judge_call(count_parked)


class SqliteJudgeAdmin(SqliteJudgeLedger):
    """The ledger of a SQLite queue file opened beside the running daemon (``tracescore judges``).

    Budgets, breakers and parked jobs are the daemon's (the file); rates and cool-downs are
    this process's own, so they mean nothing here.

    Args:
        path: the queue file (``queue.url``'s path); it must exist.

    Example:
        >>> import asyncio, os, tempfile
        >>> from collector.store.sqlite.store import SqliteStore
        >>> async def resume(path):  # `tracescore judges resume m` while the daemon runs
        ...     store = SqliteStore(path)
        ...     await store.start()
        ...     await store.open_judge_breaker(Breaker("m#k", "m", "401 invalid api key", 0.0, 60.0, 60.0))
        ...     closed = await SqliteJudgeAdmin(path).close_judge_breakers(model="m")
        ...     left = await store.judge_breakers()
        ...     await store.shutdown()
        ...     return closed, left
        >>> asyncio.run(resume(os.path.join(tempfile.mkdtemp(), "q.db")))
        (1, [])
    """

    def __init__(self, path: str) -> None:
        self._path = path

    def _judge_call(self, fn: Callable[[sqlite3.Connection], T]) -> Awaitable[T]:
        """Run ``fn`` in a transaction of a connection of its own (`run_beside`)."""
        return run_beside(self._path, fn)

    async def close(self) -> None:
        """Nothing to release (each call opens and closes its connection)."""

