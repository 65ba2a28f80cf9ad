"""The label store (SPEC §11) as the commands beside a running daemon open it: ``tracescore
labels`` and ``agreement`` read and write the labels, cursors and kept scores of the store
``--config FILE`` names (``queue.url``). redis-py is imported only for a Redis store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from collector.config import Config
from collector.store.labels_interface import LabelStoreAdmin
from collector.store.sqlite.labels import SqliteLabelAdmin


def open_label_store(config: Config) -> LabelStoreAdmin:
    """The labels and kept scores of the store ``queue.url`` names; ``close()`` it after use.
    A partitioned Redis deployment keeps them under its own prefix, like its judge ledger.

    Example:
        >>> from collector.config import config_from_dict
        >>> type(open_label_store(config_from_dict({}, env={}))).__name__
        'SqliteLabelAdmin'
    """
    q = config.queue
    if q.kind == "redis":
        from collector.store.redis.conn import connect
        from collector.store.redis.keys import RedisKeys
        from collector.store.redis.labels import RedisLabelAdmin

        return RedisLabelAdmin(connect(q.url), RedisKeys(q.key_prefix))
    return SqliteLabelAdmin(q.sqlite_path)


async def open_label_store_made(config: Config) -> LabelStoreAdmin:
    """`open_label_store`, after making the SQLite queue file when there is none yet (labels
    imported, pulled or kept by a backfill before the daemon ever ran); ``close()`` it after use.

    Example:
        >>> import asyncio, os, tempfile
        >>> from collector.common.labels import Label
        >>> from collector.config import config_from_dict
        >>> path = os.path.join(tempfile.mkdtemp(), "q.db")
        >>> async def put():
        ...     store = await open_label_store_made(config_from_dict({"queue": {"url": f"sqlite:///{path}"}}, env={}))
        ...     return await store.put_labels([Label("q", "ab" * 16, None, None, True, "file")])
        >>> asyncio.run(put()), os.path.isfile(path)
        (1, True)
    """
    q = config.queue
    if q.kind != "redis" and not await asyncio.to_thread(Path(q.sqlite_path).is_file):
        from collector.store.sqlite.store import SqliteStore

        made = SqliteStore(q.sqlite_path)
        await made.start()
        await made.shutdown()
    return open_label_store(config)
