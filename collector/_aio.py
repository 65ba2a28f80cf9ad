"""Asyncio waits that never lose a cancellation.

Python 3.11's ``asyncio.wait_for`` swallows a task's cancellation when it arrives in the
same loop iteration as the awaited thing completes (fixed in 3.12, where ``wait_for`` is
built on ``asyncio.timeout``). A daemon loop that swallows its own cancellation never stops,
so every bounded wait here uses ``asyncio.timeout``, which re-raises such a cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout: float) -> bool:  # noqa: ASYNC109
    """Wait until ``event`` is set or ``timeout`` seconds pass; True when it was set.

    Example:
        >>> asyncio.run(wait_event(asyncio.Event(), 0.01))
        False
    """
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def bounded(awaitable: Awaitable[T], timeout: float) -> T:  # noqa: ASYNC109
    """Await ``awaitable`` for at most ``timeout`` seconds (``TimeoutError`` after that).

    Unlike 3.11's ``asyncio.wait_for``, a cancellation of the caller always propagates.

    Example:
        >>> asyncio.run(bounded(asyncio.sleep(0, "done"), 1.0))
        'done'
    """
    async with asyncio.timeout(timeout):
        return await awaitable
