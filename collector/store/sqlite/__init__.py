"""The embedded store: trace buffer, job queue, dead letters and outbox in one SQLite file.

`store.SqliteStore` is the backend; `runner` owns the connection on one thread
(group commit), `schema` the tables, `buffer` and `index` the trace buffer (whole
requests on disk, a per-trace index in memory), `body_log` the segment files that
hold large request bodies beside the database.

The names it exports are imported on first use (`collector.common.lazy`): importing one of its
modules alone does not import the others.
"""

from typing import TYPE_CHECKING

from collector.common.lazy import lazy_exports

if TYPE_CHECKING:
    from collector.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
__getattr__ = lazy_exports(__name__, {
    "SqliteStore": "collector.store.sqlite.store",
})
