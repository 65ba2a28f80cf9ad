"""`LabelStore` on every store (SPEC §11): labels (newest per annotator wins, every annotator
kept), pull cursors and the pull lease, kept scores (replaced per series and item, trimmed per
scorer and by age, scanned oldest first in bounded batches), what few-shot judges were shown
(one per scorer and item, newest wins, trimmed per scorer and by age, found by run, trace or session). "Another instance" is what
another replica (Redis) or ``tracescore labels`` beside the daemon (SQLite) has: the store
`open_label_store` opens from a configuration naming the same store. Redis's Lua scripts run
on the real server, and on a real Cluster (every key of a script in one slot)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from test_judge_ledger_contract import config_of

from collector.commands.label_store import open_label_store
from collector.common.few_shot import Shown
from collector.common.labels import KeptScore, Label
from collector.store.kept_rows import member
from collector.store.labels_interface import LabelStore, LabelStoreAdmin

StoreFactory = Callable[..., Awaitable[Any]]
T0 = 1_700_000_000.0
TRACE = "ab" * 16


@pytest.fixture
async def beside() -> AsyncIterator[Callable[[Any], LabelStoreAdmin]]:
    """``beside(store)``: the store's labels opened as another instance (closed at the end)."""
    opened: list[LabelStoreAdmin] = []

    def open_for(store: Any) -> LabelStoreAdmin:
        opened.append(open_label_store(config_of(store)))
        return opened[-1]

    yield open_for
    for admin in opened:
        await admin.close()


def label(name: str, span: str | None, value: Any, annotator: str, at: float, *, source: str = "phoenix",
          session: str | None = None) -> Label:
    return Label(name, TRACE, span, session, value, source, annotator=annotator, rationale=f"{annotator} says so",
                 at=at, source_id=f"{annotator}-{at}")


def kept(scorer: str, n: int, at: float, *, score: float = 0.5, revision: str = "3f2a9c1e") -> KeptScore:
    return KeptScore(scorer, scorer.title(), "1", revision, f"{n:032x}", f"{n:016x}", None, score,
                     "pass" if score >= 0.5 else "fail", round(at, 3))


async def scanned(store: LabelStore, since: float = 0.0, batch: int = 10_000) -> list[list[KeptScore]]:
    return [got async for got in store.scan_kept_scores(since, batch)]


async def test_the_newest_label_of_each_annotator_wins_and_every_instance_sees_one_set(
        make_store: StoreFactory, beside: Callable[[Any], LabelStoreAdmin]) -> None:
    store = await make_store()
    ana = label("q", "cd" * 8, True, "ana", T0 + 5)
    bob = label("q", "cd" * 8, False, "bob", T0 + 4)  # another annotator of the same item: kept too
    conversation = label("r", None, "good", "ana", T0 + 3, source="file", session="chat-7")
    older = replace(ana, value=False, at=T0 + 1)  # older than ana's kept label: ignored
    assert await store.put_labels([ana, bob, conversation, older]) == 3
    assert await store.put_labels([ana, bob, conversation]) == 0  # a second pull adds nothing
    assert await store.labels() == [ana, bob, conversation]  # newest first
    assert await store.labels("q") == [ana, bob] and await store.labels("nobody") == []
    newer = replace(ana, value=False, rationale="changed her mind", at=T0 + 9)
    same_time = replace(bob, value=True)  # as new as the kept one, and different: it replaces it
    assert await store.put_labels([newer, same_time, older]) == 2
    assert await store.labels("q") == [newer, same_time]
    assert await store.label_counts() == {("q", "phoenix"): 2, ("r", "file"): 1}

    other = beside(store)  # another replica, or a command beside the daemon
    assert await other.labels() == [newer, same_time, conversation]
    assert await other.put_labels([replace(conversation, value="bad", at=T0 + 20)]) == 1
    assert (await store.labels("r"))[0].value == "bad"
    assert await store.label_cursor("phoenix") is None
    await store.set_label_cursor("phoenix", "2026-12-05T10:00:00Z")
    await other.set_label_cursor("mlflow", "page-7")
    await store.set_label_cursor("phoenix", "2026-12-05T11:00:00Z")  # a later pull moves it on
    assert [await other.label_cursor(s) for s in ("phoenix", "mlflow", "langfuse")] == [
        "2026-12-05T11:00:00Z", "page-7", None]
    assert await store.label_cursor("mlflow") == "page-7"


