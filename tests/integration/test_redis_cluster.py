"""End to end on a real 3-primary Redis Cluster (six nodes, one replica each), with a replica
taking over the primary that serves the deployment's hash slot.

A `tracescore serve` on ``redis+cluster://`` scores the runs two agents keep sending; after
20 requests the primary serving the deployment's slot (`collector.store.redis.keys`: one
slot per deployment) is SIGKILLed, its replica takes over once the Cluster agrees the
primary failed (``cluster-node-timeout`` 1000 ms), and the daemon follows the slot to it
(MOVED, CLUSTERDOWN meanwhile: 503 + Retry-After). With ``wait_replicas = 0`` runs lost, if
any, were accepted in the last seconds before the kill (`LAG_BOUND_S`); with ``wait_replicas =
1`` (the request's writes and ``WAIT`` on one connection to the slot's primary) every
accepted run is scored exactly once. Nothing is dead-lettered.

With ``[queue] partitions = 3`` the deployment's work lies in 3 slots, one per primary
(`collector.store.redis.partitions`): the runs are scored once each, every trace is decided
and every job queued in the partition its id or key names, and each primary holds a share of
both; a takeover of the primary serving one partition's slot (``wait_replicas = 1``) loses
and duplicates nothing. The contract suite runs on a Cluster
too (`tests/contract/conftest.py`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
from daemon_harness import wait_until
from redis_topology import ClusterGroup, Node
from test_redis_failover import LAG_BOUND_S, failover_under_load

from collector.common.errors import Unavailable
from collector.common.types import TraceChunk
from collector.store.redis.keys import RedisKeys
from collector.store.redis.partitioned_admin import partition_keys
from collector.store.redis.partitions import PartitionMap
from collector.store.redis.store import RedisStore


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[ClusterGroup]:
    started = ClusterGroup(tmp_path / "cluster").start()
    try:
        yield started
    finally:
        started.stop()


def _takeover(cluster: ClusterGroup, slot_key: str, *, rejoin: bool = False):  # type: ignore[no-untyped-def]
    """SIGKILL the primary serving ``slot_key``, wait for its replica to take over; ``rejoin``:
    then start the killed node again, which rejoins as the new primary's replica (its
    ``nodes.conf`` names the Cluster), and wait until it is in sync."""
    owner = cluster.owner(slot_key)

    async def takeover() -> float:
        owner.kill()
        killed_at = time.monotonic()
        new = await cluster.wait_takeover(slot_key, owner)
        assert new.port != owner.port and len(cluster.primaries()) == 3
        if rejoin:
            owner.start()
            await wait_until(lambda: owner.client().info("replication").get("master_port") == new.port
                             and cluster.replicas_in_sync(), what="the killed node back as a replica in sync")
        return killed_at
    return takeover


async def test_wait_replicas_counts_the_replica_of_the_slots_primary(cluster: ClusterGroup) -> None:
    prefix = f"test-cluster-{uuid.uuid4().hex[:8]}:"
    trace = uuid.uuid4().bytes
    one = RedisStore(cluster.url(), key_prefix=prefix, wait_replicas=1, wait_timeout_ms=2000)
    two = RedisStore(cluster.url(), key_prefix=prefix, wait_replicas=2, wait_timeout_ms=200)
    try:
        await one.start()
        await two.start()
        await one.append([TraceChunk(trace, "spans", b"run", 1, True, True)], now=time.time())
        replica = next(n for n in cluster.nodes if n.client().execute_command("ROLE")[0] == b"slave"
                       and n.client().info("replication")["master_port"] == cluster.owner(one.keys.jobs).port)
        with redis.Redis(port=replica.port, single_connection_client=True) as on_replica:
            on_replica.execute_command("READONLY")  # a Cluster replica answers MOVED without it
            assert on_replica.exists(one.keys.chunks(trace.hex()))  # acknowledged: the replica has it
        with pytest.raises(Unavailable, match="1 of 2 Redis replicas acknowledged"):  # one replica per primary
            await two.append([TraceChunk(trace, "spans", b"more", 1, True)], now=time.time())
        assert [c.data for c in await one.load(trace)] == [b"run", b"more"]  # written, resent, absorbed
    finally:
        await one.delete_all()
        await one.shutdown()
        await two.shutdown()


@pytest.mark.long
async def test_cluster_with_wait_replicas_1_scores_every_accepted_run_once_through_a_takeover(
        tmp_path: Path, cluster: ClusterGroup) -> None:
    prefix = f"test-cluster-{uuid.uuid4().hex[:8]}:"
    takeover = _takeover(cluster, RedisKeys(prefix).jobs, rejoin=True)  # WAIT 1 needs a replica again
    out = await failover_under_load(tmp_path, cluster.url(), prefix, 1, takeover)
    assert out["scored"] == out["accepted"] and out["total"] == len(out["accepted"]) == 160
    assert out["dead"] == 0
    print(f"Cluster replica takeover, wait_replicas=1: {len(out['accepted'])} runs accepted and scored once, "
          f"{len(out['refusals'])} refusals meanwhile, {out['sent'] - out['total']} score spans re-sent")


@pytest.mark.long
async def test_cluster_scores_through_a_replica_takeover(tmp_path: Path, cluster: ClusterGroup) -> None:
    prefix = f"test-cluster-{uuid.uuid4().hex[:8]}:"
    out = await failover_under_load(tmp_path, cluster.url(), prefix, 0, _takeover(cluster, RedisKeys(prefix).jobs))
    lost = out["accepted"] - out["scored"]
    assert out["scored"] <= out["accepted"] and out["total"] == len(out["scored"]), "a run scored twice"
    assert lost <= out["late"], f"{len(lost - out['late'])} runs lost that were accepted over {LAG_BOUND_S:g} s before the kill"
    assert out["dead"] == 0
    print(f"Cluster replica takeover: {len(out['scored'])} of {len(out['accepted'])} accepted runs scored once, "
          f"{len(lost)} lost (bound {len(out['late'])}), {len(out['refusals'])} refusals meanwhile")


MIN_SHARE = 0.15
"""The least share of the runs' traces and jobs each of the 3 primaries must hold with 3
partitions (about a third each; all of them on one primary without partitions)."""


def _script_calls(node: Node) -> int:
    """The EVALSHA calls ``node`` served since it started (``INFO commandstats``)."""
    with node.client() as client:
        return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


async def _no_fault() -> float:
    """`failover_under_load`'s fault, none: the runs go on."""
    return time.monotonic()


