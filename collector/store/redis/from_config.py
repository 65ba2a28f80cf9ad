"""The Redis store of a deployment, opened with the settings the configuration gives it."""

from __future__ import annotations

from collector.config import Config
from collector.store.interface import store_session_rules
from collector.store.redis.partitioned import PartitionedRedisStore, open_redis_store
from collector.store.redis.store import RedisStore


def redis_store_for(config: Config, *, forwarding: bool) -> RedisStore | PartitionedRedisStore:
    """The store at ``[queue] url`` (one `RedisStore` per partition), with the forward log when
    ``forwarding`` (received spans pass through it to the export endpoint) and an outbox per
    enabled sink; ``[assembly]``, ``[sessions]``, ``[export]`` and ``[receiver]`` give its limits.

    Example:
        >>> from collector.config import QueueConfig
        >>> store = redis_store_for(Config(queue=QueueConfig(url="redis://127.0.0.1:6379/0", partitions=2)),
        ...                         forwarding=False)
        >>> type(store).__name__, len(store.partitions)
        ('PartitionedRedisStore', 2)
    """
    q, a, e = config.queue, config.assembly, config.export
    return open_redis_store(
        q.url, partitions=q.partitions, key_prefix=q.key_prefix, decision_wait=a.decision_wait,
        rootless_wait=a.rootless_wait, max_traces=a.max_traces,
        max_spans_per_trace=a.max_spans_per_trace, max_trace_age=a.max_trace_age,
        visibility_timeout_s=q.visibility_timeout_s, max_attempts=q.max_attempts,
        idempotency_ttl_s=q.retention_s, export_lease_s=max(5.0, 3 * e.timeout_s + 2),
        sinks=config.sinks.enabled(), forward=forwarding,
        max_forward_bytes=e.max_forward_backlog_bytes, retry_after_s=config.receiver.retry_after_s,
        session_rules=store_session_rules(config.sessions), wait_replicas=q.wait_replicas,
        wait_timeout_ms=q.wait_timeout_ms,
    )
