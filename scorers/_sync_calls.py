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
  enough, since a quick call can be preempted by the GIL's switch interval (5 ms); one call
  over `STALL_S` is. So a callable that turns out to block stalls the loop at most that many
  times;
* a call on the loop still running after `STALL_S` is named in an error log (a watch thread
  looks every second), since nothing else on that loop runs meanwhile;
* `allow_sync_calls_on_loop(False)` (the daemon's ``[workers] sync_steps = "thread"``) keeps
  every sync callable in a thread, as before, for scorers that may hang.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

PROBE_CALLS = 3
INLINE_LIMIT_S = 0.001
DEMOTE_AFTER_S = 0.005
SLOW_CALLS_TO_DEMOTE = 2
STALL_S = 5.0

_on_loop_allowed = True
_calls_on_loop: dict[int, tuple[str, float]] = {}  # thread id -> (callable, started) of a call running on a loop
_watch_started = False
_watch_lock = threading.Lock()


def allow_sync_calls_on_loop(allowed: bool) -> None:
    """Whether quick sync callables may run on the event loop (the default) or always in a
    thread (for this process; callables already on the loop go back to threads).

    Example:
        >>> allow_sync_calls_on_loop(False); placement = SyncCallPlacement("f")
        >>> [asyncio.run(placement.call(lambda: 1)) for _ in range(PROBE_CALLS + 1)], placement.on_loop
        ([1, 1, 1, 1], False)
        >>> allow_sync_calls_on_loop(True)
    """
    global _on_loop_allowed
    _on_loop_allowed = allowed


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
        return self._on_loop and _on_loop_allowed

    async def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn(*args, **kwargs)`` where it belongs, and learn from how long it took."""
        if self._on_loop and _on_loop_allowed:
            thread = threading.get_ident()
            started = time.perf_counter()
            _calls_on_loop[thread] = (self.name, started)
            if not _watch_started:
                _start_watch()
            try:
                return fn(*args, **kwargs)
            finally:
                del _calls_on_loop[thread]
                self._timed_on_loop(time.perf_counter() - started)
        if self._off_loop_for_good or not _on_loop_allowed:
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
        if (self._slow_in_a_row >= SLOW_CALLS_TO_DEMOTE or elapsed > STALL_S) and not self._off_loop_for_good:
            self._on_loop, self._off_loop_for_good = False, True
            logger.warning("scorer callable %s took %.1f ms on the event loop (slow calls in a row: %d); "
                           "its later calls run in a worker thread", self.name, elapsed * 1e3, self._slow_in_a_row)


def _start_watch() -> None:
    """Start the thread that names a sync call stalling its event loop (once per process)."""
    global _watch_started
    with _watch_lock:
        if _watch_started:
            return
        threading.Thread(target=_watch_stalls, name="tracescore-stall-watch", daemon=True).start()
        _watch_started = True


def _watch_stalls() -> None:
    """Every second: log each call on a loop running longer than `STALL_S`, once per call."""
    told: set[tuple[int, float]] = set()
    while True:
        time.sleep(1.0)
        now = time.perf_counter()
        running = dict(_calls_on_loop)
        for thread, (name, started) in running.items():
            if now - started > STALL_S and (thread, started) not in told:
                told.add((thread, started))
                logger.error("scorer callable %s has blocked its event loop for %.0f s (it had been quick; "
                             "nothing else on that loop runs meanwhile); if it can hang, set [workers] "
                             'sync_steps = "thread"', name, now - started)
        told = {key for key in told if running.get(key[0], ("", -1.0))[1] == key[1]}
