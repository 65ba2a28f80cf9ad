"""The SQLite store of a single process, opened with the settings the configuration gives it."""

from __future__ import annotations

from collector.config import Config
from collector.store.interface import store_session_rules
from collector.store.sqlite.store import SqliteStore


def sqlite_store_for(config: Config, *, forwarding: bool) -> SqliteStore:
    """The store in ``[queue]``'s SQLite file, with the forward log when ``forwarding`` (received
    spans pass through it to the export endpoint) and an outbox per enabled sink; ``[assembly]``,
    ``[sessions]``, ``[export]`` and ``[receiver]`` give its limits.

    Example:
        >>> import os, tempfile
        >>> from collector.config import QueueConfig
        >>> path = os.path.join(tempfile.mkdtemp(), "q.db")
        >>> store = sqlite_store_for(Config(queue=QueueConfig(url=f"sqlite:///{path}")), forwarding=True)
        >>> type(store).__name__, store.forward_log is not None
        ('SqliteStore', True)
    """
    q, a, e = config.queue, config.assembly, config.export
    return SqliteStore(
        q.sqlite_path, decision_wait=a.decision_wait, rootless_wait=a.rootless_wait,
        max_traces=a.max_traces,
        max_spans_per_trace=a.max_spans_per_trace, max_trace_age=a.max_trace_age,
        visibility_timeout_s=q.visibility_timeout_s, max_attempts=q.max_attempts,
        sinks=config.sinks.enabled(),
        max_buffer_bytes=a.max_buffer_bytes, forward=forwarding,
        max_forward_bytes=e.max_forward_backlog_bytes, retry_after_s=config.receiver.retry_after_s,
        session_rules=store_session_rules(config.sessions),
    )
