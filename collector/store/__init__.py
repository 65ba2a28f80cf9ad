"""Store: everything the daemon must not lose, behind one interface, on SQLite or Redis.

The trace buffer (what assembly appends and decides from), the job queue (what workers
take and settle), dead letters, and the outbox (results waiting for export) live in one
backend, so that a settled job's result is written with its acknowledgement:
`sqlite` (one durable file, the embedded default) or `redis` (Redis Streams, for
receivers and workers on many hosts). `interface` holds the roles the stages call;
`split` cuts OTLP requests into the per-trace chunks and summaries the buffers keep;
`kept_rows` is the compact form both keep judge agreement's scores in.
The two backends never import each other; both import only this folder's own modules
and `collector.common` (the records of `types`, `errors`, `aio`, ...).
"""

from collector.store.interface import JobQueue, Outbox, RequestBuffer, Store, TraceBuffer

__all__ = ["JobQueue", "Outbox", "RequestBuffer", "Store", "TraceBuffer"]
