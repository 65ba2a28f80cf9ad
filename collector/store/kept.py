"""Records a process wrote to its store, kept in memory so that reading them back skips parsing.

An embedded store is written and read by one process: the run a job was queued with, or the
score a settled job wrote to the outbox, is read back by the same process moments later.
`KeptRecords` holds those objects so the read returns the object itself instead of parsing
the row's JSON again; a run keeps its agent-typed models this way
(`collector.common.types.RunRecord.typed`). The row stays the source of truth: a record is used only
when the row read names it (same key), is given out once, and a row written by another
process, or read again after a retry, is parsed as always.

Memory is bounded by the records' JSON size (a record in memory takes about 8 times its
JSON). Rows are read back oldest first, so once the bound is reached new records are not
kept (evicting the oldest would drop exactly the ones read next): a backlog costs the bound
and is parsed past it. A record not read back within ``max_age_s`` (its row left otherwise)
is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_BUDGET_CHARS = 4 << 20
"""JSON characters of the records kept at most (about 35 MB of objects)."""

DEFAULT_MAX_AGE_S = 120.0
"""A record not read back this long after it was kept is dropped."""


class KeptRecords(Generic[K, V]):
    """A bounded map of records by row key, each taken at most once.

    Args:
        budget_chars: the JSON size of the records kept at most; beyond it new ones are not kept.
        max_age_s: a record kept longer is dropped (when another is kept).

    Example:
        >>> kept = KeptRecords[str, str](budget_chars=10)
        >>> kept.keep("a", "first", chars=6); kept.keep("b", "second", chars=6)  # 12 > 10: "b" not kept
        >>> kept.take("a"), kept.take("b"), kept.take("a")
        ('first', None, None)
    """

    def __init__(self, budget_chars: int = DEFAULT_BUDGET_CHARS, max_age_s: float = DEFAULT_MAX_AGE_S) -> None:
        self._budget = budget_chars
        self._max_age = max_age_s
        self._chars = 0
        self._items: dict[K, tuple[V, int, float]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def keep(self, key: K, record: V, *, chars: int, now: float | None = None) -> None:
        """Keep ``record`` (its JSON is ``chars`` long) under ``key``, replacing what was kept
        there, unless the budget is spent."""
        now = time.monotonic() if now is None else now
        self._drop(key)
        while self._items:  # the oldest first: one left unread too long is dropped
            oldest = next(iter(self._items))
            if now - self._items[oldest][2] <= self._max_age:
                break
            self._drop(oldest)
        if self._chars + chars > self._budget:
            return
        self._items[key] = (record, chars, now)
        self._chars += chars

    def take(self, key: K) -> V | None:
        """The record kept under ``key``, removed (None when none is kept)."""
        found = self._items.pop(key, None)
        if found is None:
            return None
        self._chars -= found[1]
        return found[0]

    def _drop(self, key: K) -> None:
        found = self._items.pop(key, None)
        if found is not None:
            self._chars -= found[1]

    def clear(self) -> None:
        """Forget every record (the rows they came from may have been rolled back)."""
        self._items.clear()
        self._chars = 0
