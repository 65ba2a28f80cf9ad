"""Redis-only behaviour of the store: shared decision timer, claims, outages, key isolation."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from repo_paths import INTEGRATION
from shared_redis import REDIS_URL

from collector.common.aio import cancel_and_wait
from collector.common.errors import ConfigError, Unavailable
from collector.common.session_types import SessionTurn
from collector.common.types import Done, RunRecord, ScoreJob, ScoreRecord, TraceChunk
from collector.store.redis.pinned import NotReplicated
from collector.store.redis.store import RedisStore

T1 = b"\x01" * 16


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}:"
    yield name
    cleaner = RedisStore(REDIS_URL, key_prefix=name)
    await cleaner.delete_all()
    await cleaner.shutdown()


async def _open(prefix: str, **options: object) -> RedisStore:
    store = RedisStore(REDIS_URL, key_prefix=prefix, block_ms=0, **options)  # type: ignore[arg-type]
    await store.client.ping()  # fail loudly when Redis is missing
    await store.start()
    return store


async def test_two_receivers_share_one_trace_and_one_timer(prefix: str) -> None:
    a, b = await _open(prefix, decision_wait=5.0), await _open(prefix, decision_wait=5.0)
    try:
        await a.append([TraceChunk(T1, "spans", b"child", 1, True)], now=100.0)
        await b.append([TraceChunk(T1, "spans", b"root", 1, False, has_root=True)], now=101.0)
        # Both receivers race for the due trace: exactly one claims it.
        claims = await asyncio.gather(a.due(10, now=106.0), b.due(10, now=106.0))
        assert sorted(len(ids) for ids, _ in claims) == [0, 1]
        assert [c.data for c in await b.load(T1)] == [b"child", b"root"]
        # A run span arriving during the decision gets a decision of its own.
        await b.append([TraceChunk(T1, "spans", b"late run", 1, True)], now=106.5)
        await a.finish(T1)
        assert (await a.due(10, now=111.4))[0] == []
        assert (await b.due(10, now=111.5))[0] == [T1]
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_a_claim_that_is_never_finished_runs_out(prefix: str) -> None:
    """The decision timer survives the receiver that claimed the trace (a crash mid-decision)."""
    crashed = await _open(prefix, decision_wait=1.0)
    await crashed.append([TraceChunk(T1, "spans", b"run", 1, True, has_root=True)], now=0.0)
    assert (await crashed.due(10, now=1.0))[0] == [T1]
    await crashed.shutdown()  # never finished
    other = await _open(prefix, decision_wait=1.0)
    try:
        assert (await other.due(10, now=2.0))[0] == []  # still claimed
        assert (await other.due(10, now=31.5))[0] == [T1]
    finally:
        await other.shutdown()


async def test_unreachable_redis_refuses_retryably_and_components_keep_running(prefix: str) -> None:
    store = RedisStore("redis://127.0.0.1:1/0", key_prefix=prefix, block_ms=0)
    await store.start()  # not fatal
    try:
        with pytest.raises(Unavailable):
            await store.append([TraceChunk(T1, "spans", b"x", 1, True)])
        assert await store.take(5) == []
        assert await store.due(5) == ([], 0)
        assert await store.pending(5) == []
    finally:
        await store.shutdown()


async def test_deployments_with_other_prefixes_do_not_see_each_other(prefix: str) -> None:
    other_prefix = f"test-{uuid.uuid4().hex[:12]}:"
    mine, other = await _open(prefix), await _open(other_prefix)
    try:
        job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")
        assert await mine.put([job]) == [True]
        assert await other.put([job]) == [True]
        (leased,) = await mine.take(5)
        record = ScoreRecord(job.key, "ab" * 16, "cd" * 8, "ef" * 8, "q", "q", score=1.0)
        await mine.settle(leased, Done(record))
        assert await other.pending(5) == [] and len(await mine.pending(5)) == 1
        assert await mine.refresh() == 1 and await other.refresh() == 1
    finally:
        await other.delete_all()
        await mine.shutdown()
        await other.shutdown()


async def test_idle_consumers_without_jobs_are_pruned_and_busy_ones_kept(prefix: str) -> None:
    from collector.store.redis.queue import RedisJobQueue

    store = await _open(prefix)
    try:
        gone = RedisJobQueue(store.client, store.keys, block_ms=0, consumer="gone", consumer_idle_s=0.0)
        busy = RedisJobQueue(store.client, store.keys, block_ms=0, consumer="busy", consumer_idle_s=0.0)
        jobs = [ScoreJob(RunRecord(trace_id="ab" * 16, span_id=f"{i:016x}"), "q", "1") for i in range(2)]
        await store.put(jobs)
        (first,) = await gone.take(1)
        await gone.settle(first, Done(None))  # a worker that finished and then vanished
        (held,) = await busy.take(1)  # a worker holding a job
        assert await busy.prune_consumers() == 1
        names = {c["name"] for c in await store.client.xinfo_consumers(store.keys.jobs, "workers")}
        assert names == {b"busy"}
        await busy.settle(held, Done(None))
    finally:
        await store.shutdown()


async def test_a_loop_of_redis_calls_always_stops(prefix: str) -> None:
    """redis-py awaits 3.11's `wait_for` around socket writes, which can swallow a cancellation;
    the daemon stops its Redis loops with `cancel_and_wait`, which cancels again until they end.
    (A CI run hung in shutdown on the store's depth refresher before this.)"""
    store = await _open(prefix)
    try:
        async def busy() -> None:
            while True:
                await store.refresh()

        for turn in range(40):
            task = asyncio.create_task(busy())
            await asyncio.sleep(0.001 * (turn % 4))
            # Bounded by the client's socket timeout (10 s): a cancellation that lands mid-write can
            # leave a command half sent, and the swallowed-cancel read then waits for the server.
            assert await cancel_and_wait([task], timeout=15.0) == set(), f"turn {turn}"
            assert task.cancelled()
    finally:
        async with asyncio.timeout(10):
            await store.shutdown()


async def _refused_at_start(url: str, prefix: str, refusal: str) -> None:
    store = RedisStore(url, key_prefix=prefix)
    try:
        with pytest.raises(ConfigError, match=f"queue.url: Redis refused: .*{refusal}"):
            await store.start()
    finally:
        await store.shutdown()


async def test_a_database_redis_does_not_have_fails_at_start(prefix: str) -> None:
    """It will not get better by retrying (as an outage would): the start fails, naming queue.url."""
    await _refused_at_start(REDIS_URL.rsplit("/", 1)[0] + "/999", prefix, "DB index is out of range")


@pytest.fixture
def redis_with_password(tmp_path: Path) -> Iterator[str]:
    """A private redis-server on a free loopback port that requires the password "right"."""
    import socket
    import subprocess
    import time

    from ports import hold_port  # tests/support

    holder = hold_port()  # held until redis-server listens on it (it binds with SO_REUSEADDR)
    port = holder.getsockname()[1]
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--requirepass",
                               "right", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        holder.close()
        server.terminate()
        server.wait(30)


async def test_credentials_redis_refuses_fail_at_start(redis_with_password: str) -> None:
    wrong = redis_with_password.replace("redis://", "redis://:wrong@", 1)
    await _refused_at_start(wrong, "t:", "invalid username-password")
    await _refused_at_start(redis_with_password, "t:", "Authentication required")


def test_serve_exits_2_when_redis_refuses_the_url(tmp_path: Path) -> None:
    import subprocess
    import sys

    scorer = INTEGRATION / "scorers_for_tests.py"
    env = {**os.environ, "TRACESCORE_QUEUE_URL": REDIS_URL.rsplit("/", 1)[0] + "/999",
           "TRACESCORE_RECEIVER_GRPC_ENDPOINT": "127.0.0.1:0", "TRACESCORE_RECEIVER_HTTP_ENDPOINT": "127.0.0.1:0",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([str(Path(sys.executable).parent / "tracescore"), "serve", "--scorer",
                           f"{scorer}:answer_length"], capture_output=True, text=True, timeout=60,
                          check=False, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "queue.url: Redis refused" in proc.stderr and "Traceback" not in proc.stderr


async def test_keys_under_the_untagged_names_of_earlier_versions_are_renamed_at_start(prefix: str) -> None:
    """An upgrade keeps queued jobs, leases, idempotency keys and buffered traces (SPEC §9)."""
    old = await _open(prefix)
    jobs = [ScoreJob(RunRecord(trace_id=f"{n:032x}", span_id="cd" * 8), "q", "1") for n in range(3)]
    await old.put(jobs)
    leased = await old.take(1)
    await old.append([TraceChunk(T1, "spans", b"run", 1, True, True)], now=time.time())
    await old.shutdown()
    tagged = old.keys.prefix
    raw = aioredis.Redis.from_url(REDIS_URL)
    names = [k.decode() async for k in raw.scan_iter(match="[{]" + prefix.rstrip(":") + "}:*")]
    for name in names:  # the layout an earlier version wrote: no hash tag
        await raw.rename(name, prefix + name[len(tagged):])
    assert not await raw.exists(old.keys.jobs)
    upgraded = await _open(prefix)
    try:
        assert await upgraded.put(jobs) == [False] * 3  # idempotency keys kept
        assert len(await upgraded.take(10)) == 2  # the third is still leased to the old consumer
        assert [c.data for c in await upgraded.load(T1)] == [b"run"]
        await upgraded.settle(leased[0], Done(None))  # the old lease still holds: pending entries moved
        assert (await upgraded.stats()).in_flight == 2
        assert [k async for k in raw.scan_iter(match=prefix.replace("[", "\\[") + "*")] == []
    finally:
        await upgraded.shutdown()
        await raw.aclose()


async def test_an_append_no_replica_acknowledged_is_refused_retryably(prefix: str) -> None:
    """``wait_replicas``: the shared test Redis has no replica, so WAIT answers 0 after its timeout."""
    alone = await _open(prefix, wait_replicas=1, wait_timeout_ms=50)
    try:
        assert (await alone.client.info("replication"))["connected_slaves"] == 0
        with pytest.raises(Unavailable, match="0 of 1 Redis replicas acknowledged"):
            await alone.append([TraceChunk(T1, "spans", b"run", 1, True, True)], now=time.time())
        assert [c.data for c in await alone.load(T1)] == [b"run"]  # written, not acknowledged: resent, absorbed
    finally:
        await alone.shutdown()


async def test_jobs_and_turns_no_replica_acknowledged_are_refused_as_an_append_is(prefix: str) -> None:
    """A decision's writes wait for the replicas as the request's append did: a trace is marked
    decided after them, and a failover between writes the replicas never got and that mark would
    keep the mark (on the new primary) and lose the jobs or turns."""
    alone = await _open(prefix, wait_replicas=1, wait_timeout_ms=50)
    alone.replicated.within_s = 0.2  # sent again (idempotent) for 0.2 s, then the caller is told
    run = RunRecord(trace_id=T1.hex(), span_id="cd" * 8, service="bot", session_id="c1")
    try:
        with pytest.raises(NotReplicated, match="0 of 1 Redis replicas acknowledged the queued jobs"):
            await alone.put([ScoreJob(run, "quality", "1")])
        assert await alone.client.xlen(alone.keys.jobs) == 1  # written once, sent again as a duplicate
        with pytest.raises(NotReplicated, match="0 of 1 Redis replicas acknowledged the session turns"):
            await alone.note_turns([SessionTurn("bot/c1", "c1", run, False)], time.time())
    finally:
        await alone.delete_all()
        await alone.shutdown()


async def test_wait_replicas_on_a_redis_that_refuses_wait_does_not_start(tmp_path: Path) -> None:
    """Managed services may not offer ``WAIT``: with ``wait_replicas`` every request would fail,
    so the store refuses to start, naming the setting."""
    from redis_topology import Node  # tests/support: a redis-server of our own, WAIT renamed away

    node = Node(tmp_path, "no-wait", "--rename-command", "WAIT", "").start()
    store = RedisStore(f"redis://127.0.0.1:{node.port}/0", key_prefix="t:", wait_replicas=1)
    try:
        with pytest.raises(ConfigError, match=r"queue.wait_replicas: this Redis refuses WAIT \(.*unknown command"):
            await store.start()
        zero = RedisStore(f"redis://127.0.0.1:{node.port}/0", key_prefix="t:")
        await zero.start()  # without wait_replicas WAIT is never sent
        await zero.append([TraceChunk(T1, "spans", b"run", 1, True, True)], now=time.time())
        await zero.shutdown()
    finally:
        await store.shutdown()
        node.stop()


async def test_a_record_settled_here_is_claimed_as_it_was_made_and_elsewhere_parsed_equal(prefix: str) -> None:
    """The worker's own records reach its exporter without a JSON round trip; another replica
    claiming the same text (here once the first claim runs out) parses an equal record."""
    mine, other = await _open(prefix, export_lease_s=0.2), await _open(prefix)
    try:
        job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")
        await mine.put([job])
        (leased,) = await mine.take(5)
        record = ScoreRecord(job.key, "ab" * 16, "cd" * 8, "ef" * 8, "q", "q", score=0.25, reason="é ✓",
                             resource={"service.name": "bot"}, session=None)
        await mine.settle(leased, Done(record))
        (claimed,) = await mine.pending(5)
        assert claimed.record is record  # as it was made: not parsed
        assert mine.queue.recent is not None and len(mine.queue.recent) == 0  # forgotten once claimed
        await asyncio.sleep(0.3)  # the claim runs out unreleased: another replica exports it
        (again,) = await other.pending(5)
        assert again.record == record and again.record is not record
    finally:
        await mine.shutdown()
        await other.shutdown()


async def test_a_client_with_another_text_encoding_parses_every_record(prefix: str) -> None:
    """Records are remembered by the UTF-8 bytes written; a URL asking for another encoding
    writes other bytes, so its store remembers none and parses what it claims."""
    store = RedisStore(f"{REDIS_URL}?encoding=latin-1", key_prefix=prefix, block_ms=0)
    await store.start()
    try:
        assert store.queue.recent is None and store.outbox.recent is None
        job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")
        await store.put([job])
        (leased,) = await store.take(5)
        record = ScoreRecord(job.key, "ab" * 16, "cd" * 8, "ef" * 8, "q", "q", score=1.0, reason="plain")
        await store.settle(leased, Done(record))
        (claimed,) = await store.pending(5)
        assert claimed.record == record and claimed.record is not record
    finally:
        await store.shutdown()


async def test_a_settle_whose_caller_is_cancelled_still_completes_and_is_counted(prefix: str) -> None:
    """A worker cancelled while its settle waits for the batch (shutdown) still settles the job:
    the script runs, and the queue's depth counts the job gone (not left to the next refresh)."""
    store = await _open(prefix, refresh_s=3600.0)
    try:
        job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")
        await store.put([job])
        (leased,) = await store.take(5)
        assert store.depth() == 1
        settling = asyncio.create_task(store.settle(leased, Done(None)))
        await asyncio.sleep(0)  # queued for this loop turn's batch
        settling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await settling
        deadline = time.monotonic() + 5.0
        while store.depth() != 0:
            assert time.monotonic() < deadline, "the settle never completed"
            await asyncio.sleep(0.01)
        assert await store.client.xlen(store.keys.jobs) == 0
    finally:
        await store.shutdown()


async def test_a_record_whose_json_reads_back_otherwise_is_parsed_from_what_redis_holds(prefix: str) -> None:
    """JSON has no NaN: a cost that is not a number is written null, so the exporter gets the
    record as stored (no cost), never the one in memory."""
    store = await _open(prefix)
    try:
        job = ScoreJob(RunRecord(trace_id="ab" * 16, span_id="cd" * 8), "q", "1")
        await store.put([job])
        (leased,) = await store.take(5)
        record = ScoreRecord(job.key, "ab" * 16, "cd" * 8, "ef" * 8, "q", "q", score=1.0, cost_usd=float("nan"))
        await store.settle(leased, Done(record))
        (claimed,) = await store.pending(5)
        assert claimed.record.cost_usd is None and claimed.record.score == 1.0
    finally:
        await store.shutdown()


async def test_a_traces_meta_holds_its_fields_through_append_due_and_finish(prefix: str) -> None:
    # The buffer scripts write a trace's meta hash in one HSET per chunk: what each step leaves.
    store = await _open(prefix, decision_wait=5.0, rootless_wait=30.0, max_spans_per_trace=2)
    meta = store.keys.meta(T1.hex())
    t2 = b"\x02" * 16
    try:
        await store.append([TraceChunk(T1, "spans", b"child", 1, False)], now=100.0)
        assert await store.client.hgetall(meta) == {b"first_seen": b"100.0", b"spans": b"1", b"candidate": b"0",
                                                   b"root": b"0"}
        await store.append([TraceChunk(T1, "spans", b"root run", 1, True, has_root=True)], now=101.0)
        assert await store.client.hgetall(meta) == {b"first_seen": b"100.0", b"spans": b"2", b"candidate": b"1",
                                                   b"root": b"1", b"decide_at": b"106"}
        # A first chunk over the span bound is dropped, but the trace is known from then on.
        await store.append([TraceChunk(t2, "spans", b"too many", 3, False)], now=102.0)
        assert await store.client.hgetall(store.keys.meta(t2.hex())) == {
            b"first_seen": b"102.0", b"spans": b"0", b"candidate": b"0", b"root": b"0"}
        assert await store.client.llen(store.keys.chunks(t2.hex())) == 0
        assert (await store.due(10, now=106.0))[0] == [T1]
        assert set(await store.client.hgetall(meta)) == {b"first_seen", b"spans", b"candidate", b"root",
                                                         b"decide_at", b"claim"}
        await store.finish(T1)
        assert set(await store.client.hgetall(meta)) == {b"first_seen", b"spans", b"candidate", b"root"}
        assert await store.client.zscore(store.keys.decide, T1.hex()) is None
    finally:
        await store.shutdown()


async def test_one_batch_settles_each_job_as_alone_and_writes_the_records_in_order(prefix: str) -> None:
    # SETTLE_DONE checks each job's lease and idempotency key in turn, then writes the batch's
    # records, acks and cleanups with one command each: what each job leaves is what it would alone.
    store = await _open(prefix, sinks=["mlflow"])
    client, keys = store.client, store.keys
    try:
        jobs = [ScoreJob(RunRecord(trace_id="ab" * 16, span_id=f"{i:016x}"), "q", "1") for i in range(6)]
        await store.put(jobs)
        leased = sorted(await store.take(10), key=lambda lj: lj.job.key)
        assert [lj.job.key for lj in leased] == [j.key for j in jobs]
        for lj in leased:  # judge replies kept, and every job parked once before
            await client.hset(keys.replies(lj.job.key), "req", "reply")
            await client.hset(keys.parked, lj.job.key, "budget")
        lost = leased[1]  # its lease went to another worker
        await client.xclaim(keys.jobs, "workers", "someone-else", 0, [lost.lease.split("|")[1]])
        await client.set(keys.idem(leased[2].job.key), "done")  # settled already: no second record
        records = [None if i == 3 else ScoreRecord(lj.job.key, "ab" * 16, lj.job.run.span_id, "ef" * 8, "q", "q",
                                                   score=i / 10) for i, lj in enumerate(leased)]
        await asyncio.gather(*(store.settle(lj, Done(rec)) for lj, rec in zip(leased, records, strict=True)))
        claimed = await store.pending(10)
        assert [item.record.score for item in claimed] == [0.0, 0.4, 0.5]  # in the jobs' order
        assert [item.item_id for item in claimed] == sorted(item.item_id for item in claimed)
        sunk = await store.sink_outbox("mlflow").pending(10)
        assert [item.item_id for item in sunk] == [item.item_id for item in claimed]
        held = [lj for lj in leased if lj is not lost]
        assert [await client.exists(keys.replies(lj.job.key)) for lj in held] == [0] * 5
        assert await client.exists(keys.replies(lost.job.key)) == 1  # a lost lease changes nothing
        assert set(await client.hkeys(keys.parked)) == {lost.job.key.encode()}
        assert await client.xlen(keys.jobs) == 1 and (await client.xpending(keys.jobs, "workers"))["pending"] == 1
    finally:
        await store.shutdown()


async def test_a_claim_of_thousands_of_records_takes_them_all_and_drops_released_ones(prefix: str) -> None:
    # CLAIM reads and moves the due records in slices (Lua's unpack takes a few thousand values).
    store = await _open(prefix)
    client, keys = store.client, store.keys
    try:
        now = time.time() - 1
        await client.hset(keys.outbox_data, mapping={str(i): f'{{"key": "k{i}"}}' for i in range(1, 2501)})
        await client.zadd(keys.outbox, {str(i): now for i in range(1, 2503)})  # 2501, 2502: data gone
        await client.hset(keys.outbox_attempts, "7", "3")
        rows = await store.outbox._claim(keys=[keys.outbox, keys.outbox_data, keys.outbox_attempts],
                                         args=[time.time(), 3000, time.time() + 60])
        by_id = {int(row[0]): row for row in rows}
        assert len(rows) == 2500 and set(by_id) == set(range(1, 2501))
        assert by_id[7] == [b"7", b'{"key": "k7"}', b"3"] and by_id[2000] == [b"2000", b'{"key": "k2000"}', b"0"]
        assert await client.zcard(keys.outbox) == 2500  # the two without data are dropped
        assert await client.zcount(keys.outbox, time.time() + 30, "+inf") == 2500  # claimed till then
    finally:
        await store.shutdown()


async def test_traces_of_one_append_count_against_the_bound_one_after_another(prefix: str) -> None:
    """APPEND counts the buffered traces once per call, then keeps the count as it adds and evicts."""
    t2, t3 = b"\x02" * 16, b"\x03" * 16
    store = await _open(prefix, max_traces=2, max_spans_per_trace=3, max_trace_age=60)
    try:
        result = await store.append([TraceChunk(T1, "spans", b"1", 1, False), TraceChunk(t2, "spans", b"2", 1, True),
                                     TraceChunk(t3, "spans", b"3", 1, True)], now=1.0)
        # t3 found the buffer full: the newest trace without a run span (T1) made room for it
        assert result.evicted_traces == 1 and await store.load(T1) == []
        assert [[c.data for c in cs] for cs in await store.load_many([t2, t3])] == [[b"2"], [b"3"]]
        result = await store.append([TraceChunk(T1, "spans", b"4", 1, False), TraceChunk(t2, "spans", b"5", 1, True)],
                                    now=2.0)
        assert result.evicted_traces == 1 and await store.load(T1) == []  # a newcomer without a run span goes itself
        assert [c.data for c in await store.load(t2)] == [b"2", b"5"]
    finally:
        await store.shutdown()


async def test_decided_traces_make_room_first_within_one_append(prefix: str) -> None:
    t2, t3, t4 = b"\x02" * 16, b"\x03" * 16, b"\x04" * 16
    store = await _open(prefix, max_traces=2, max_spans_per_trace=3, max_trace_age=60, decision_wait=1.0)
    try:
        await store.append([TraceChunk(T1, "spans", b"1", 1, True, has_root=True),
                            TraceChunk(t2, "spans", b"2", 1, False)], now=1.0)
        assert (await store.due(10, now=2.0))[0] == [T1]
        await store.finish(T1)  # decided: the first to go when the buffer is full, and not counted
        result = await store.append([TraceChunk(t3, "spans", b"3", 1, True), TraceChunk(t4, "spans", b"4", 1, True)],
                                    now=3.0)
        assert result.evicted_traces == 1  # t3 took T1's place, t4 the place of t2 (no run span)
        assert await store.load(t2) == []
        assert [[c.data for c in cs] for cs in await store.load_many([t3, t4])] == [[b"3"], [b"4"]]
    finally:
        await store.shutdown()
