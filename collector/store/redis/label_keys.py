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
    P kept:m:<scorer id>     hash    b: how many row hashes (fixed at the scorer's first score),
                                     n: scores kept, q: the last shard id;
                                     series ref (8 bytes) -> series JSON
    P kept:i:<scorer id>     zset    shard id -> the earliest time (ms) it holds: shard k holds
                                     the times from its bound up to the next shard's
    P kept:t<k>:<scorer id>  zset    a time shard: member (8 bytes) -> at (ms); at most about
                                     `collector.store.redis.labels.SHARD_SIZE` members, so Redis
                                     keeps it compact (a time shared by more stays whole)
    P kept:r<n>:<scorer id>  hash    member -> at (ms, a little-endian double) and the row, for
                                     the members whose first two bytes (big-endian) modulo b are n
    P shown:scorers          set     scorer ids with content their judges were shown (few-shot)
    P shown:c:<scorer id>    hash    item key -> JSON [trace, at, content] (`Shown`)
    P shown:a:<scorer id>    zset    item key -> at (ms): trimmed oldest first
    P shown:x:<scorer id>    hash    trace id -> the item key of its newest content kept

A scorer's scores ordered by time are its shards in the index's order, each in its own;
trimming takes the first shard's first members, scanning walks the shards from the one holding
the cursor's time. Small sorted sets and hashes are listpacks to Redis (a few bytes per entry
over the data), where one big sorted set costs over 100 bytes per member.
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
        >>> keys.kept_meta("relevancy"), keys.kept_index("relevancy")
        ('{ts}:kept:m:relevancy', '{ts}:kept:i:relevancy')
        >>> keys.kept_shard("relevancy", 3), keys.kept_rows("relevancy", 7)
        ('{ts}:kept:t3:relevancy', '{ts}:kept:r7:relevancy')
        >>> keys.shown_scorers, keys.shown_base, keys.shown_content("relevancy"), keys.shown_traces("relevancy")
        ('{ts}:shown:scorers', '{ts}:shown:', '{ts}:shown:c:relevancy', '{ts}:shown:x:relevancy')
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
        """What the scripts build a scorer's keys from (``m:<id>``, ``i:<id>``, ``t<k>:<id>``,
        ``r<n>:<id>`` appended)."""
        return self.prefix + "kept:"

    def kept_meta(self, scorer_id: str) -> str:
        """A scorer's row-hash count, score count, last shard id and series (hash)."""
        return self.kept_base + "m:" + scorer_id

    def kept_index(self, scorer_id: str) -> str:
        """A scorer's time shards by the earliest time each holds (zset)."""
        return self.kept_base + "i:" + scorer_id

    def kept_shard(self, scorer_id: str, shard: int) -> str:
        """One of a scorer's time shards (zset)."""
        return f"{self.kept_base}t{shard}:{scorer_id}"

    def kept_rows(self, scorer_id: str, bucket: int) -> str:
        """One of a scorer's row hashes."""
        return f"{self.kept_base}r{bucket}:{scorer_id}"

    @property
    def shown_scorers(self) -> str:
        """The scorer ids with content their judges were shown (set)."""
        return self.prefix + "shown:scorers"

    @property
    def shown_base(self) -> str:
        """What the scripts build a scorer's shown keys from (``c:<id>``, ``a:<id>``, ``x:<id>`` appended)."""
        return self.prefix + "shown:"

    def shown_content(self, scorer_id: str) -> str:
        """A scorer's shown content per item (hash)."""
        return self.shown_base + "c:" + scorer_id

    def shown_traces(self, scorer_id: str) -> str:
        """A scorer's newest shown item per trace (hash)."""
        return self.shown_base + "x:" + scorer_id
