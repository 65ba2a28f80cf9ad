"""`tracescore dead-letters` on both stores: what a dead letter keeps, replay under the same
key (scored once), purge; through `DeadLetterAdmin`, a second connection beside the store
as the command has beside a running daemon."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from test_queue_contract import StoreFactory, job, record, take_until

from collector.common.types import Dead, Done
from collector.store.interface import DeadLetterAdmin
from collector.store.redis.conn import connect
from collector.store.redis.dead_letters import RedisDeadLetters
from collector.store.redis.partitioned import PartitionedRedisStore
from collector.store.redis.partitioned_admin import PartitionedDeadLetters
from collector.store.redis.store import RedisStore
from collector.store.sqlite.dead_letters import SqliteDeadLetters

TRACEBACK = 'Traceback (most recent call last):\n  File "s.py", line 3, in score\nZeroDivisionError: division by zero\n'


def admin_for(store: Any) -> DeadLetterAdmin:
    if isinstance(store, PartitionedRedisStore):
        return PartitionedDeadLetters(connect(store.test_url), store.keys.configured, len(store.partitions),
                                      idempotency_ttl_s=3600)
    if isinstance(store, RedisStore):
        return RedisDeadLetters(connect(store.test_url), store.keys, idempotency_ttl_s=3600)
    return SqliteDeadLetters(store.test_path)


async def dead_letter_one(store: Any, n: int = 1) -> None:
    j = job(n)
    await store.put([j])
    (leased,) = await take_until(store)
    failure = replace(record(j), score=None, error_type="ZeroDivisionError")
    await store.settle(leased, Dead("ScorerRunError", "Scorer Run Failed: division by zero", failure,
                                    traceback=TRACEBACK, partial_json='{"preprocess_step_result": {"n": 2}}'))


class TestDeadLetterContract:
    async def test_a_dead_letter_keeps_traceback_and_partial_result(self, make_store: StoreFactory) -> None:
        store = await make_store()
        await dead_letter_one(store)
        admin = admin_for(store)
        try:
            (letter,) = await admin.letters()
        finally:
            await admin.close()
        assert letter.job == job(1)
        assert letter.traceback == TRACEBACK and letter.partial == {"preprocess_step_result": {"n": 2}}
        assert set(letter.row()) == {"id", "scorer", "trace_id", "span_id", "error", "failed_at"}
        assert letter.row()["error"] == "ScorerRunError: Scorer Run Failed: division by zero"

    async def test_replay_queues_the_same_key_once_and_its_result_is_kept(self, make_store: StoreFactory) -> None:
        store = await make_store()
        await dead_letter_one(store)
        assert await store.put([job(1)]) == [False]  # dead: never queued again by traffic
        admin = admin_for(store)
        try:
            (letter,) = await admin.letters()
            assert await admin.replay([letter.id, "999"]) == [letter.id]
            assert await admin.letters() == []
            assert await admin.replay([letter.id]) == []  # a second replay finds nothing
        finally:
            await admin.close()
        assert await store.put([job(1)]) == [False]  # queued again: still one job for the key
        (leased,) = await take_until(store)
        assert leased.job.key == job(1).key and leased.attempt == 1
        # The replayed job names the failure span its outcome replaces (the letter kept its id).
        assert letter.evaluation_span_id == record(job(1)).score_span_id
        assert leased.job.supersedes == letter.evaluation_span_id
        success = record(job(1))
        await store.settle(leased, Done(success))
        scores = [i.record for i in await store.pending(10) if i.record.error_type is None]
        assert [r.key for r in scores] == [job(1).key]
        assert await store.put([job(1)]) == [False]  # done again

    async def test_replay_all_and_purge(self, make_store: StoreFactory) -> None:
        store = await make_store()
        for n in (1, 2, 3):
            await dead_letter_one(store, n)
        admin = admin_for(store)
        try:
            first, second, third = await admin.letters()
            assert await admin.purge([first.id]) == 1
            assert [x.id for x in await admin.letters()] == [second.id, third.id]
            assert sorted(await admin.replay(None)) == sorted([second.id, third.id])
            assert await admin.purge(None) == 0
        finally:
            await admin.close()
        taken = await take_until(store, want=2)
        assert sorted(t.job.key for t in taken) == sorted([job(2).key, job(3).key])
        assert await store.put([job(1)]) == [False]  # purged: its key stays done
