"""The distributed store: trace buffer, job queue (a Streams consumer group), dead letters
and outbox in Redis, shared by receivers and workers on many hosts.

`store.RedisStore` is the backend; `buffer`, `queue` and `outbox` are its three parts,
`scripts` the Lua that makes each step atomic, `keys` the key layout (hash-tagged: one
Cluster slot per deployment), `migrate` the one-time rename of keys an earlier version
wrote, `conn` the connection (one server, Sentinel or Cluster), retries and backoff while
Redis is away or failing over. `partitioned.PartitionedRedisStore` spreads one deployment
over several such key sets (``queue.partitions``, one slot each: `partitions` names them);
`partitioned.open_redis_store` picks one or the other.

The names it exports are imported on first use (`collector.common.lazy`): importing one of its
modules alone does not import the others.
"""

from typing import TYPE_CHECKING

from collector.common.lazy import lazy_exports

if TYPE_CHECKING:
    from collector.store.redis.partitioned import PartitionedRedisStore, open_redis_store
    from collector.store.redis.store import RedisStore

__all__ = ["PartitionedRedisStore", "RedisStore", "open_redis_store"]
__getattr__ = lazy_exports(__name__, {
    "PartitionedRedisStore": "collector.store.redis.partitioned",
    "RedisStore": "collector.store.redis.store",
    "open_redis_store": "collector.store.redis.partitioned",
})
