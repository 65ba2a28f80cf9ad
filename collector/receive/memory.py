"""Memory of large request bodies: a budget of body bytes in flight, and giving freed
memory back to the operating system.

A 16 MiB OTLP body becomes several times its size while it is decoded (protobuf objects,
the cut by trace). `BodyBudget` bounds the bytes of bodies being read and decoded at once
(both listeners share it): a body over the budget is refused retryably (429 /
RESOURCE_EXHAUSTED) instead of growing the heap. glibc keeps freed memory in its arenas
for reuse, so after large requests `MemoryReturner` asks it (``malloc_trim``) to hand the
free pages back, and `limit_malloc_arenas` keeps it from spreading the heap over one
arena per thread: the resident size falls back once the burst is over.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import os
from collections.abc import Callable

from collector.errors import QueueFull

logger = logging.getLogger(__name__)

LARGE_BODY_BYTES = 1024 * 1024
"""Requests at least this large make `MemoryReturner` trim the heap afterwards."""


class BodyBudget:
    """Bytes of request bodies in flight, at most ``limit`` (one body alone always fits).

    Example:
        >>> budget = BodyBudget(100)
        >>> budget.reserve(60); budget.reserve(30); budget.in_flight
        90
        >>> budget.reserve(20)
        Traceback (most recent call last):
        ...
        collector.errors.QueueFull: 90 bytes of request bodies are being processed; retry later
        >>> budget.release(90); budget.in_flight
        0
    """

    def __init__(self, limit: int, retry_after_s: float = 1.0) -> None:
        self.limit = limit
        self.in_flight = 0
        self._retry_after = retry_after_s

    def reserve(self, size: int) -> None:
        """Count ``size`` bytes in flight.

        Raises:
            QueueFull: the budget cannot take them now (a body alone is always taken).
        """
        if self.in_flight and self.in_flight + size > self.limit:
            raise QueueFull(f"{self.in_flight} bytes of request bodies are being processed; retry later",
                            retry_after_s=self._retry_after)
        self.in_flight += size

    def release(self, size: int) -> None:
        """Count ``size`` bytes as done."""
        self.in_flight = max(0, self.in_flight - size)


_M_ARENA_MAX = -8  # mallopt parameter (glibc malloc.h)


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas (as ``MALLOC_ARENA_MAX`` would; an explicit setting of
    that variable wins): with one arena per decoding thread, the heap of large bodies
    fragments across arenas and is not given back. Returns whether the cap was set.

    Example:
        >>> isinstance(limit_malloc_arenas(), bool)
        True
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    except OSError:
        return False
    return bool(mallopt is not None and mallopt(_M_ARENA_MAX, arenas) == 1)


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
