"""The Redis keys of labels and kept scores (SPEC §11), built from the deployment's hash-tagged
prefix like every other key (`collector.store.redis.keys.RedisKeys.prefix`), so that every
script keeps to the deployment's one Cluster slot. They belong to the deployment, not to a
partition: a `collector.store.redis.partitioned.PartitionedRedisStore` keeps them under its
own (``home``) prefix, as it does the judge ledger.

Layout (``P`` is the prefix; `collector.store.kept_rows` for members, rows and series)::

    P labels                 hash    JSON of Label.identity -> the label's JSON (the newest)
    P labels:cursors         hash    source -> its pull cursor
    P labels:lease           string  the pull lease's holder (PX: it expires)
    P kept:scorers           set     scorer ids with kept scores
    P kept:z:<scorer id>     zset    member (8 bytes) -> at: the scorer's scores by time
    P kept:m:<scorer id>     hash    "b" -> how many row hashes (fixed at the first score);
                                     series ref (4 bytes) -> series JSON
    P kept:r<n>:<scorer id>  hash    member -> row, for the members whose first two bytes
                                     (big-endian) modulo "b" are n: small enough to stay compact
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabelKeys:
    """The label store's keys of one deployment (``prefix``: `RedisKeys.prefix`, hash-tagged).

    Example:
        >>> keys = LabelKeys("{ts}:")
        >>> keys.labels, keys.cursors, keys.lease, keys.kept_scorers
        ('{ts}:labels', '{ts}:labels:cursors', '{ts}:labels:lease', '{ts}:kept:scorers')
        >>> keys.kept_times("relevancy"), keys.kept_meta("relevancy"), keys.kept_rows("relevancy", 7)
        ('{ts}:kept:z:relevancy', '{ts}:kept:m:relevancy', '{ts}:kept:r7:relevancy')
    """

    prefix: str

    @property
    def labels(self) -> str:
        """The labels (hash)."""
        return self.prefix + "labels"

    @property
    def cursors(self) -> str:
        """Each source's pull cursor (hash)."""
        return self.prefix + "labels:cursors"

    @property
    def lease(self) -> str:
        """The pull lease (string, with an expiry)."""
        return self.prefix + "labels:lease"

    @property
    def kept_scorers(self) -> str:
        """The scorer ids with kept scores (set)."""
        return self.prefix + "kept:scorers"

    @property
    def kept_base(self) -> str:
        """What the scripts build a scorer's keys from (``z:<id>``, ``m:<id>``, ``r<n>:<id>`` appended)."""
        return self.prefix + "kept:"

    def kept_times(self, scorer_id: str) -> str:
        """A scorer's kept scores by time (zset)."""
        return self.kept_base + "z:" + scorer_id

    def kept_meta(self, scorer_id: str) -> str:
        """A scorer's row-hash count and series (hash)."""
        return self.kept_base + "m:" + scorer_id

    def kept_rows(self, scorer_id: str, bucket: int) -> str:
        """One of a scorer's row hashes."""
        return f"{self.kept_base}r{bucket}:{scorer_id}"
