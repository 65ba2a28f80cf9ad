"""Waiting for a condition in async tests: poll with a deadline, never sleep a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

WAIT_S = 30.0
"""`wait_until`'s default bound: a failure detector (a score cycle takes a second or two,
many more on a loaded machine), never a claim about speed."""
POLL_FIRST_S, POLL_MAX_S = 0.02, 0.1
"""`wait_until` polls every 20 ms at first, each pause a quarter longer, up to 100 ms: a condition
that holds soon is seen soon, and a wait of a minute (a daemon importing litellm on a loaded
machine) costs 600 polls, not 3,000 (many are HTTP requests to a daemon: CPU on both sides)."""


async def wait_until(predicate: Callable[[], bool | Awaitable[bool]], timeout: float = WAIT_S,  # noqa: ASYNC109
                     what: str = "condition") -> None:
    """Poll ``predicate`` (a bool, or an awaitable of one) until it holds; fail after ``timeout`` seconds.

    Example:
        >>> asyncio.run(wait_until(lambda: True))
        >>> asyncio.run(wait_until(lambda: False, timeout=0.05, what="never"))
        Traceback (most recent call last):
        ...
        AssertionError: timed out after 0.05s waiting for never
    """
    deadline = time.monotonic() + timeout
    pause = POLL_FIRST_S
    while True:
        value = predicate()
        if not isinstance(value, bool):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(pause)
        pause = min(pause * 1.25, POLL_MAX_S)
