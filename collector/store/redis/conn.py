"""Connection plumbing of the Redis backend: the client, the errors that mean "unreachable",
and the backoff every component uses while Redis is away.

redis-py reconnects a pooled connection on its next command after a failure, so a
component survives an outage by catching `UNREACHABLE`, waiting (`Backoff`) and trying
again; nothing has to be rebuilt. Writes are not retried blindly by the client (a lost
reply to an append could otherwise store a chunk twice): each caller decides.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, cast

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection, SSLConnection, parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import NoBackoff
from redis.driver_info import DriverInfo
from redis.exceptions import (
    ClusterError,
    ReadOnlyError,
    RedisClusterUnreachableError,
    ResponseError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.sentinel import DEMOTED_MASTER_UNBLOCKED_ERROR

from collector.config.redis_url import parse_redis_url
from collector.store.redis.packing import FastPacker, encodes_strict_utf8

UNREACHABLE: tuple[type[Exception], ...] = (
    RedisConnectionError, RedisTimeoutError, OSError, ReadOnlyError, ClusterError, SlotNotCoveredError,
    RedisClusterUnreachableError,
)
"""Errors meaning no primary answers right now: unreachable, loading its dataset, a failover
under way (a demoted primary's READONLY, Cluster's CLUSTERDOWN, TRYAGAIN past redis-py's
retries, a slot without a node). MOVED and ASK never get here: the Cluster client follows them."""

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class FailoverConnection(Connection):
    """A connection that drops itself when its server was demoted to a replica.

    A primary that a failover turned into a replica keeps its connections and answers writes
    with READONLY (and unblocks blocked reads with UNBLOCKED); behind a managed endpoint that
    moved, only a new connection reaches the new primary. So those replies disconnect and
    raise `ConnectionError`, as redis-py's Sentinel connections do, and the caller's retry
    connects afresh.

    Its commands are packed by `FastPacker` (the same bytes, made in one C call).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        encoder = self.encoder  # hiredis encodes text as strict UTF-8: another encoding keeps redis-py's way
        if self._command_packer is not None and encodes_strict_utf8(encoder):
            self._command_packer = FastPacker(self._pack_command_python, encoder.encode)

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102 (see the class)
        try:
            return await super().read_response(*args, **kwargs)
        except ReadOnlyError as err:
            await self.disconnect()
            raise RedisConnectionError(f"the server is a replica now (failover): {err}") from err
        except ResponseError as err:
            if not str(err).startswith(DEMOTED_MASTER_UNBLOCKED_ERROR):
                raise
            await self.disconnect()
            raise RedisConnectionError(f"the server is a replica now (failover): {err}") from err


class FailoverSSLConnection(FailoverConnection, SSLConnection):
    """`FailoverConnection` over TLS (``rediss://``)."""


