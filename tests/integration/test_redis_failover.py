"""Failover tests (SPEC §9): a real `tracescore serve` on a real Sentinel group, agents sending
all along, while the sentinels promote the replica.

One primary, one replica, three sentinels (`redis_topology.SentinelGroup`, ``redis-server
--sentinel``), the daemon on its ``redis+sentinel://`` URL:

* ``SENTINEL FAILOVER`` (a planned switch) with ``wait_replicas = 1``: every accepted run
  is scored exactly once, nothing is dead-lettered;
* the primary SIGKILLed (the replica promoted once the sentinels agree it is down; the dead
  node restarted as the new primary's replica, as an orchestrator would) with
  ``wait_replicas = 1``: every accepted run scored exactly once;
* the same kill with ``wait_replicas = 0``: runs accepted but never scored are counted
  (printed) and bounded by the README's statement: at most those accepted in the second
  before the kill.

While no primary answers, the receiver refuses with 503 and Retry-After (the senders
retry, as OTLP exporters do); any other answer fails the test.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from daemon_harness import CaptureBackend, wait_until
from redis_topology import Node, SentinelGroup
from test_redis_faults import PROTOBUF, ROOT, Proc, agent_bodies, unique_scores

from collector.store.redis.conn import slot_primary
from collector.store.redis.keys import GROUP, RedisKeys
from collector.store.redis.partitioned import PartitionedRedisStore, open_redis_store
from collector.store.redis.store import RedisStore

SCORER = f"{ROOT / 'tests' / 'integration' / 'scorers_for_tests.py'}:answer_length"


LAG_BOUND_S = 5.0
"""A run lost with ``wait_replicas = 0`` was accepted at most this long before the primary died:
the replica's lag, a second or less on a quiet machine, seconds on a loaded CI machine."""


class Senders:
    """Agents sending runs until told to stop, each request resent until it is accepted."""

    def __init__(self, url: str, bodies: list[tuple[bytes, list[str]]]) -> None:
        self.url, self.bodies = url, bodies
        self.accepted: list[tuple[float, list[str]]] = []  # (when, trace ids) per accepted request
        self.refusals: list[tuple[int, str | None]] = []

    async def send(self, first: int, step: int) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            for body, ids in self.bodies[first::step]:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        async with session.post(self.url, data=body, headers=PROTOBUF) as resp:
                            if resp.status == 200:
                                self.accepted.append((time.monotonic(), ids))
                                break
                            assert resp.status in (429, 503), f"answer {resp.status}: {await resp.text()}"
                            assert resp.headers.get("Retry-After"), "a refusal without Retry-After"
                            self.refusals.append((resp.status, resp.headers.get("Retry-After")))
                    except (aiohttp.ClientError, TimeoutError):
                        self.refusals.append((0, None))
                    assert time.monotonic() < deadline, "a request was never accepted"
                    await asyncio.sleep(0.05)  # client backoff (shorter than Retry-After: more probes)
                await asyncio.sleep(0.02)  # a steady stream, not a flood

    def runs(self) -> set[str]:
        return {t for _, ids in self.accepted for t in ids}


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[SentinelGroup]:
    started = SentinelGroup(tmp_path).start()
    try:
        yield started
    finally:
        started.stop()


def key_sets(store: RedisStore | PartitionedRedisStore) -> list[RedisKeys]:
    """Every key set of a deployment's store: its own keys (``RedisKeys(prefix)``), then each
    partition's (`PartitionedRedisStore.partitions`) when it has more than one."""
    parts = store.partitions if isinstance(store, PartitionedRedisStore) else []
    return [store.keys, *(part.keys for part in parts)]


async def job_keys(client: aioredis.Redis, keys: RedisKeys) -> set[str]:
    """The keys of the jobs a key set has an idempotency key for (every job queued there;
    kept, with a TTL, after it is done)."""
    node = await slot_primary(client, keys.jobs)
    where: dict[str, Any] = {} if node is None else {"target_nodes": node}
    return {key.decode().removeprefix(keys.idem_prefix)
            async for key in client.scan_iter(match=f"{keys.idem_prefix}*", count=1000, **where)}


async def unscored_state(client: aioredis.Redis, keys: list[RedisKeys], accepted: set[str],
                         backend: CaptureBackend) -> str:
    """What a deployment's keys hold for the accepted runs no score reached (a failure's
    diagnosis: the queue's, outbox's and buffer's sizes, then each such trace's buffer entries,
    idempotency keys and stream entries); never raises."""
    try:
        missing = sorted(accepted - unique_scores(backend)[1])
        lines = [f"{len(missing)} accepted runs not scored: {missing[:10]}"]
        for k in keys:
            queued_keys = await job_keys(client, k)
            entries = await client.xrange(k.jobs)
            lines.append(f"{k.prefix}: stream {len(entries)} entries, pending {await client.xpending(k.jobs, GROUP)}, "
                         f"outbox {await client.zcard(k.outbox)}, decide {await client.zcard(k.decide)}, "
                         f"open {await client.zcard(k.traces_open)}, decided {await client.zcard(k.traces_decided)}")
            for trace in missing[:10]:
                idem = [(key, await client.get(k.idem(key))) for key in sorted(queued_keys) if key.startswith(trace)]
                queued = [(entry_id, fields.get(b"key")) for entry_id, fields in entries if trace.encode() in fields.get(b"key", b"")]
                lines.append(f"  {trace}: meta {await client.hgetall(k.meta(trace))}, chunks {await client.llen(k.chunks(trace))}, "
                             f"decide at {await client.zscore(k.decide, trace)}, open {await client.zscore(k.traces_open, trace)}, "
                             f"decided {await client.zscore(k.traces_decided, trace)}, idem {idem}, stream {queued}")
        return "\n".join(lines)
    except Exception as exc:  # the diagnosis must not hide the failure
        return f"(the keys could not be read: {exc!r})"


