"""Records a process wrote to its store, kept in memory so that reading them back skips parsing.

An embedded store is written and read by one process: the run a job was queued with, or the
score a settled job wrote to the outbox, is read back by the same process moments later.
`KeptRecords` holds those objects (bounded by the size of their JSON) so the read returns the
object itself instead of parsing the row's JSON again; a run keeps its agent-typed models
this way (`collector.types.RunRecord.typed`). The row stays the source of truth: a record is
used only when the row read names it (same key), is given out once, and a row written by
another process, or read again after a retry, is parsed as always.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_BUDGET_CHARS = 16 << 20
"""JSON characters of the records kept at most (the objects take a few times that in memory)."""


class KeptRecords(Generic[K, V]):
    """A bounded, insertion-ordered map of records by row key, each taken at most once.

    Args:
        budget_chars: the JSON size of the records kept at most; the oldest go first beyond it.

    Example:
        >>> kept = KeptRecords[str, str](budget_chars=10)
        >>> kept.keep("a", "first", chars=6); kept.keep("b", "second", chars=6)  # "a" goes: 12 > 10
        >>> kept.take("a"), kept.take("b"), kept.take("b")
        (None, 'second', None)
    """

    def __init__(self, budget_chars: int = DEFAULT_BUDGET_CHARS) -> None:
        self._budget = budget_chars
        self._chars = 0
        self._items: dict[K, tuple[V, int]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def keep(self, key: K, record: V, *, chars: int) -> None:
        """Keep ``record`` (its JSON is ``chars`` long) under ``key``, replacing what was kept there."""
        if chars > self._budget:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self._chars -= old[1]
        self._items[key] = (record, chars)
        self._chars += chars
        while self._chars > self._budget:
            self._chars -= self._items.pop(next(iter(self._items)))[1]

    def take(self, key: K) -> V | None:
        """The record kept under ``key``, removed (None when none is kept)."""
        found = self._items.pop(key, None)
        if found is None:
            return None
        self._chars -= found[1]
        return found[0]

    def clear(self) -> None:
        """Forget every record (the rows they came from may have been rolled back)."""
        self._items.clear()
        self._chars = 0
