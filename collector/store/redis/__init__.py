"""The distributed store: trace buffer, job queue (a Streams consumer group), dead letters
and outbox in Redis, shared by receivers and workers on many hosts.

`store.RedisStore` is the backend; `buffer`, `queue` and `outbox` are its three parts,
`scripts` the Lua that makes each step atomic, `keys` the key layout, `conn` the
connection, retries and backoff while Redis is away.
"""

from collector.store.redis.store import RedisStore

__all__ = ["RedisStore"]
