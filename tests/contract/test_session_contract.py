"""One contract, two backends: the session log (SPEC §7) in the SQLite file and in Redis.

Time is always given, so every timer is exact: idle (from the turns' arrival), end marker,
max_age, max_turns, max_open, min_turns, leases, revisions (never lowered) and retention."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from collector.common.session_types import DueSession, SessionTurn
from collector.common.types import RunRecord
from collector.store.interface import SessionRules
from collector.store.redis.partitioned import PartitionedRedisStore, open_redis_store
from collector.store.sqlite.store import SqliteStore

StoreFactory = Callable[..., Awaitable[Any]]
T0 = 1_000.0
RULES = SessionRules(idle_s=10.0, max_age_s=100.0, max_turns=50, max_revisions=3, max_open=100, retain_s=500.0)


# ``max_open`` is a bound per partition on a partitioned store (each keeps its share of it),
# tested there in tests/collector/store/redis/test_partitioned_store.py.
WHOLE_MAX_OPEN = pytest.mark.parametrize(
    "make_store", ["sqlite", "redis", pytest.param("redis-cluster", marks=pytest.mark.xdist_group("redis-cluster"))],
    indirect=True)


def rules(**changes: Any) -> SessionRules:
    return SessionRules(**{**RULES.__dict__, **changes})


def turn(n: int, *, session: str = "c1", start_ns: int | None = None, ended: bool = False,
         trace: str | None = None, answer: str = "ok", arrived: float | None = None) -> SessionTurn:
    run = RunRecord(trace_id=trace or f"{n:032x}", span_id=f"{n:016x}", service="bot",
                    start_ns=n if start_ns is None else start_ns, output=[answer], session_id=session)
    return SessionTurn(f"bot/{session}", session, run, ended, arrived_at=arrived)


def spans(due: DueSession) -> list[str]:
    return [run.span_id for run in due.turns]


async def take(store: Any, now: float, lease_s: float = 60.0) -> list[DueSession]:
    return list(await store.take_due_sessions(now, 10, lease_s))


async def score(store: Any, now: float) -> DueSession:
    (due,) = await take(store, now)
    await store.sessions_scored([due], now)
    return due


class TestWhenASessionIsDue:
    async def test_idle_s_after_its_last_turn(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1)], T0)
        await store.note_turns([turn(2)], T0 + 4)
        assert await store.next_session_due() == T0 + 14
        assert await take(store, T0 + 13.9) == []
        (due,) = await take(store, T0 + 14)
        assert (due.scope, due.session_id, due.service) == ("bot/c1", "c1", "bot")
        assert (due.revision, due.partial, due.reason, len(due.turns)) == (1, False, "idle", 2)
        assert all(isinstance(run, RunRecord) and run.session_id == "c1" for run in due.turns)

    async def test_idle_s_counts_from_the_last_turns_arrival_not_its_noting(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1, arrived=T0 - 3)], T0)  # decided 3 s after it arrived
        assert await store.next_session_due() == T0 + 7
        # A turn that arrived earlier but is noted later (its trace decided late) moves nothing back.
        await store.note_turns([turn(2, arrived=T0 - 5)], T0 + 1)
        assert await store.next_session_due() == T0 + 7
        await store.note_turns([turn(3, arrived=T0 + 50)], T0 + 2)  # a clock ahead: it arrived no later than now
        assert await store.next_session_due() == T0 + 12
        (due,) = await take(store, T0 + 12)
        assert (due.reason, len(due.turns)) == ("idle", 3)

    async def test_a_turn_that_arrived_idle_s_ago_is_due_when_noted(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1, arrived=T0 - 30)], T0)
        (due,) = await take(store, T0)
        assert (due.reason, due.revision) == ("idle", 1)

    async def test_the_end_marker_makes_it_due_at_once(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1)], T0)
        await store.note_turns([turn(2, ended=True)], T0 + 2)
        assert await store.next_session_due() == T0 + 2
        (due,) = await take(store, T0 + 2)
        assert (due.reason, due.partial, spans(due)) == ("ended", False, [turn(1).run.span_id, turn(2).run.span_id])

    async def test_max_age_caps_the_idle_timer_and_is_partial(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=rules(max_age_s=25.0))
        for offset in (0, 8, 16, 24):  # never idle for 10 s
            await store.note_turns([turn(offset + 1)], T0 + offset)
        assert await store.next_session_due() == T0 + 25
        assert await take(store, T0 + 24.9) == []
        (due,) = await take(store, T0 + 25)
        assert (due.reason, due.partial, len(due.turns)) == ("max_age", True, 4)

    async def test_max_turns_makes_it_due_at_once_and_partial(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=rules(max_turns=3))
        await store.note_turns([turn(1), turn(2)], T0)
        assert await store.next_session_due() == T0 + 10
        await store.note_turns([turn(3)], T0 + 1)
        (due,) = await take(store, T0 + 1)
        assert (due.reason, due.partial, len(due.turns)) == ("max_turns", True, 3)

    @WHOLE_MAX_OPEN
    async def test_max_open_forces_the_oldest_and_counts_it(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=rules(max_open=2))
        for n, name in enumerate(("a", "b", "c")):
            await store.note_turns([turn(n + 1, session=name)], T0 + n)
        (due,) = await take(store, T0 + 2)
        assert (due.session_id, due.reason, due.partial) == ("a", "forced", True)
        counts = await store.session_counts()
        assert counts["forced_total"] == 1 and counts["open"] == 3
        await store.note_turns([turn(4, session="b")], T0 + 3)  # b and c are within the bound
        assert (await store.session_counts())["forced_total"] == 1
        assert await take(store, T0 + 3) == []
        await store.sessions_scored([due], T0 + 3)
        await store.note_turns([turn(5, session="d")], T0 + 4)  # b, c, d: b is the oldest now
        (forced,) = await take(store, T0 + 4)
        assert (forced.session_id, forced.reason, len(forced.turns)) == ("b", "forced", 2)
        counts = await store.session_counts()
        assert (counts["forced_total"], counts["open"], counts["scored"]) == (2, 3, 1)

    @WHOLE_MAX_OPEN
    async def test_an_earlier_reason_holds_when_more_turns_come(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=rules(max_open=1))
        await store.note_turns([turn(1, ended=True)], T0)
        await store.note_turns([turn(2)], T0 + 1)  # the end marker still holds
        await store.note_turns([turn(3, session="b")], T0 + 2)  # c1 is forced out (it holds "ended")
        await store.note_turns([turn(4, session="b")], T0 + 3)
        assert await store.next_session_due() == T0
        taken = {d.session_id: d for d in await take(store, T0 + 3)}
        assert (taken["c1"].reason, len(taken["c1"].turns)) == ("ended", 2)
        await store.note_turns([turn(5, session="c")], T0 + 4)  # b is forced out now
        await store.note_turns([turn(6, session="b")], T0 + 5)  # and stays forced
        (forced,) = await take(store, T0 + 5)
        assert (forced.session_id, forced.reason, forced.partial) == ("b", "forced", True)

    @WHOLE_MAX_OPEN
    async def test_forcing_out_a_claimed_session_keeps_its_claim(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=rules(max_open=1))
        await store.note_turns([turn(1)], T0)
        (claimed,) = await take(store, T0 + 10, lease_s=60.0)
        await store.note_turns([turn(2)], T0 + 11)  # the next revision's turn
        await store.note_turns([turn(3, session="b")], T0 + 12)  # c1 (oldest) is forced out, claimed
        assert (await store.session_counts())["forced_total"] == 1
        assert [d.session_id for d in await take(store, T0 + 69)] == ["b"]  # idle since T0 + 12
        (again,) = await take(store, T0 + 70)
        assert (again.session_id, again.reason, again.revision) == ("c1", "forced", 1)

    async def test_next_session_due_is_the_earliest_timer(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        assert await store.next_session_due() is None
        await store.note_turns([turn(1, session="late")], T0 + 5)
        await store.note_turns([turn(2, session="early")], T0)
        assert await store.next_session_due() == T0 + 10
        await take(store, T0 + 10, lease_s=30.0)  # claimed: its timer is the lease now
        assert await store.next_session_due() == T0 + 15
        await take(store, T0 + 15, lease_s=30.0)
        assert await store.next_session_due() == T0 + 40


class TestTurns:
    async def test_a_turn_noted_twice_is_one_turn_the_newer_copy(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1, answer="first"), turn(2)], T0)
        await store.note_turns([turn(1, answer="second")], T0 + 1)
        (due,) = await take(store, T0 + 11)
        assert len(due.turns) == 2 and due.turns[0].output == ["second"]
        await store.sessions_scored([due], T0 + 11)
        await store.note_turns([turn(2, answer="again")], T0 + 12)  # a copy of a scored turn: no reopening
        assert await store.next_session_due() is None
        counts = await store.session_counts()
        assert (counts["reopened_total"], counts["capped_total"], counts["scored"]) == (0, 0, 1)

    async def test_turns_are_ordered_by_start_then_ids(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(3, start_ns=5), turn(1, start_ns=9), turn(2, start_ns=5, trace="0" * 32)], T0)
        await store.note_turns([turn(4, start_ns=1)], T0 + 1)
        (due,) = await take(store, T0 + 11)
        assert spans(due) == [f"{n:016x}" for n in (4, 2, 3, 1)]

    async def test_sessions_are_kept_apart(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1, session="x"), turn(2, session="y"), turn(3, session="x")], T0)
        taken = await take(store, T0 + 10)
        assert sorted((d.session_id, len(d.turns)) for d in taken) == [("x", 2), ("y", 1)]


class TestClaims:
    async def test_a_claim_holds_for_its_lease_then_runs_out(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1)], T0)
        (first,) = await take(store, T0 + 10, lease_s=20.0)
        assert await take(store, T0 + 29.9) == []
        (again,) = await take(store, T0 + 30)  # the claimer crashed: due again, same revision
        assert (again.scope, again.revision, spans(again)) == (first.scope, 1, spans(first))

    async def test_take_is_limited_and_earliest_first(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        for n in range(3):
            await store.note_turns([turn(n + 1, session=f"s{n}")], T0 + 2 - n)
        taken = await store.take_due_sessions(T0 + 20, 2, 60.0)
        assert [d.session_id for d in taken] == ["s2", "s1"]


class TestMinTurns:
    async def test_a_session_shorter_than_min_turns_is_closed_unscored_and_counted(
            self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=rules(min_turns=2))
        await store.note_turns([turn(1), turn(5, session="pair")], T0)
        await store.note_turns([turn(6, session="pair")], T0 + 1)
        taken = await take(store, T0 + 11)
        assert [(d.session_id, d.revision, len(d.turns)) for d in taken] == [("pair", 1, 2)]
        await store.sessions_scored(taken, T0 + 11)
        counts = await store.session_counts()
        assert (counts["short_total"], counts["scored_total"], counts["open"]) == (1, 1, 0)
        assert await store.next_session_due() is None and await take(store, T0 + 100) == []

    async def test_a_later_turn_of_a_short_session_gives_it_its_first_score(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=rules(min_turns=2))
        await store.note_turns([turn(1)], T0)
        assert await take(store, T0 + 10) == []  # closed short
        await store.note_turns([turn(2)], T0 + 50)  # remembered (retain_s): the session grows
        assert await store.next_session_due() == T0 + 60
        due = await score(store, T0 + 60)
        assert (due.revision, len(due.turns)) == (1, 2)  # its first score: no revision was used
        counts = await store.session_counts()
        assert (counts["short_total"], counts["scored_total"], counts["reopened_total"]) == (1, 1, 0)


class TestRevisions:
    async def test_a_revision_never_goes_back(self, make_store: StoreFactory) -> None:
        """A scheduler whose report of revision 1 arrives after revision 2 was scored (its claim ran
        out, another scheduler went on) changes nothing: the session stays at 2, closed or open,
        and its next score is revision 3."""
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1)], T0)
        first = await score(store, T0 + 10)
        await store.note_turns([turn(2)], T0 + 100)
        second = await score(store, T0 + 110)
        assert (first.revision, second.revision) == (1, 2)
        await store.sessions_scored([first], T0 + 120)  # late, and lower
        counts = await store.session_counts()
        assert (counts["open"], counts["scored"], counts["scored_total"]) == (0, 1, 2)
        await store.note_turns([turn(3)], T0 + 200)
        await store.sessions_scored([second], T0 + 201)  # late while reopened: it stays open
        assert await store.next_session_due() == T0 + 210
        third = await score(store, T0 + 210)
        assert (third.revision, len(third.turns)) == (3, 3)
        assert (await store.session_counts())["scored_total"] == 3


    async def test_late_turns_reopen_up_to_max_revisions_then_are_capped(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)  # max_revisions=3
        await store.note_turns([turn(1)], T0)
        assert (await score(store, T0 + 10)).revision == 1
        for revision in (2, 3):
            now = T0 + 100 * revision
            await store.note_turns([turn(revision)], now)
            assert await store.next_session_due() == now + 10
            due = await score(store, now + 10)
            assert (due.revision, len(due.turns)) == (revision, revision)
        await store.note_turns([turn(4)], T0 + 400)  # a fourth score would pass max_revisions
        assert await store.next_session_due() is None and await take(store, T0 + 500) == []
        counts = await store.session_counts()
        assert (counts["scored_total"], counts["reopened_total"], counts["capped_total"]) == (3, 2, 1)
        assert (counts["open"], counts["scored"]) == (0, 1)

    async def test_a_turn_noted_during_the_claim_keeps_it_open(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1)], T0)
        (due,) = await take(store, T0 + 10)
        await store.note_turns([turn(2)], T0 + 11)
        await store.sessions_scored([due], T0 + 12)
        counts = await store.session_counts()
        assert (counts["open"], counts["scored_total"], counts["reopened_total"]) == (1, 1, 1)
        assert await store.next_session_due() == T0 + 21
        (next_due,) = await take(store, T0 + 21)
        assert (next_due.revision, len(next_due.turns)) == (2, 2)
        await store.sessions_scored([next_due], T0 + 21)
        await store.sessions_scored([due], T0 + 22)  # a stale claim's report changes nothing
        assert (await store.session_counts())["scored_total"] == 2 and await store.next_session_due() is None

    async def test_a_turn_during_the_last_revisions_claim_is_capped(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=rules(max_revisions=1))
        await store.note_turns([turn(1)], T0)
        (due,) = await take(store, T0 + 10)
        await store.note_turns([turn(2)], T0 + 11)
        await store.sessions_scored([due], T0 + 12)
        counts = await store.session_counts()
        assert (counts["open"], counts["scored"], counts["capped_total"], counts["reopened_total"]) == (0, 1, 1, 0)
        assert await store.next_session_due() is None and await take(store, T0 + 100) == []

    async def test_a_scored_session_is_forgotten_after_retain_s(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)  # retain_s=500
        await store.note_turns([turn(1)], T0)
        await score(store, T0 + 10)
        await store.note_turns([turn(1, session="other")], T0 + 499)  # cleanup runs: c1 not yet
        assert (await store.session_counts())["scored"] == 1
        await take(store, T0 + 500)  # forgotten at its last turn + retain_s
        assert (await store.session_counts())["scored"] == 0
        await store.note_turns([turn(2)], T0 + 501)  # a new session now, not a reopening
        taken = {d.session_id: d for d in await take(store, T0 + 511)}
        assert (taken["c1"].revision, len(taken["c1"].turns), taken["other"].revision) == (1, 1, 1)
        assert (await store.session_counts())["reopened_total"] == 0


async def _reopen(store: Any) -> Any:
    await store.shutdown()
    if isinstance(store, SqliteStore):
        again: Any = SqliteStore(store.test_path, session_rules=RULES)
    else:
        partitions = len(store.partitions) if isinstance(store, PartitionedRedisStore) else 1
        again = open_redis_store(store.test_url, partitions=partitions, key_prefix=store.keys.prefix, block_ms=0,
                                 session_rules=RULES)
        again.test_url = store.test_url
    await again.start()
    return again


class TestDurable:
    async def test_sessions_survive_a_restart(self, make_store: StoreFactory) -> None:
        store = await make_store(session_rules=RULES)
        await store.note_turns([turn(1, session="done")], T0)
        await score(store, T0 + 10)
        await store.note_turns([turn(2), turn(3, session="claimed")], T0 + 20)
        await take(store, T0 + 30, lease_s=60.0)  # both claimed, then the process goes away
        again = await _reopen(store)
        try:
            assert await again.next_session_due() == T0 + 90
            assert await take(again, T0 + 89) == []
            back = await take(again, T0 + 90)
            assert sorted((d.session_id, d.revision) for d in back) == [("c1", 1), ("claimed", 1)]
            await again.note_turns([turn(4, session="done")], T0 + 91)  # still remembered: reopens
            assert (await score(again, T0 + 101)).revision == 2
        finally:
            if isinstance(again, SqliteStore):
                await again.shutdown()
            else:
                await again.delete_all()
                await again.shutdown()
