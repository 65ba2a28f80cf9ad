"""A connection left on a primary that a failover demoted is dropped, and the next command
connects anew (`collector.store.redis.conn.FailoverConnection`): what lets a ``redis://``
URL follow a managed endpoint whose primary moved. Real ``redis-server`` processes
(`redis_topology.Node`) of this test alone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from polling import wait_until
from redis.exceptions import ConnectionError as RedisConnectionError
from redis_topology import Node

from collector.store.redis.conn import UNREACHABLE, connect


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    nodes = (Node(tmp_path, "a").start(), Node(tmp_path, "b").start())
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


async def test_a_write_on_a_demoted_primary_drops_the_connection(pair: tuple[Node, Node]) -> None:
    a, b = pair
    client = connect(f"redis://127.0.0.1:{a.port}/0")
    try:
        assert await client.set("k", 1)
        a.client().execute_command("REPLICAOF", "127.0.0.1", str(b.port))  # a failover demotes it
        with pytest.raises(RedisConnectionError, match="replica now") as caught:
            await client.set("k", 2)
        assert isinstance(caught.value, UNREACHABLE)  # callers back off and retry, receivers answer 503
        assert all(c._reader is None for c in client.connection_pool._available_connections)
        a.client().execute_command("REPLICAOF", "NO", "ONE")  # the endpoint names a primary again
        assert await client.set("k", 3)  # a new connection, no restart
    finally:
        await client.aclose()


async def test_a_blocked_read_unblocked_by_the_demotion_drops_the_connection(pair: tuple[Node, Node]) -> None:
    a, b = pair
    client = connect(f"redis://127.0.0.1:{a.port}/0")
    try:
        await client.xgroup_create("s", "g", id="0", mkstream=True)
        read = asyncio.create_task(client.xreadgroup("g", "c", {"s": ">"}, block=10_000))
        await wait_until(lambda: any(c.get("cmd") == "xreadgroup" for c in a.client().client_list()),
                         what="the read blocked on the server (a worker's take)")
        a.client().execute_command("REPLICAOF", "127.0.0.1", str(b.port))
        with pytest.raises(RedisConnectionError, match="replica now"):
            await asyncio.wait_for(read, 5)
    finally:
        await client.aclose()
