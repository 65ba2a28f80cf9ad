"""One contract, two backends: a job's judge replies are kept until it settles done or dead,
and a job handed back (Retry) finds them again when it is taken again."""

from __future__ import annotations

from typing import Any

from test_queue_contract import StoreFactory, job, record, take_until

from collector.common.types import Dead, Done, Retry


async def test_replies_survive_a_hand_back_and_leave_with_the_job(make_store: StoreFactory) -> None:
    store: Any = await make_store()
    j = job(1)
    await store.put([j])
    (leased,) = await take_until(store)
    assert await store.judge_replies(j.key) == {}
    await store.keep_judge_reply(j.key, "abc:0", '{"text": "{\\"relevant\\": true}"}')
    await store.keep_judge_reply(j.key, "abc:0", '{"text": "again"}')  # a request key holds one reply
    await store.keep_judge_reply(j.key, "def:0", '{"text": "two"}')
    await store.settle(leased, Retry(0.0, "worker shut down"))
    (again,) = await take_until(store)
    assert await store.judge_replies(j.key) == {"abc:0": '{"text": "again"}', "def:0": '{"text": "two"}'}
    await store.settle(again, Done(record(j)))
    assert await store.judge_replies(j.key) == {}


async def test_a_dead_job_leaves_no_replies_and_others_keep_theirs(make_store: StoreFactory) -> None:
    store: Any = await make_store()
    dead, other = job(1), job(2)
    await store.put([dead, other])
    leased = await take_until(store, 2)
    for j in (dead, other):
        await store.keep_judge_reply(j.key, "k:0", '{"text": "x"}')
    by_key = {lj.job.key: lj for lj in leased}
    await store.settle(by_key[dead.key], Dead("ScorerRunError", "boom", None))
    assert await store.judge_replies(dead.key) == {}
    assert await store.judge_replies(other.key) == {"k:0": '{"text": "x"}'}
