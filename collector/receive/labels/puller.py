"""Pull people's labels into the store (SPEC §11): one process of a deployment at a time.

Every process that runs `LabelPuller` asks, each ``poll_s``, for the deployment's pull lease
(`LabelStore.take_label_lease`); the one that gets it, and finds the last pull older than
``poll_s`` (the store's ``@pulled`` record, shared by every replica), reads each source from its
stored cursor, page by page: a page's labels are kept (`LabelStore.put_labels`), then its
cursor, so a pull that stops half-way resumes where it stopped and nothing is counted twice.
A source that is down, refuses the credentials or answers junk is logged with its cause and
tried again at the next poll; the other sources are pulled all the same.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from collector.common.aio import LoopTask
from collector.common.labels import PULLED
from collector.receive.labels import LabelReader
from collector.store.labels_interface import LabelStore

logger = logging.getLogger(__name__)

LEASE_S = 900.0
"""How long a pull may hold the lease without renewing it (renewed after every page)."""


@dataclass
class SourcePull:
    """What one pull read of one source: labels read, labels new or changed, and the error it
    stopped at (None: it read to the end)."""

    source: str
    read: int = 0
    added: int = 0
    error: str | None = None


@dataclass
class PullRecord:
    """The last pull of a deployment (kept in the store, shown by every replica's status).

    Example:
        >>> rec = PullRecord(holder="h:1:a", started=1.0, finished=2.5, sources=[SourcePull("phoenix", 3, 2)])
        >>> PullRecord.from_json(rec.to_json()) == rec
        True
    """

    holder: str
    started: float
    finished: float
    sources: list[SourcePull] = field(default_factory=list)

    def to_json(self) -> str:
        """The record as JSON text."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> PullRecord:
        """The record `to_json` wrote."""
        data = json.loads(text)
        return cls(data["holder"], data["started"], data["finished"],
                   [SourcePull(**s) for s in data.get("sources", [])])


async def last_pull(store: LabelStore) -> PullRecord | None:
    """The deployment's last pull (None: none yet, or unreadable)."""
    text = await store.label_cursor(PULLED)
    if not text:
        return None
    try:
        return PullRecord.from_json(text)
    except (ValueError, KeyError, TypeError):
        return None


def cause_of(err: BaseException) -> str:
    """An error as a log line names it: its type and message.

    Example:
        >>> cause_of(ConnectionRefusedError("connect to 127.0.0.1:6006 refused"))
        'ConnectionRefusedError: connect to 127.0.0.1:6006 refused'
    """
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


async def pull_source(store: LabelStore, reader: LabelReader, *, since_s: float, names: Sequence[str],
                      renew: Callable[[], Any] | None = None) -> SourcePull:
    """Read ``reader`` from its stored cursor to the end: keep each page, then its cursor.
    Errors are caught and returned in `SourcePull.error` (what was kept before them stays)."""
    result = SourcePull(reader.source)
    try:
        cursor = await store.label_cursor(reader.source)
        async for labels, next_cursor in reader.pages(cursor, since_s, names):
            result.read += len(labels)
            result.added += await store.put_labels(labels) if labels else 0
            await store.set_label_cursor(reader.source, next_cursor)
            if renew is not None:
                await renew()
    except asyncio.CancelledError:
        raise
    except Exception as err:
        result.error = cause_of(err)
        logger.warning("pulling labels from %s stopped: %s (kept %d new; retried at the next poll)",
                       reader.source, result.error, result.added)
    return result


class LabelPuller(LoopTask):
    """Pulls every configured source each ``poll_s`` (`start`, `stop`), when this process holds the lease.

    Args:
        store: the deployment's store (labels, cursors, lease).
        readers: the sources (`[labels] from`).
        names: the names of the scorers this deployment runs (given to the readers).
        since_s: how far back a source's first pull reads.
        poll_s: how often a pull is due.
        holder: this process's name (the lease's holder).
        on_pull: called after each pull this process made (the agreement figures are refreshed).
    """

    loop_name = "label-puller"

    def __init__(self, store: LabelStore, readers: Sequence[LabelReader], names: Sequence[str], *,
                 since_s: float, poll_s: float, holder: str, on_pull: Callable[[PullRecord], Any] | None = None) -> None:
        self._store = store
        self._readers = list(readers)
        self._names = list(names)
        self._since_s = since_s
        self._poll_s = poll_s
        self.holder = holder
        self._on_pull = on_pull
        self.last: PullRecord | None = None

    async def pull(self, *, due_only: bool = False) -> PullRecord | None:
        """One pull of every source, if this process gets the lease (None: another one holds it,
        or, with ``due_only``, the deployment's last pull is younger than ``poll_s``)."""
        if not await self._store.take_label_lease(self.holder, LEASE_S):
            return None
        try:
            if due_only:
                done = await last_pull(self._store)
                if done is not None and time.time() - done.finished < self._poll_s:
                    return None
            record = PullRecord(self.holder, time.time(), 0.0)
            renew = lambda: self._store.take_label_lease(self.holder, LEASE_S)  # noqa: E731
            for reader in self._readers:
                record.sources.append(await pull_source(self._store, reader, since_s=self._since_s,
                                                        names=self._names, renew=renew))
            record.finished = time.time()
            await self._store.set_label_cursor(PULLED, record.to_json())
        finally:
            await self._store.release_label_lease(self.holder)
        self.last = record
        logger.info("pulled labels: %s", ", ".join(
            f"{s.source} {s.added} new of {s.read}" + (f" (stopped: {s.error})" if s.error else "")
            for s in record.sources) or "no sources")
        if self._on_pull is not None:
            self._on_pull(record)
        return record

    async def stop(self) -> None:
        """Stop pulling (a pull in progress is cancelled; its kept pages and cursors stay)."""
        await self.stop_loop()

    async def _loop(self) -> None:
        while True:
            try:
                await self.pull(due_only=True)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the store is unreachable: try again at the next poll
                logger.warning("label pull skipped: %s", cause_of(err))
            await asyncio.sleep(self._poll_s)
