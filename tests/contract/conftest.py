"""Fixtures for the contract tests: one factory per queue backend (SQLite file, real Redis,
a real 3-primary Redis Cluster, and the partitioned Redis store of ``queue.partitions = 3`` on
both: `collector.store.redis.partitioned`).

The Redis backend needs the server at ``REDIS_URL`` (default 127.0.0.1:6379); when it is
missing the tests fail (they never skip). The Cluster (six ``redis-server`` processes made
a Cluster by ``redis-cli --cluster create``, `redis_topology.ClusterGroup`) is started once
per test session by the worker that runs its tests (they share an xdist group). Each test
gets its own key prefix and deletes its keys at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_topology import ClusterGroup  # tests/support
from shared_redis import REDIS_URL

from collector.store.redis.partitioned import PartitionedRedisStore, open_redis_store
from collector.store.redis.store import RedisStore
from collector.store.sqlite.store import SqliteStore

StoreFactory = Callable[..., Awaitable[Any]]


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a 3-primary Redis Cluster of this session (stopped at its end)."""
    cluster = ClusterGroup(tmp_path_factory.mktemp("cluster"))
    try:
        yield cluster.start().url()
    finally:
        cluster.stop()


ON_CLUSTER = pytest.mark.xdist_group("redis-cluster")
PARTITIONS = 3
"""The partitions of the ``*-partitioned`` backends: one per primary of the test Cluster."""


@pytest.fixture(params=["sqlite", "redis", "redis-partitioned", pytest.param("redis-cluster", marks=ON_CLUSTER),
                        pytest.param("redis-cluster-partitioned", marks=ON_CLUSTER)])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """``await make_store(**options)`` opens a started store of the parametrized backend."""
    opened: list[Any] = []
    url = request.getfixturevalue("redis_cluster") if request.param.startswith("redis-cluster") else REDIS_URL
    partitions = PARTITIONS if request.param.endswith("-partitioned") else 1

    async def factory(**options: Any) -> Any:
        if request.param == "sqlite":
            store: Any = SqliteStore(str(tmp_path / f"q{len(opened)}.db"), **options)
            store.test_path = str(tmp_path / f"q{len(opened)}.db")  # for a second connection (dead letters)
        else:
            prefix = f"test-{uuid.uuid4().hex[:12]}:"
            store = open_redis_store(url, partitions=partitions, key_prefix=prefix, block_ms=0, **options)
            store.test_url = url  # for a second connection (dead letters, a restart)
            await store.client.ping()  # fail loudly when Redis is missing
        await store.start()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        if isinstance(store, RedisStore | PartitionedRedisStore):
            await store.delete_all()
        await store.shutdown()