async def test_cluster_with_3_partitions_spreads_one_deployment_over_the_3_primaries(
        tmp_path: Path, cluster: ClusterGroup) -> None:
    prefix = f"test-cluster-{uuid.uuid4().hex[:8]}:"
    parts = partition_keys(prefix, 3)
    owners = [cluster.owner(keys.jobs) for keys in parts]
    primaries = cluster.primaries()
    assert sorted(n.port for n in owners) == sorted(n.port for n in primaries), "not one partition per primary"
    before = {n.port: _script_calls(n) for n in primaries}
    out = await failover_under_load(tmp_path, cluster.url(), prefix, 0, _no_fault, partitions=3)
    calls = {n.port: _script_calls(n) - before[n.port] for n in primaries}
    assert out["scored"] == out["accepted"] and out["total"] == len(out["accepted"]) == 160
    assert out["dead"] == 0
    # The work itself, per partition hence per primary: the traces decided there, the jobs
    # queued there. (Script calls alone would not tell: taking jobs, due traces and records
    # to export asks every partition, whichever holds the work.)
    home, decided, jobs = out["decided"][0] | out["jobs"][0], out["decided"][1:], out["jobs"][1:]
    calls_total = sum(calls.values())
    figures = ", ".join(f":{n.port} (partition {i}) {len(decided[i])} traces, {len(jobs[i])} jobs, "
                        f"{calls[n.port]} EVALSHA ({calls[n.port] / calls_total:.0%})" for i, n in enumerate(owners))
    print(f"Cluster, 3 partitions: {len(out['accepted'])} runs scored once; per primary: {figures}")
    assert not home, f"work in the deployment's own keys: {sorted(home)[:3]}"
    route = PartitionMap(3)
    for i, n in enumerate(owners):
        assert {route.of_trace(bytes.fromhex(t)) for t in decided[i]} <= {i}, f"partition {i} holds others' traces"
        assert {route.of_key(key) for key in jobs[i]} <= {i}, f"partition {i} holds others' jobs"
        assert min(len(decided[i]), len(jobs[i])) >= MIN_SHARE * 160, f"primary :{n.port} did too little: {figures}"
    assert set().union(*decided) == out["accepted"] and sum(map(len, decided)) == 160
    assert {key.split("/")[0] for key in set().union(*jobs)} == out["accepted"] and sum(map(len, jobs)) == 160


@pytest.mark.long
async def test_cluster_with_3_partitions_and_wait_replicas_1_scores_every_accepted_run_once_through_one_partitions_takeover(
        tmp_path: Path, cluster: ClusterGroup) -> None:
    prefix = f"test-cluster-{uuid.uuid4().hex[:8]}:"
    parts = partition_keys(prefix, 3)
    home = cluster.owner(RedisKeys(prefix).jobs)
    # a partition whose primary does not also serve the deployment's own keys: only its slot moves
    index, victim = next((i, keys) for i, keys in enumerate(parts) if cluster.owner(keys.jobs).port != home.port)
    takeover = _takeover(cluster, victim.jobs, rejoin=True)  # WAIT 1 needs a replica again
    out = await failover_under_load(tmp_path, cluster.url(), prefix, 1, takeover, partitions=3)
    assert out["scored"] == out["accepted"] and out["total"] == len(out["accepted"]) == 160
    assert out["dead"] == 0
    print(f"Cluster, 3 partitions, partition {index}'s primary taken over, wait_replicas=1: "
          f"{len(out['accepted'])} runs accepted and scored once, {len(out['refusals'])} refusals meanwhile, "
          f"{out['sent'] - out['total']} score spans re-sent")
