"""The label store (SPEC §11) as the commands beside a running daemon open it: ``tracescore
labels`` and ``agreement`` read and write the labels, cursors and kept scores of the store
``--config FILE`` names (``queue.url``). redis-py is imported only for a Redis store.
"""

from __future__ import annotations

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
