"""Partitions of one deployment's Redis keys: their names, which one holds what, and their ids.

With ``[queue] partitions = N`` above 1 (a Redis Cluster where one slot would be a hot spot),
a deployment's work is spread over N complete key sets (`collector.store.redis.keys`), each
under its own hash tag, so each lands in its own slot: partition ``i``'s tag is chosen so its
slot lies in the middle of the ``i``-th of N equal slot ranges. ``redis-cli --cluster create``
gives each of M primaries one equal range, so with N a multiple of M every primary serves
N / M partitions. The deployment's own tag (the ``home`` keys) keeps what must be one:
the forward log (one order), the judge ledger (one budget), the status board and the
partition count itself.

What goes where (`PartitionMap`): a trace's spans by its trace id; a job (its idempotency
key, lease, settlement, outbox record, judge replies) by its key; a conversation by its
scope. Every per-partition script therefore still touches one slot. Ids that leave a
partition (outbox items, dead letters) carry their partition (`PartitionMap.item_id`,
`PartitionMap.letter_id`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from collector.store.redis.keys import RedisKeys

MAX_PARTITIONS = 64
"""The most partitions a deployment may have (``queue.partitions``)."""

T = TypeVar("T")


def partition_prefix(configured: str, index: int, count: int) -> str:
    """The key prefix of partition ``index`` of ``count``: the deployment's hash tag with a
    suffix chosen so that its slot lies in the middle half of the ``index``-th of ``count``
    equal slot ranges (so partitions spread over a Cluster's primaries as evenly as its slots).

    Example:
        >>> from redis.crc import key_slot
        >>> [partition_prefix("ts:", i, 3) for i in range(3)]
        ['{ts|p0|31}:', '{ts|p1|3}:', '{ts|p2|7}:']
        >>> [key_slot(partition_prefix("ts:", i, 3).encode()) * 3 // 16384 for i in range(3)]
        [0, 1, 2]
        >>> partition_prefix("{ts}:prod:", 1, 2)
        '{ts|p1|2}:prod:'
    """
    keys = RedisKeys(configured)
    tagged, tag = keys.prefix, keys.hash_tag
    inner = tag[1:-1]
    width = REDIS_CLUSTER_HASH_SLOTS / count
    low, high = index * width + width / 4, (index + 1) * width - width / 4
    suffix = 0
    while not low <= key_slot(f"{inner}|p{index}|{suffix}".encode()) < high:
        suffix += 1
    return tagged.replace(tag, f"{{{inner}|p{index}|{suffix}}}", 1)


@dataclass(frozen=True)
class PartitionMap:
    """Which of ``count`` partitions holds a trace, a job or a conversation, and the ids that
    carry their partition out of it.

    Example:
        >>> parts = PartitionMap(3)
        >>> parts.of_trace(bytes(16)) == parts.of_trace(bytes(16)), 0 <= parts.of_key("t/s/q/1") < 3
        (True, True)
        >>> parts.item_id(2, 41), parts.split_item(125)
        (125, (2, 41))
        >>> parts.letter_id(1, "1733-0"), parts.split_letter("1:1733-0")
        ('1:1733-0', (1, '1733-0'))
        >>> parts.items_by_partition([125, 3, 5]), parts.letters_by_partition(["1:9-0", "x", "1:8-0"])
        ({2: [41, 1], 0: [1]}, {1: ['9-0', '8-0']})
    """

    count: int

    def of_trace(self, trace_id: bytes) -> int:
        """The partition of a trace (its raw 16-byte id)."""
        return zlib.crc32(trace_id) % self.count

    def of_key(self, key: str) -> int:
        """The partition of a job (by `collector.common.types.ScoreJob.key`) or a conversation (scope)."""
        return zlib.crc32(key.encode()) % self.count

    def item_id(self, partition: int, local: int) -> int:
        """An outbox item's id outside its partition."""
        return local * self.count + partition

    def split_item(self, item_id: int) -> tuple[int, int]:
        """(partition, the id within it) of an id from `item_id`."""
        return item_id % self.count, item_id // self.count

    @staticmethod
    def letter_id(partition: int, local: str) -> str:
        """A dead letter's id outside its partition: ``partition:stream id``."""
        return f"{partition}:{local}"

    def split_letter(self, letter_id: str) -> tuple[int, str] | None:
        """(partition, stream id) of an id from `letter_id`; None for an id that names none."""
        head, sep, local = letter_id.partition(":")
        if not sep or not head.isdigit() or int(head) >= self.count:
            return None
        return int(head), local

    def items_by_partition(self, item_ids: Iterable[int]) -> dict[int, list[int]]:
        """Outbox item ids (from `item_id`) by partition, as the ids within it."""
        pairs = self.group(map(self.split_item, item_ids), lambda pair: pair[0])
        return {partition: [local for _, local in some] for partition, some in pairs.items()}

    def letters_by_partition(self, letter_ids: Iterable[str]) -> dict[int, list[str]]:
        """Dead-letter ids (from `letter_id`) by partition, as stream ids; ids that name none are left out."""
        named = [pair for pair in map(self.split_letter, letter_ids) if pair is not None]
        pairs = self.group(named, lambda pair: pair[0])
        return {partition: [local for _, local in some] for partition, some in pairs.items()}

    def group(self, items: Iterable[T], of: Callable[[T], int]) -> dict[int, list[T]]:
        """``items`` by partition (``of`` names an item's), each group in the given order.

        Example:
            >>> PartitionMap(2).group([1, 2, 3, 4], lambda n: n % 2)
            {1: [1, 3], 0: [2, 4]}
        """
        groups: dict[int, list[T]] = {}
        for item in items:
            groups.setdefault(of(item), []).append(item)
        return groups


class Rotation:
    """Every partition's index, starting one further at each call, so that calls asking the
    partitions in turn do not always ask the same one first.

    Example:
        >>> turns = Rotation(3)
        >>> turns.next(), turns.next(), turns.next()
        ([1, 2, 0], [2, 0, 1], [0, 1, 2])
    """

    def __init__(self, count: int) -> None:
        self._count = count
        self._first = 0

    def next(self) -> list[int]:
        """The partitions in the order to ask them this time."""
        self._first = (self._first + 1) % self._count
        return [(self._first + step) % self._count for step in range(self._count)]
