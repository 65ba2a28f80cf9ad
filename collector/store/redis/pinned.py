"""One connection for a request's writes and the ``WAIT`` that follows them (``wait_replicas``).

``WAIT n timeout`` counts the replicas that acknowledged the writes of *its own connection*,
so the writes and the ``WAIT`` must share one. On one server or Sentinel that is a pinned
client (`redis.asyncio.Redis.client`). A Cluster client picks a connection per command, so
on a Cluster the writes go over one connection to the primary serving the deployment's
slot (every key of a deployment is in that one slot, `collector.store.redis.keys`):
`PinnedClusterNode` sends the scripts' ``EVALSHA`` and the ``WAIT`` on it. A slot that moved
meanwhile (MOVED, ASK, TRYAGAIN: a failover under way) is a `ConnectionError` like any
other outage: the request is refused retryably, and the Cluster client is asked to look up
the slot's owner again before the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import Connection
from redis.exceptions import AskError, MovedError, ResponseError, SlotNotCoveredError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError

from collector.common.errors import ConfigError
from collector.store.redis.conn import UNREACHABLE, Backoff, retry_unreachable, slot_primary

_MOVING = (MovedError, AskError, TryAgainError)
T = TypeVar("T")
logger = logging.getLogger(__name__)


class PinnedClusterNode:
    """The few commands a pinned writer needs (``EVALSHA``, ``SCRIPT LOAD``, ``WAIT``), sent
    over one connection to one Cluster node; enough for `redis.commands.core.AsyncScript`."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.failed = False

    async def _call(self, *args: Any) -> Any:
        try:
            await self._connection.send_command(*args)
            return await self._connection.read_response()
        except _MOVING as err:
            self.failed = True
            raise RedisConnectionError(f"the deployment's slot is moving ({err})") from err
        except ResponseError:  # a whole error reply was read (NOSCRIPT, OOM...): the connection is fine
            raise
        except BaseException:
            self.failed = True  # the reply may still be on its way: never reuse the connection
            raise

    async def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        return await self._call("EVALSHA", sha, numkeys, *keys_and_args)

    async def script_load(self, script: str | bytes) -> str:
        sha = await self._call("SCRIPT", "LOAD", script)
        return sha.decode() if isinstance(sha, bytes) else str(sha)

    async def wait(self, replicas: int, timeout_ms: int) -> int:
        return int(await self._call("WAIT", replicas, timeout_ms))


@contextlib.asynccontextmanager
async def pinned_writer(client: aioredis.Redis, slot_key: str) -> AsyncIterator[Any]:
    """A client whose commands (and a final ``wait``) share one connection: a pinned client
    of ``client``, or on a Cluster a `PinnedClusterNode` on the primary serving ``slot_key``."""
    if not isinstance(client, RedisCluster):
        async with client.client() as pinned:
            yield pinned
        return
    try:
        node = await slot_primary(client, slot_key)
    except SlotNotCoveredError as err:
        raise RedisConnectionError(f"no Cluster node serves the deployment's slot ({err})") from err
    if node is None:
        raise RedisConnectionError("no Cluster node serves the deployment's slot")
    connection = node.acquire_connection()
    pinned = PinnedClusterNode(connection)
    try:
        yield pinned
    finally:
        if pinned.failed:
            await connection.disconnect()
        node.release(connection)
        if pinned.failed:
            await _look_up_slot_again(client, slot_key)


async def refuse_without_wait(client: aioredis.Redis, slot_key: str) -> None:
    """Raise `ConfigError` if this Redis (or managed service) refuses ``WAIT``: with
    ``wait_replicas`` set every request would fail. Unreachable errors pass through."""
    try:
        async with pinned_writer(client, slot_key) as pinned:
            await pinned.wait(0, 1)
    except ResponseError as err:
        if isinstance(err, UNREACHABLE):  # CLUSTERDOWN is a ResponseError too
            raise
        raise ConfigError(f"invalid configuration: queue.wait_replicas: this Redis refuses WAIT ({err}); "
                          "use 0") from err


async def _look_up_slot_again(client: RedisCluster, slot_key: str) -> None:
    """Have the Cluster client route one read of the slot: following its MOVED (or refreshing
    after a dead node) updates the slot's owner that the next request is pinned to."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(1.0):
            await client.exists(slot_key)


class NotReplicated(RedisConnectionError):
    """Fewer replicas than ``wait_replicas`` acknowledged a write in time: an outage like any
    other to the callers (retried, then refused retryably)."""


class ReplicatedWrites:
    """Writes that must reach ``replicas`` replicas before their caller goes on (``wait_replicas``).

    An accepted request survives the primary's death because its append waited for the
    replicas (`RedisStore.append`). What deciding its trace writes must too: the trace is
    marked decided afterwards, and a failover between a write its replicas never got and
    that mark would keep the mark (sent to the new primary) and lose the write (the run's
    jobs, a session's turns). So such a write is sent on a pinned connection followed by
    ``WAIT``; too few acknowledgements is `NotReplicated`, and the whole write (idempotent)
    is sent again, on a new connection, for up to ``within_s``. After that the error reaches
    the caller, which has not marked anything: the trace is decided again once its claim runs out.

    Args:
        client: the store's client.
        slot_key: a key of the deployment's slot (where a Cluster pins the connection).
        replicas: ``wait_replicas``; 0 sends the writes as they are, with no ``WAIT``.
        timeout_ms: how long one ``WAIT`` waits.
        within_s: how long a write is sent again.
    """

    def __init__(self, client: aioredis.Redis, slot_key: str, replicas: int, timeout_ms: int,
                 within_s: float = 10.0) -> None:
        self._client = client
        self._slot_key = slot_key
        self.replicas = replicas
        self._timeout_ms = timeout_ms
        self.within_s = within_s
        self._backoff = Backoff("writing a decision to the replicas", logger)

    async def __call__(self, write: Callable[[Any], Awaitable[T]], what: str) -> T:
        """``write(client)``'s result once the replicas hold it (``client``: the pinned writer to
        send it on, None without ``wait_replicas``: then ``write`` retries as it would)."""
        if not self.replicas:
            return await write(None)
        return await retry_unreachable(lambda: self.once(write, what), self._backoff, self.within_s)

    async def once(self, write: Callable[[Any], Awaitable[T]], what: str) -> T:
        """``write(pinned)`` on a pinned connection, then ``WAIT`` (``replicas`` > 0): its result,
        or `NotReplicated` (too few acknowledgements) or an unreachable error, not retried."""
        # WAIT counts the replicas holding the writes of its own connection: pin one.
        async with pinned_writer(self._client, self._slot_key) as pinned:
            result = await write(pinned)
            acked = int(await pinned.wait(self.replicas, self._timeout_ms))
        if acked < self.replicas:
            raise NotReplicated(f"{acked} of {self.replicas} Redis replicas acknowledged {what} "
                                f"within {self._timeout_ms} ms")
        return result
