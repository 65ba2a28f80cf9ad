"""Memory of large request bodies: a budget of body bytes in flight, and giving freed
memory back to the operating system.

A 16 MiB OTLP body becomes several times its size while it is received and decoded (the
transport's buffers, the bytes handed to Python, protobuf objects). `BodyBudget` bounds
the decoded bytes of the bodies being read and decoded at once (both listeners share it):
a body that does not fit waits for room a short while (`BodyBudget.hold`) or is refused
retryably (429 / RESOURCE_EXHAUSTED with a retry delay) instead of growing the heap. A body
whose size is not known yet (a gRPC message before it is read) holds the largest size
allowed until it is read, then its own size (`Reservation.settle`).

glibc keeps freed memory for reuse: `tune_malloc` makes it map blocks of 1 MiB or more
on their own (unmapped as soon as they are freed) instead of carving them out of the heap,
and keeps it from spreading the heap over one arena per thread; `MemoryReturner` asks it
(``malloc_trim``) to hand the remaining free pages back once large requests stop.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import os
from collections import deque
from collections.abc import Callable

from collector.common.errors import QueueFull

logger = logging.getLogger(__name__)

LARGE_BODY_BYTES = 1024 * 1024
"""Requests at least this large make `MemoryReturner` trim the heap afterwards."""


class BodyBudget:
    """Bytes of request bodies in flight, at most ``limit`` (one body alone always fits).

    Bodies are admitted in arrival order: while one waits in `hold`, a later one is not
    let past it.

    Example:
        >>> budget = BodyBudget(100)
        >>> budget.reserve(60); budget.reserve(30); budget.in_flight
        90
        >>> budget.reserve(20)
        Traceback (most recent call last):
        ...
        collector.common.errors.QueueFull: 90 bytes of request bodies are being processed; retry later
        >>> budget.release(90); budget.in_flight
        0
    """

    def __init__(self, limit: int, retry_after_s: float = 1.0) -> None:
        self.limit = limit
        self.in_flight = 0
        self.retry_after_s = retry_after_s
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _fits(self, size: int) -> bool:
        return not self.in_flight or self.in_flight + size <= self.limit

    def _full(self) -> QueueFull:
        return QueueFull(f"{self.in_flight} bytes of request bodies are being processed; retry later",
                         retry_after_s=self.retry_after_s)

    def reserve(self, size: int) -> None:
        """Count ``size`` bytes in flight now, or refuse.

        Raises:
            QueueFull: the budget cannot take them now (a body alone is always taken).
        """
        if self._waiters or not self._fits(size):
            raise self._full()
        self.in_flight += size

    def release(self, size: int) -> None:
        """Count ``size`` bytes as done (bodies waiting in `hold` that now fit go on)."""
        self.in_flight = max(0, self.in_flight - size)
        while self._waiters and self._fits(self._waiters[0][0]):
            wanted, waiter = self._waiters.popleft()
            if waiter.done():
                continue  # its caller gave up and is leaving
            self.in_flight += wanted
            waiter.set_result(None)

    def resize(self, old: int, new: int) -> None:
        """A body that held ``old`` bytes holds ``new`` bytes from now on (never refused).

        Example:
            >>> budget = BodyBudget(100); budget.reserve(80)
            >>> budget.resize(80, 5); budget.in_flight
            5
        """
        self.in_flight += new - old
        if new < old:
            self.release(0)

    async def take(self, size: int, wait_s: float) -> None:
        """Count ``size`` bytes in flight, waiting up to ``wait_s`` for them to fit (in
        arrival order); the caller releases them.

        Raises:
            QueueFull: no room came within ``wait_s``.

        Example:
            >>> async def wait_then_refuse() -> str:
            ...     budget = BodyBudget(100); budget.reserve(90)
            ...     asyncio.get_running_loop().call_later(0.01, budget.release, 90)
            ...     await budget.take(50, wait_s=5.0)  # room comes after 0.01 s
            ...     try:
            ...         await budget.take(60, wait_s=0.01)
            ...     except QueueFull:
            ...         return f"{budget.in_flight} in flight, 60 more refused"
            ...     return "taken"
            >>> asyncio.run(wait_then_refuse())
            '50 in flight, 60 more refused'
        """
        if not self._waiters and self._fits(size):
            self.in_flight += size
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, waiter)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(wait_s):
                await waiter
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return  # room came just as the time ran out: take it
            self._leave(entry)
            raise self._full() from None
        except BaseException:  # the caller was cancelled (its client went away)
            if waiter.done() and not waiter.cancelled():
                self.release(size)  # room came just then: give it back
            else:
                self._leave(entry)
            raise

    def _leave(self, entry: tuple[int, asyncio.Future[None]]) -> None:
        """Take a waiter that gave up out of the queue (the next in line may fit now)."""
        entry[1].cancel()
        if entry in self._waiters:
            self._waiters.remove(entry)
        self.release(0)

    def hold(self, size: int, wait_s: float) -> Reservation:
        """A `Reservation` of ``size`` bytes (``async with``), waiting up to ``wait_s`` for
        room in arrival order.

        Raises:
            QueueFull: (on entering) no room came within ``wait_s``.

        Example:
            >>> async def two() -> list[str]:
            ...     budget, seen = BodyBudget(100), []
            ...     async with budget.hold(100, wait_s=1.0) as first:
            ...         async def second() -> None:
            ...             async with budget.hold(50, wait_s=1.0):
            ...                 seen.append(f"second in, {budget.in_flight} in flight")
            ...         waiting = asyncio.create_task(second())
            ...         await asyncio.sleep(0.01)
            ...         seen.append(f"second waits, {budget.in_flight} in flight")
            ...         first.settle(40)  # the first body turned out to be 40 bytes
            ...         await waiting
            ...     try:
            ...         async with budget.hold(10, wait_s=0.01):
            ...             async with budget.hold(100, wait_s=0.01):
            ...                 pass
            ...     except QueueFull as err:
            ...         seen.append(f"refused, retry in {err.retry_after_s} s")
            ...     return seen
            >>> asyncio.run(two())
            ['second waits, 100 in flight', 'second in, 90 in flight', 'refused, retry in 1.0 s']
        """
        return Reservation(self, size, wait_s)


class Reservation:
    """Bytes one request holds in a `BodyBudget`, from entering ``async with`` to leaving it.

    Args:
        budget: where the bytes are counted.
        size: bytes to hold at first (the largest the body may be, when not known yet).
        wait_s: how long entering may wait for room before refusing.
    """

    def __init__(self, budget: BodyBudget, size: int, wait_s: float) -> None:
        self._budget = budget
        self.size = size
        self._wait_s = wait_s

    async def __aenter__(self) -> Reservation:
        await self._budget.take(self.size, self._wait_s)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._budget.release(self.size)

    def settle(self, size: int) -> None:
        """Hold ``size`` bytes from now on (the body's real size, once known)."""
        self._budget.resize(self.size, size)
        self.size = size


_M_ARENA_MAX = -8  # mallopt parameters (glibc malloc.h)
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1024 * 1024
"""Blocks at least this large are mapped on their own by glibc (`tune_malloc`)."""


def _mallopt() -> Callable[[int, int], int] | None:
    try:
        return getattr(ctypes.CDLL(None), "mallopt", None)  # type: ignore[no-any-return]
    except OSError:
        return None


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas (as ``MALLOC_ARENA_MAX`` would; an explicit setting of
    that variable wins): with one arena per decoding thread, the heap of large bodies
    fragments across arenas and is not given back. Returns whether the cap was set.

    Example:
        >>> isinstance(limit_malloc_arenas(), bool)
        True
    """
    mallopt = _mallopt()
    if "MALLOC_ARENA_MAX" in os.environ or mallopt is None:
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas) == 1)


def map_large_blocks(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Have glibc map every block of ``threshold`` bytes or more on its own (as
    ``MALLOC_MMAP_THRESHOLD_`` would; an explicit setting of that variable wins), so that
    freeing it gives its pages back at once. By default glibc raises the threshold to the
    size of the largest block freed (up to 32 MiB): after one 16 MiB body, every later
    body's buffers come from the heap, which keeps the pages. Returns whether it was set.

    Example:
        >>> isinstance(map_large_blocks(), bool)
        True
    """
    mallopt = _mallopt()
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold) == 1)


