"""End to end on a real 3-primary Redis Cluster (six nodes, one replica each), with a replica
taking over the primary that serves the deployment's hash slot.

A `tracescore serve` on ``redis+cluster://`` scores the runs two agents keep sending; after
20 requests the primary serving the deployment's slot (`collector.store.redis.keys`: one
slot per deployment) is SIGKILLed, its replica takes over once the Cluster agrees the
primary failed (``cluster-node-timeout`` 1000 ms), and the daemon follows the slot to it
(MOVED, CLUSTERDOWN meanwhile: 503 + Retry-After). Cluster replication is asynchronous
(``wait_replicas`` is for Sentinel or one server), so the bound is the ``wait_replicas = 0``
one: runs lost, if any, were accepted in the last seconds before the kill (`LAG_BOUND_S`); the others are
scored exactly once and nothing is dead-lettered. The contract suite runs on a Cluster too
(`tests/contract/conftest.py`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis_topology import ClusterGroup
from test_redis_failover import LAG_BOUND_S, failover_under_load

from collector.store.redis.keys import RedisKeys


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[ClusterGroup]:
    started = ClusterGroup(tmp_path / "cluster").start()
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.long
async def test_cluster_scores_through_a_replica_takeover(tmp_path: Path, cluster: ClusterGroup) -> None:
    prefix = f"test-cluster-{uuid.uuid4().hex[:8]}:"
    slot_key = RedisKeys(prefix).jobs
    owner = cluster.owner(slot_key)

    async def takeover() -> float:
        owner.kill()
        killed_at = time.monotonic()
        new = await cluster.wait_takeover(slot_key, owner)
        assert new.port != owner.port and len(cluster.primaries()) == 3
        return killed_at

    out = await failover_under_load(tmp_path, cluster.url(), prefix, 0, takeover)
    lost = out["accepted"] - out["scored"]
    assert out["scored"] <= out["accepted"] and out["total"] == len(out["scored"]), "a run scored twice"
    assert lost <= out["late"], f"{len(lost - out['late'])} runs lost that were accepted over {LAG_BOUND_S:g} s before the kill"
    assert out["dead"] == 0
    print(f"Cluster replica takeover: {len(out['scored'])} of {len(out['accepted'])} accepted runs scored once, "
          f"{len(lost)} lost (bound {len(out['late'])}), {len(out['refusals'])} refusals meanwhile")
