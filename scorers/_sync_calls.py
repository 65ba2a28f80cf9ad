"""Where a user's sync callable runs: on the event loop while it is quick, else in a thread.

Handing a call to a thread (``asyncio.to_thread``) costs about 0.15 ms of CPU: the executor's
future, the thread's wake-up and the loop's wake-up when it is done. For the typical sync
step (a few string operations, microseconds) that is ten times the step itself, and it was
the largest single cost of a function scorer in the daemon. Mastra runs every step on its
one event loop; we do too, but only for callables that have shown they are quick, so a
step that blocks (network, disk, a long computation) never stalls the loop's other jobs:

* it runs in a thread, timed there (wall clock), until `PROBE_CALLS` calls in a row returned
  within `INLINE_LIMIT_S` (a first call that imports or warms a cache does not count against
  it, and a callable that blocks every time never gets there);
* then it runs on the loop, still timed: `SLOW_CALLS_TO_DEMOTE` calls in a row over
  `DEMOTE_AFTER_S` move it back to a thread for good (logged once). One slow call is not
  enough, since a quick call can be preempted by the GIL's switch interval (5 ms). So a
  callable that turns out to block stalls the loop at most that many times.
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
SLOW_CALLS_TO_DEMOTE = 2


class SyncCallPlacement:
    """The running record of one sync callable's call times, and where its next call runs.

    Example (a quick function moves onto the loop after its probes; a slow one stays off it):
        >>> import asyncio
        >>> async def calls_in_turn(placement, fn):
        ...     return [await placement.call(fn) for _ in range(PROBE_CALLS + 1)]
        >>> quick = SyncCallPlacement("quick")
        >>> asyncio.run(calls_in_turn(quick, lambda: 1)), quick.on_loop
        ([1, 1, 1, 1], True)
        >>> slow = SyncCallPlacement("slow")
        >>> _ = asyncio.run(calls_in_turn(slow, lambda: time.sleep(2 * INLINE_LIMIT_S)))
        >>> slow.on_loop
        False
    """

    __slots__ = ("name", "_quick_in_a_row", "_slow_in_a_row", "_on_loop", "_off_loop_for_good")

    def __init__(self, name: str) -> None:
        self.name = name
        self._quick_in_a_row = 0
        self._slow_in_a_row = 0
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
                self._timed_on_loop(time.perf_counter() - started)
        if self._off_loop_for_good:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return await asyncio.to_thread(self._probe, fn, args, kwargs)

    def _probe(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run one probing call (in the executor's thread) and count it if it was quick."""
        started = time.perf_counter()
        result = fn(*args, **kwargs)
        if time.perf_counter() - started > INLINE_LIMIT_S:
            self._quick_in_a_row = 0
        else:
            self._quick_in_a_row += 1
            if self._quick_in_a_row >= PROBE_CALLS and not self._off_loop_for_good:
                self._on_loop, self._slow_in_a_row = True, 0
        return result

    def _timed_on_loop(self, elapsed: float) -> None:
        if elapsed <= DEMOTE_AFTER_S:
            self._slow_in_a_row = 0
            return
        self._slow_in_a_row += 1
        if self._slow_in_a_row >= SLOW_CALLS_TO_DEMOTE and not self._off_loop_for_good:
            self._on_loop, self._off_loop_for_good = False, True
            logger.warning("scorer callable %s took %.1f ms on the event loop %d times in a row; its "
                           "later calls run in a worker thread", self.name, elapsed * 1e3, self._slow_in_a_row)