def tune_malloc() -> tuple[bool, bool]:
    """`limit_malloc_arenas` and `map_large_blocks`, for the daemon's process (call it
    before threads start); returns what each did.

    Example:
        >>> [isinstance(done, bool) for done in tune_malloc()]
        [True, True]
    """
    return limit_malloc_arenas(), map_large_blocks()


@functools.cache
def _malloc_trim() -> Callable[[], object] | None:
    try:
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # the process's own libc: no lookup
    except OSError:
        return None
    if trim is None:
        return None  # not glibc (musl, macOS): nothing to do
    return lambda: trim(0)


class MemoryReturner:
    """Trims the heap (off the event loop) ``quiet_s`` after the last large request.

    Example:
        >>> returner = MemoryReturner()
        >>> returner.after_request(10)  # small: nothing to give back
        False
    """

    def __init__(self, quiet_s: float = 1.0) -> None:
        self._trim = _malloc_trim()
        self._quiet = quiet_s
        self._timer: asyncio.TimerHandle | None = None

    def after_request(self, size: int) -> bool:
        """Note a finished request of ``size`` bytes; returns whether a trim is scheduled."""
        if self._trim is None or size < LARGE_BODY_BYTES:
            return False
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._quiet, self._start, loop)
        return True

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if self._trim is not None:
            loop.run_in_executor(None, self._trim)

    def cancel(self) -> None:
        """Drop a scheduled trim (shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