async def test_one_holder_has_the_pull_lease_until_it_lets_go_or_it_runs_out(
        make_store: StoreFactory, beside: Callable[[Any], LabelStoreAdmin]) -> None:
    store = await make_store()
    other = beside(store)
    assert await store.take_label_lease("a", 30.0)
    assert not await store.take_label_lease("b", 30.0)
    assert not await other.take_label_lease("b", 30.0)  # the lease is the deployment's
    assert await other.take_label_lease("a", 30.0)  # renewed by its holder, from anywhere
    await store.release_label_lease("b")  # not b's: nothing happens
    assert not await store.take_label_lease("b", 30.0)
    await other.release_label_lease("a")
    assert await store.take_label_lease("b", 0.2)  # free once released
    deadline = time.monotonic() + 5.0
    while not await other.take_label_lease("a", 30.0):  # free once b's 0.2 s ran out
        assert time.monotonic() < deadline, "the expired lease was never free"
        await asyncio.sleep(0.05)
    assert not await store.take_label_lease("b", 30.0)


async def test_kept_scores_are_replaced_per_series_and_item_and_bounded_per_scorer_and_by_age(
        make_store: StoreFactory) -> None:
    store = await make_store()
    keep = {"max_per_scorer": 4, "retain_s": 500.0}
    q = [kept("q", n, T0 + n) for n in range(4)]
    odd = [KeptScore("r", "Réponse", "2", "", "", None, "chat-7", 0.25, None, T0 + 0.5),  # a conversation
           KeptScore("r", "Réponse", "2", "", "AB" * 16, "span-not-hex", None, 1.0, "très bien", T0 + 1.5),
           KeptScore("r", "Réponse", "2", "", TRACE, None, None, 0.75, "x" * 300, T0 + 2.5)]  # a whole trace
    await store.keep_scores(q + odd, **keep)
    assert await store.kept_score_count() == 7
    assert await scanned(store) == [[q[0], odd[0], q[1], odd[1], q[2], odd[2], q[3]]]  # oldest first, read back whole

    again = kept("q", 1, T0 + 10, score=0.1)  # the same series and item scored again: it replaces q[1]
    revised = kept("q", 2, T0 + 11, revision="0badf00d")  # the same item in a new series: kept beside it
    await store.keep_scores([again, revised], **keep)  # q holds 5: its oldest goes
    assert [s for [got] in [await scanned(store)] for s in got if s.scorer_id == "q"] == [q[2], q[3], again, revised]
    assert await store.kept_score_count() == 7

    await store.keep_scores([kept("q", 9, T0 + 12)] * 2, max_per_scorer=2, retain_s=500.0)  # the same twice: once
    assert [s.at for s in (await scanned(store))[0] if s.scorer_id == "q"] == [T0 + 11, T0 + 12]
    late = kept("z", 1, T0 + 511.5)  # every scorer's scores older than 500 s before it go, r's too
    await store.keep_scores([late], **keep)
    assert await scanned(store) == [[kept("q", 9, T0 + 12), late]]
    assert await store.kept_score_count() == 2
    await store.keep_scores([kept("z", 2, T0 + 2000)], **keep)  # nothing of q and r is left
    assert [s.scorer_id for [got] in [await scanned(store)] for s in got] == ["z"]
    assert await store.kept_score_count() == 1


