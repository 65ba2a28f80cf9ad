"""The distributed store: trace buffer, job queue (a Streams consumer group), dead letters
and outbox in Redis, shared by receivers and workers on many hosts.

`store.RedisStore` is the backend; `buffer`, `queue` and `outbox` are its three parts,
`scripts` the Lua that makes each step atomic, `keys` the key layout (hash-tagged: one
Cluster slot per deployment), `migrate` the one-time rename of keys an earlier version
wrote, `conn` the connection (one server, Sentinel or Cluster), retries and backoff while
Redis is away or failing over.

The names it exports are imported on first use (`collector._lazy`): importing one of its
modules alone does not import the others.
"""

from typing import TYPE_CHECKING

from collector._lazy import lazy_exports

if TYPE_CHECKING:
    from collector.store.redis.store import RedisStore

__all__ = ["RedisStore"]
__getattr__ = lazy_exports(__name__, {
    "RedisStore": "collector.store.redis.store",
})
