"""Where a user's sync callable runs: on the event loop while it is quick, else in a thread.

Handing a call to a thread (``asyncio.to_thread``) costs about 0.15 ms of CPU: the executor's
future, the thread's wake-up and the loop's wake-up when it is done. For the typical sync
step (a few string operations, microseconds) that is ten times the step itself, and it was
the largest single cost of a function scorer in the daemon. Mastra runs every step on its
one event loop; we do too, but only for callables that have shown they are quick, so a
step that blocks (network, disk, a long computation) never stalls the loop's other jobs:

* the first `PROBE_CALLS` calls run in a thread and are timed there (wall clock);
* if each of them returned within `INLINE_LIMIT_S`, later calls run on the loop, still timed;
* a call on the loop that takes longer than `DEMOTE_AFTER_S` moves the callable back to a
  thread for good (logged once). So the loop is blocked at most once per callable by more
  than `DEMOTE_AFTER_S`, by the call that showed it slow.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

PROBE_CALLS = 3
INLINE_LIMIT_S = 0.001
DEMOTE_AFTER_S = 0.005


class SyncCallPlacement:
    """The running record of one sync callable's call times, and where its next call runs.

    Example (a quick function moves onto the loop after its probes; a slow one stays off it):
        >>> import asyncio
        >>> quick = SyncCallPlacement("quick")
        >>> async def twice_each(placement, fn):
        ...     return [await placement.call(fn) for _ in range(PROBE_CALLS + 1)]
        >>> asyncio.run(twice_each(quick, lambda: 1)), quick.on_loop
        ([1, 1, 1, 1], True)
        >>> slow = SyncCallPlacement("slow")
        >>> _ = asyncio.run(twice_each(slow, lambda: time.sleep(2 * INLINE_LIMIT_S)))
        >>> slow.on_loop
        False
    """

    __slots__ = ("name", "_probed", "_on_loop", "_off_loop_for_good")

    def __init__(self, name: str) -> None:
        self.name = name
        self._probed = 0
        self._on_loop = False
        self._off_loop_for_good = False

    @property
    def on_loop(self) -> bool:
        """Whether the next call runs on the event loop (else in the default executor)."""
        return self._on_loop

    async def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn(*args, **kwargs)`` where it belongs, and learn from how long it took."""
        if self._on_loop:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                if elapsed > DEMOTE_AFTER_S:
                    self._demote(elapsed)
        if self._off_loop_for_good:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return await asyncio.to_thread(self._probe, fn, args, kwargs)

    def _probe(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run one probing call (in the executor's thread) and count it if it was quick."""
        started = time.perf_counter()
        result = fn(*args, **kwargs)
        if time.perf_counter() - started > INLINE_LIMIT_S:
            self._off_loop_for_good = True
        elif not self._off_loop_for_good:
            self._probed += 1
            self._on_loop = self._probed >= PROBE_CALLS
        return result

    def _demote(self, elapsed: float) -> None:
        if self._off_loop_for_good:
            return
        self._on_loop, self._off_loop_for_good = False, True
        logger.warning("scorer callable %s took %.1f ms on the event loop; its later calls run in a "
                       "worker thread", self.name, elapsed * 1e3)