async def test_every_kept_score_is_scanned_oldest_first_in_bounded_batches_from_any_instance(
        make_store: StoreFactory, beside: Callable[[Any], LabelStoreAdmin]) -> None:
    store = await make_store()
    scores = [kept("a" if 1_000 <= n < 1_150 else "abc"[n % 3], n, T0 + (n // 7 if n < 1_000 or n >= 1_150 else 150) * 0.001,
                   score=(n % 10) / 10) for n in range(2_500)]  # 7 scores a millisecond; 150 of a at one time
    random.Random(7).shuffle(scores)  # workers settle out of order
    for first in range(0, len(scores), 500):  # as workers keep them, batch by batch
        await store.keep_scores(scores[first:first + 500], max_per_scorer=10_000, retain_s=1e9)
    again = [replace(s, score=1 - s.score, at=round(s.at + (0.5 if n % 2 else -0.2), 3)) for n, s in enumerate(scores[:300])]
    await store.keep_scores(again, max_per_scorer=10_000, retain_s=1e9)  # scored again: later, or earlier
    scores[:300] = again
    in_order = sorted(scores, key=lambda s: (s.at, member(s), s.scorer_id))  # ties: by member, then scorer
    batches = await scanned(store, batch=300)
    assert [len(got) for got in batches] == [300] * 8 + [100]
    assert [s for got in batches for s in got] == in_order
    since = in_order[1_000].at  # several scores share each time: the first of them is at or after it too
    later = [s for s in in_order if s.at >= since]
    assert len(later) == 1_500 + [s.at for s in in_order[:1_000]].count(since)
    assert [s for got in await scanned(store, since, batch=1_000) for s in got] == later

    other = beside(store)
    assert await other.kept_score_count() == await store.kept_score_count() == 2_500
    from_other = await scanned(other, since, batch=64)
    assert [s for got in from_other for s in got] == later
    assert {len(got) for got in from_other[:-1]} == {64} and 0 < len(from_other[-1]) <= 64
    await other.keep_scores([kept("b", 5_000, T0 + 9)], max_per_scorer=600, retain_s=1e9)  # b's oldest go, from anywhere
    kept_b = [s for got in await scanned(store) for s in got if s.scorer_id == "b"]
    assert kept_b == [s for s in in_order if s.scorer_id == "b"][-599:] + [kept("b", 5_000, T0 + 9)]


async def test_what_judges_were_shown_is_kept_per_item_bounded_and_found_by_span_trace_or_session(
        make_store: StoreFactory, beside: Callable[[Any], LabelStoreAdmin]) -> None:
    store = await make_store()
    keep = {"max_per_scorer": 3, "retain_s": 500.0}

    def shown(scorer: str, n: int, at: float, text: str, *, trace: str = TRACE, session: str | None = None) -> Shown:
        return Shown(scorer, trace, None if session else f"{n:016x}", session, text, T0 + at)

    span = [f"span:{n:016x}" for n in range(5)]
    other = "cd" * 16
    await store.keep_shown([shown("q", 0, 0, "zero"), shown("q", 1, 1, "one « é »\n" + "x" * 3_990),
                            shown("q", 2, 2, "two", trace=other), shown("r", 0, 5, "chat", session="chat-7")], **keep)
    await store.keep_shown([shown("q", 1, 0.5, "older: ignored"), shown("q", 0, 3, "zero again")], **keep)
    assert await store.shown("q", [*span[:3], f"trace:{TRACE}", f"trace:{other}", "trace:" + "ef" * 16]) == {
        span[0]: "zero again", span[1]: "one « é »\n" + "x" * 3_990, span[2]: "two",
        f"trace:{TRACE}": "zero again", f"trace:{other}": "two"}  # a trace: its newest run's
    assert await store.shown("r", ["session:chat-7", span[0]]) == {"session:chat-7": "chat"}
    await store.keep_shown([shown("q", 3, 4, "three"), shown("q", 4, 6, "four", trace=other)], **keep)  # q holds 3
    other_instance = beside(store)
    assert await other_instance.shown("q", [*span, f"trace:{TRACE}", f"trace:{other}"]) == {
        span[0]: "zero again", span[3]: "three", span[4]: "four", f"trace:{TRACE}": "three", f"trace:{other}": "four"}
    await other_instance.keep_shown([shown("z", 0, 506.5, "late")], **keep)  # older than 500 s before it: gone
    assert await store.shown("q", [*span, f"trace:{TRACE}"]) == {}
    assert await store.shown("r", ["session:chat-7"]) == {} and await store.shown("z", [span[0]]) == {span[0]: "late"}