class BlockingSentinelPool(SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """Sentinel's pool (connections follow the primary the sentinels name) that waits for a
    free connection, as the one-server pool does, instead of failing when all are in use."""


def connect(url: str, *, socket_timeout_s: float = 10.0, max_connections: int = 128) -> aioredis.Redis:
    """A pooled asyncio client for a ``queue.url`` (bytes replies; no client-side retries).

    ``redis://``/``rediss://``: one server (`FailoverConnection`s: a demoted primary is left);
    ``redis+sentinel://``: the primary the sentinels name, asked again after a failover;
    ``redis+cluster://``: a `RedisCluster` (it follows MOVED/ASK/TRYAGAIN and refreshes its
    slot map after CLUSTERDOWN or a lost node). The pool is bounded and blocking: a command
    waits (up to the socket timeout) for a free connection instead of failing with "too
    many connections". redis-py retries a command after a connection error by default;
    that could apply a non-idempotent write (an append) twice, so retries are left to the
    callers. The driver version is given, so that opening a connection does not read
    package metadata from disk on the event loop.

    The Cluster client is returned typed as `redis.asyncio.Redis`: it offers every command
    the backend sends with the same signature (the backend's multi-key scripts and
    transactions keep to one hash slot, see `collector.store.redis.keys`).

    Example:
        >>> client = connect("redis://127.0.0.1:6379/0", max_connections=8)
        >>> pool = client.connection_pool
        >>> type(pool).__name__, pool.max_connections, client.get_retry().get_retries()
        ('BlockingConnectionPool', 8, 0)
        >>> type(connect("redis+sentinel://127.0.0.1:26379/primary/0").connection_pool).__name__
        'BlockingSentinelPool'
        >>> type(connect("redis+cluster://127.0.0.1:7000,127.0.0.1:7001")).__name__
        'RedisCluster'
    """
    target = parse_redis_url(url)
    common: dict[str, Any] = dict(
        socket_timeout=socket_timeout_s, socket_connect_timeout=2.0, retry=Retry(NoBackoff(), 0),
        driver_info=DriverInfo(name="redis-py", lib_version=redis.__version__),
    )
    options: dict[str, Any] = {**parse_url(target.url), **common, "decode_responses": False}
    connection_class = options.pop("connection_class", None)
    tls = connection_class is SSLConnection
    if target.mode == "cluster":
        for name in ("host", "port", "db"):
            options.pop(name, None)
        cluster = RedisCluster(startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
                               max_connections=max_connections, ssl=tls, **options)
        return cast(aioredis.Redis, cluster)
    if target.mode == "sentinel":
        options.pop("host", None)
        options.pop("port", None)
        sentinel_options = {**common, "ssl": tls, "username": target.sentinel.get("sentinel_username"),
                            "password": target.sentinel.get("sentinel_password")}
        sentinel = Sentinel(target.nodes, sentinel_kwargs=sentinel_options)
        return sentinel.master_for(target.service, connection_pool_class=BlockingSentinelPool, ssl=tls,
                                   max_connections=max_connections, timeout=socket_timeout_s,
                                   health_check_interval=15, **options)
    if "path" in options:  # a unix socket keeps its own connection class
        options["connection_class"] = connection_class
    else:
        options["connection_class"] = FailoverSSLConnection if tls else FailoverConnection
    pool = aioredis.BlockingConnectionPool(max_connections=max_connections, timeout=socket_timeout_s,
                                           health_check_interval=15, **options)
    return aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose() disconnects it


def is_cluster(client: aioredis.Redis) -> bool:
    """Whether ``client`` talks to a Redis Cluster (no SELECT; a pinned writer is one node's).

    Example:
        >>> is_cluster(connect("redis://127.0.0.1:6379/0")), is_cluster(connect("redis+cluster://127.0.0.1:7000"))
        (False, True)
    """
    return isinstance(client, RedisCluster)


async def slot_primary(client: aioredis.Redis, key: str) -> ClusterNode | None:
    """On a Cluster, the primary serving ``key``'s slot (the slot map is read first if the
    client has none yet); None for one server or Sentinel. Raises `SlotNotCoveredError`
    when no node serves the slot.

    Example:
        >>> asyncio.run(slot_primary(connect("redis://127.0.0.1:6379/0"), "{tracescore}:jobs")) is None
        True
    """
    if not isinstance(client, RedisCluster):
        return None
    await client.initialize()  # a no-op once the slot map is known
    return client.get_node_from_key(key)


class Coalescer(Generic[K, V]):
    """Batches concurrent single-item calls into one call per loop turn (one Redis pipeline).

    Callers await ``coalescer(item)``; every item submitted before the event loop gets back
    to the coalescer is handed to ``flush`` together, which returns one result per item.

    Args:
        flush: runs a batch; returns results in the order of the items.

    Example:
        >>> async def demo():
        ...     batches = []
        ...     async def double(items):
        ...         batches.append(len(items))
        ...         return [2 * i for i in items]
        ...     twice = Coalescer(double)
        ...     return await asyncio.gather(*(twice(i) for i in range(3))), batches
        >>> asyncio.run(demo())
        ([0, 2, 4], [3])
    """

    def __init__(self, flush: Callable[[list[K]], Awaitable[list[V]]]) -> None:
        self._flush = flush
        self._items: list[tuple[K, asyncio.Future[V]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, item: K) -> V:
        return await self.submit(item)

    def submit(self, item: K) -> asyncio.Future[V]:
        """Add ``item`` to this loop turn's batch; the future gets its result (or the batch's error)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[V] = loop.create_future()
        self._items.append((item, future))
        if len(self._items) == 1:
            loop.call_soon(self._spawn)  # after the other callers scheduled in this turn
        return future

    def _spawn(self) -> None:
        items, self._items = self._items, []
        task = asyncio.get_running_loop().create_task(self._run(items))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, items: list[tuple[K, asyncio.Future[V]]]) -> None:
        try:
            results = await self._flush([item for item, _ in items])
        except BaseException as err:  # noqa: BLE001 (handed to every waiter)
            for _, future in items:
                if not future.done():
                    future.set_exception(err)
            if not isinstance(err, Exception):
                raise
            return
        for (_, future), result in zip(items, results, strict=True):
            if not future.done():
                future.set_result(result)


async def retry_unreachable(call: Callable[[], Awaitable[T]], backoff: Backoff, within_s: float) -> T:
    """Await ``call()``, again (with backoff) while Redis is unreachable, for up to ``within_s``.

    Only for idempotent calls (reads, SET NX, ownership-checked scripts).

    Example:
        >>> async def ok() -> int:
        ...     return 1
        >>> asyncio.run(retry_unreachable(ok, Backoff("x", logging.getLogger("x")), 1.0))
        1
    """
    deadline = time.monotonic() + within_s
    while True:
        try:
            result = await call()
        except UNREACHABLE as err:
            if time.monotonic() > deadline:
                raise
            await backoff.wait(err)
            continue
        backoff.reset()
        return result


class Backoff:
    """Jittered exponential waits between attempts, reset by a success; logs rate-limited.

    Args:
        what: named in the warning (``"taking jobs"``).
        logger: where the warning goes.
        base_s: the first wait.
        cap_s: the longest wait.

    Example:
        >>> b = Backoff("demo", logging.getLogger("demo"), base_s=0.1, cap_s=0.4)
        >>> [round(b.next_delay() / 0.1) for _ in range(4)]  # doctest: +SKIP
        [1, 2, 4, 4]
        >>> b.reset(); b.failures
        0
    """

    def __init__(self, what: str, logger: logging.Logger, *, base_s: float = 0.05, cap_s: float = 2.0) -> None:
        self._what = what
        self._logger = logger
        self._base = base_s
        self._cap = cap_s
        self.failures = 0
        self._last_log = 0.0

    def next_delay(self) -> float:
        """The wait before the next attempt (grows with each call).

        Example:
            >>> 0 < Backoff("x", logging.getLogger("x")).next_delay() <= 0.06
            True
        """
        delay = min(self._cap, self._base * 2 ** min(self.failures, 16))
        self.failures += 1
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        """Forget past failures (after a success).

        Example:
            >>> Backoff("x", logging.getLogger("x")).reset()
        """
        if self.failures:
            self._logger.info("redis reachable again (%s)", self._what)
        self.failures = 0

    async def wait(self, err: BaseException) -> None:
        """Log (at most every 5 s) and sleep before the next attempt.

        Example:
            >>> asyncio.run(Backoff("x", logging.getLogger("x"), base_s=0.001).wait(OSError("down")))
        """
        now = time.monotonic()
        if now - self._last_log >= 5.0:
            self._last_log = now
            self._logger.warning("redis unreachable while %s (retrying): %s", self._what, err)
        await asyncio.sleep(self.next_delay())
