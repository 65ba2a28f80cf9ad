"""The worker's heartbeat: the leases of the jobs it runs are renewed every third of the
lease (as BullMQ renews a job's lock), so a live worker's long judge call is never taken
from it, while a dead worker's leases lapse and its jobs are taken over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from collector.common.aio import cancel_and_wait
from collector.common.types import LeasedJob
from collector.store.interface import JobQueue

logger = logging.getLogger(__name__)


class LeaseHeartbeat:
    """Renews the leases of ``running()`` jobs every ``lease_s / 3`` seconds.

    Args:
        queue: the job queue holding the leases.
        running: the jobs the worker runs now.
        lease_s: the queue's lease (visibility timeout).
    """

    def __init__(self, queue: JobQueue, running: Callable[[], Sequence[LeasedJob]], lease_s: float) -> None:
        self._queue = queue
        self._running = running
        self._every = lease_s / 3
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start beating (in the running loop)."""
        self._task = asyncio.create_task(self._beat(), name="tracescore-worker-heartbeat")

    async def stop(self) -> None:
        """Stop beating; safe twice."""
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _beat(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(self._every)
            running = list(self._running())
            if not running:
                continue
            try:
                await self._queue.renew(running)
                failing = False
            except Exception as err:  # the lease outlives a few missed beats; the next one retries
                logger.log(logging.DEBUG if failing else logging.WARNING,
                           "renewing %d job leases failed: %s", len(running), err)
                failing = True
