"""The store's three durable backlogs as `collector.export.send.loop.Backlog`s, and the gate
that holds a score back until its run's own spans were forwarded.

* `ForwardBacklog`: the forward log, in order. What a round releases is always the oldest
  requests (the loop stops at the first one it must keep), so releasing is "everything up to
  the last released position"; kept requests simply stay first in the log, and the loop's
  backoff paces the next attempt.
* `OutboxBacklog`: the OTLP score export's outbox; kept records are deferred in the store.
* `SinkBacklog`: one native sink's outbox; it also remembers since when the backend did not
  know a record's span (``waiting``).
"""

from __future__ import annotations

from collections.abc import Sequence

from collector.common.types import OutboxItem
from collector.store.interface import ForwardItem, ForwardLog, Outbox, SinkOutbox

MAX_BATCH_BYTES = 2 * 1024 * 1024  # below gRPC's default 4 MiB receive limit of most backends


class ForwardBacklog:
    """The forward log (`collector.store.interface.ForwardLog`), oldest first.

    Args:
        log: the store's forward log.
        max_bytes: about how many request bytes one round takes.
    """

    def __init__(self, log: ForwardLog, max_bytes: int = MAX_BATCH_BYTES) -> None:
        self.log = log
        self._max_bytes = max_bytes

    async def take(self, limit: int, flush: bool) -> Sequence[ForwardItem]:
        """The oldest requests not forwarded yet."""
        return await self.log.forward_pending(self._max_bytes, limit)

    async def release(self, items: Sequence[ForwardItem]) -> None:
        """Forget the requests up to the last of ``items`` (always the oldest ones)."""
        await self.log.forward_release(max(item.position for item in items))

    async def keep(self, items: Sequence[ForwardItem], delay_s: float, *, waiting: bool = False) -> None:
        """Nothing to do: kept requests stay first in the log."""

    def attempts(self, item: ForwardItem) -> int:
        """Not counted per request (the loop counts failures in a row)."""
        return 0

    def waiting_since(self, item: ForwardItem) -> float | None:
        """Never: an OTLP endpoint does not answer "not yet"."""
        return None


class OutboxBacklog:
    """The score export's outbox (`collector.store.interface.Outbox`).

    Args:
        outbox: the store's outbox.
        flush_within_s: when flushing before a stop, also take records due within this long
            (those held back until their run's spans were forwarded).
    """

    def __init__(self, outbox: Outbox, flush_within_s: float = 0.0) -> None:
        self.outbox = outbox
        self._flush_within = flush_within_s

    async def take(self, limit: int, flush: bool) -> Sequence[OutboxItem]:
        """Lease the records due now (or soon, when flushing)."""
        if flush and self._flush_within:
            return await self.outbox.pending(limit, self._flush_within)
        return await self.outbox.pending(limit)

    async def release(self, items: Sequence[OutboxItem]) -> None:
        """Delete exported (or given up) records."""
        await self.outbox.release([item.item_id for item in items])

    async def keep(self, items: Sequence[OutboxItem], delay_s: float, *, waiting: bool = False) -> None:
        """Defer records for ``delay_s``."""
        await self.outbox.defer([item.item_id for item in items], delay_s)

    def attempts(self, item: OutboxItem) -> int:
        """How often the record was deferred."""
        return item.attempts

    def waiting_since(self, item: OutboxItem) -> float | None:
        """Never: an OTLP endpoint does not answer "not yet"."""
        return None


class SinkBacklog:
    """One native sink's outbox (`collector.store.interface.SinkOutbox`)."""

    def __init__(self, outbox: SinkOutbox) -> None:
        self.outbox = outbox

    async def take(self, limit: int, flush: bool) -> Sequence[OutboxItem]:
        """Lease the records due now."""
        return await self.outbox.pending(limit)

    async def release(self, items: Sequence[OutboxItem]) -> None:
        """Delete sent (or given up) records."""
        await self.outbox.release([item.item_id for item in items])

    async def keep(self, items: Sequence[OutboxItem], delay_s: float, *, waiting: bool = False) -> None:
        """Defer records for ``delay_s`` (``waiting``: the backend did not know their span)."""
        await self.outbox.defer([item.item_id for item in items], delay_s, span_missing=waiting)

    def attempts(self, item: OutboxItem) -> int:
        """How often the record was deferred."""
        return item.attempts

    def waiting_since(self, item: OutboxItem) -> float | None:
        """When the backend first did not know the record's span."""
        return item.waiting_since


class ForwardGate:
    """Holds a score record back until the forward log was sent through its ``forward_mark``
    (the run's own spans reached the backend first: a backend that refuses them for a while,
    an experiment still missing, holds the run's scores too, instead of their waiting for a
    span that cannot arrive yet).

    Args:
        log: the forward log (None: spans are not forwarded; nothing is held back).
        hold_s: how long a record held back waits before it is looked at again.
    """

    def __init__(self, log: ForwardLog | None, hold_s: float = 1.0) -> None:
        self.log = log
        self.hold_s = hold_s

    async def split(self, items: list[OutboxItem]) -> tuple[list[OutboxItem], list[OutboxItem]]:
        """The records whose run's spans were forwarded, and those still held back."""
        if self.log is None or not items:
            return items, []
        state = await self.log.forward_state()
        ready = [item for item in items if state.caught_up(item.record.forward_mark)]
        return ready, [item for item in items if not state.caught_up(item.record.forward_mark)]
