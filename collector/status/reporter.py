"""`StatusReporter`: keeps this replica's snapshot current and answers ``/status``.

The service's stats loop calls `StatusReporter.refresh` every few seconds (rates need a
history; on Redis the snapshot is also published to the group's board); ``/status`` calls
`StatusReporter.group`, which builds a fresh snapshot of this replica and adds the other
replicas' from the board.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from collector.common.metrics import Metrics
from collector.common.types import StoreStats
from collector.status.snapshot import RateWindow, build_snapshot, replica_id, samples

logger = logging.getLogger(__name__)

RATED = ("spans", "runs")
"""Totals of ``received`` that get a per-minute rate."""


class StatusBoard(Protocol):
    """Where the replicas of one store share snapshots (`collector.store.redis.status`)."""

    async def publish(self, replica: str, snapshot_json: str) -> None:
        """Write this replica's snapshot."""
        ...

    async def read(self) -> list[str]:
        """Every live replica's snapshot."""
        ...


class StatusReporter:
    """This replica's status (see the module docstring).

    Args:
        metrics: the service's instruments.
        stats: reads the store's counts.
        role: the replica's ``--role``.
        store: names the store, so a group's shared counts are counted once.
        board: the group's board (None: a single replica).
        governance: reads the judge budgets, breakers and parked jobs (`collector.work.governor.judge_report`).
        totals: reads the deployment's totals from the store (per scorer and judge model, every
            worker's, living or dead: `collector.store.totals.nested`), shown instead of the
            replicas' own counters for what they count.
        sending: how each durable sender of this replica stands (`collector.export.send.watch.SendWatch.state`):
            the snapshot's ``sending``.
        labels: the last label pull and the judge agreement figures (SPEC §11): the snapshot's ``labels``.

    Example:
        >>> import asyncio
        >>> async def demo():
        ...     async def stats(): return StoreStats(0, 0, 0, 0, 0)
        ...     reporter = StatusReporter(Metrics(), stats, role="all", store="sqlite:q.db")
        ...     return [s["role"] for s in (await reporter.group())["replicas"]]
        >>> asyncio.run(demo())
        ['all']
    """

    def __init__(self, metrics: Metrics, stats: Callable[[], Awaitable[StoreStats]], *, role: str, store: str,
                 board: StatusBoard | None = None,
                 governance: Callable[[], Awaitable[dict[str, Any]]] | None = None,
                 totals: Callable[[], Awaitable[dict[str, Any]]] | None = None,
                 sending: Callable[[], list[dict[str, Any]]] | None = None,
                 labels: Callable[[], dict[str, Any] | None] | None = None) -> None:
        self._labels = labels
        self._totals = totals
        self._governance = governance
        self._sending = sending
        self._governance_report: dict[str, Any] | None = None
        self.replica = replica_id()
        self._metrics = metrics
        self._stats = stats
        self._role = role
        self._store = store
        self._board = board
        self._window = RateWindow()

    async def _snapshot(self, stats: StoreStats | None) -> dict[str, Any]:
        found = samples(self._metrics.registry)
        snapshot = build_snapshot(found, stats, replica=self.replica, role=self._role, store=self._store,
                                  rates=self._window.per_minute())
        if self._sending is not None:  # forwarding, score export and sinks: ok, retrying, or held with the answer
            snapshot["sending"] = self._sending()
        if self._labels is not None and (labels := self._labels()) is not None:  # SPEC §11: labels, agreement
            snapshot["labels"] = labels
        if self._governance is not None:  # judge budgets, breakers, parked jobs (SPEC §8): the store's
            try:
                self._governance_report = await self._governance()
            except Exception:
                logger.debug("judge governance unavailable for status", exc_info=True)
            if self._governance_report is not None:
                snapshot["governance"] = self._governance_report
        if self._totals is not None:  # the store's: shared by the replicas of one store, like its counts
            try:
                snapshot["totals"] = await self._totals()
            except Exception:
                logger.debug("the store's totals are unavailable for status", exc_info=True)
        return snapshot

    async def refresh(self, stats: StoreStats | None) -> None:
        """Sample the totals for the rates; publish the snapshot to the group's board."""
        snapshot = await self._snapshot(stats)
        self._window.add({k: float(snapshot["received"].get(k, 0.0)) for k in RATED})
        if self._board is not None:
            await self._board.publish(self.replica, json.dumps(snapshot))

    async def group(self) -> dict[str, Any]:
        """``/status``: ``{"replicas": [snapshot, ...]}``, this replica's fresh, the group's from the board.
        """
        try:
            stats: StoreStats | None = await self._stats()
        except Exception:
            logger.debug("store counts unavailable for /status", exc_info=True)
            stats = None
        own = await self._snapshot(stats)
        replicas = [own]
        if self._board is not None:
            try:
                shared = await self._board.read()
            except Exception:
                logger.debug("the group's status board is unreadable", exc_info=True)
                shared = []
            replicas += [snap for snap in map(json.loads, shared) if snap.get("replica") != self.replica]
        return {"replicas": replicas}