async def failover_under_load(tmp: Path, url: str, prefix: str, wait_replicas: int,
                              fail: Callable[[], Awaitable[float]], *, partitions: int = 1) -> dict[str, Any]:
    """Run a daemon on ``url`` (its work in ``partitions`` key partitions), send 80 requests
    (2 runs each) from two agents, call ``fail`` (it returns when the primary was lost) after
    the 20th is accepted; wait until everything accepted is scored (``wait_replicas`` > 0) or
    the queue drained (0: a run may be lost), in the deployment's own keys and every partition's.

    Returns the runs accepted and scored, ``decided`` (the traces each key set, as `key_sets`
    lists them, holds decided) and ``jobs`` (the job keys each one queued), among others."""
    backend = await CaptureBackend().start()
    queue = {"url": url, "key_prefix": prefix, "visibility_timeout_s": 3.0,
             "wait_replicas": wait_replicas, "wait_timeout_ms": 500, "partitions": partitions}
    daemon = Proc(tmp, "daemon", "all", queue, backend.endpoint, SCORER)
    inspector = open_redis_store(url, partitions=partitions, key_prefix=prefix)  # never started: keys, client
    client, keys = inspector.client, key_sets(inspector)
    try:
        await daemon.start()
        senders = Senders(daemon.url, agent_bodies(160, 2))
        sending = [asyncio.create_task(senders.send(i, 2)) for i in range(2)]
        await wait_until(lambda: len(senders.accepted) >= 20, timeout=60, what="20 requests accepted")
        killed_at = await fail()
        await asyncio.gather(*sending)
        daemon.assert_alive()
        accepted = senders.runs()

        async def drained() -> bool:
            try:
                for k in keys:
                    if (await client.xlen(k.jobs) or await client.zcard(k.outbox)
                            or await client.zcard(k.decide)):
                        return False
                return unique_scores(backend)[1] >= accepted
            except Exception:
                return False

        if wait_replicas:
            try:
                await wait_until(drained, timeout=90, what="every accepted run scored and the queue drained")
            except AssertionError as err:  # say what the keys hold for the runs not scored
                raise AssertionError(f"{err}\n{await unscored_state(client, keys, accepted, backend)}") from None
        else:
            try:  # a lost run is never scored: wait for the queue to drain instead, then count
                await wait_until(drained, timeout=45, what="drained")
            except AssertionError:
                pass
        total, scored = unique_scores(backend)
        dead = sum([await client.xlen(k.dead) for k in keys])
        decided = [{t.decode() for t in await client.zrange(k.traces_decided, 0, -1)} for k in keys]
        jobs = [await job_keys(client, k) for k in keys]
        late = {t for at, ids in senders.accepted if killed_at - LAG_BOUND_S <= at <= killed_at for t in ids}
        return {"accepted": accepted, "scored": scored, "total": total, "dead": dead, "late": late,
                "refusals": senders.refusals, "sent": len(backend.scores()), "decided": decided, "jobs": jobs}
    finally:
        await daemon.stop()
        await backend.stop()
        await inspector.shutdown()
        cleaner = open_redis_store(url, partitions=partitions, key_prefix=prefix)  # a fresh client: the topology of now
        await cleaner.delete_all()
        await cleaner.shutdown()


def _prefix() -> str:
    return f"test-failover-{uuid.uuid4().hex[:8]}:"


async def _sentinel_failover(group: SentinelGroup) -> float:
    old = group.primary()
    group.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", SentinelGroup.NAME)
    await group.wait_primary_other_than(old)
    return time.monotonic()


async def _kill_primary(group: SentinelGroup) -> float:
    old: Node = group.primary()
    old.kill()
    killed_at = time.monotonic()
    new = await group.wait_primary_other_than(old)
    old.start("--replicaof", "127.0.0.1", str(new.port))  # back, as the new primary's replica
    return killed_at


@pytest.mark.long
@pytest.mark.parametrize("fail", [_sentinel_failover, _kill_primary], ids=["sentinel-failover", "sigkill"])
async def test_with_wait_replicas_1_every_accepted_run_is_scored_once(
        tmp_path: Path, group: SentinelGroup, fail: Callable[[SentinelGroup], Awaitable[float]]) -> None:
    out = await failover_under_load(tmp_path, group.url(), _prefix(), 1, lambda: fail(group))
    assert out["scored"] == out["accepted"] and out["total"] == len(out["accepted"]) == 160
    assert out["dead"] == 0
    print(f"{fail.__name__}, wait_replicas=1: {len(out['accepted'])} runs accepted and scored once, "
          f"{len(out['refusals'])} refusals meanwhile, {out['sent'] - out['total']} score spans re-sent")


@pytest.mark.long
async def test_sigkilled_primary_with_wait_replicas_0_loses_at_most_the_last_second(
        tmp_path: Path, group: SentinelGroup) -> None:
    out = await failover_under_load(tmp_path, group.url(), _prefix(), 0, lambda: _kill_primary(group))
    lost = out["accepted"] - out["scored"]
    assert out["scored"] <= out["accepted"] and out["total"] == len(out["scored"])
    assert lost <= out["late"], f"{len(lost - out['late'])} runs lost that were accepted over {LAG_BOUND_S:g} s before the kill"
    assert out["dead"] == 0
    print(f"SIGKILL, wait_replicas=0: {len(lost)} of {len(out['accepted'])} accepted runs lost "
          f"(bound: the {len(out['late'])} accepted in the last {LAG_BOUND_S:g} s before the kill)")
