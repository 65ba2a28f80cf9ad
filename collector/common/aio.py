"""Asyncio waits that never lose a cancellation.

Python 3.11's ``asyncio.wait_for`` swallows a task's cancellation when it arrives in the
same loop iteration as the awaited thing completes (fixed in 3.12, where ``wait_for`` is
built on ``asyncio.timeout``). A daemon loop that swallows its own cancellation never stops,
so every bounded wait here uses ``asyncio.timeout``, which re-raises such a cancellation.
Libraries we call still use ``wait_for`` (redis-py), so stopping a task is `cancel_and_wait`,
which cancels again until the task has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

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


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], timeout: float = 5.0,  # noqa: ASYNC109
                          every: float = 0.05) -> set[asyncio.Task[Any]]:
    """Cancel ``tasks`` and wait for them to end, cancelling again every ``every`` seconds.

    One ``cancel()`` is not enough on 3.11: library code that awaits 3.11's ``wait_for``
    (redis-py does, around every socket write when ``socket_timeout`` is set) can swallow it,
    and a loop that swallowed its cancellation runs on. Each repeat lands on the task's next
    await. Returns the tasks still running after ``timeout`` seconds (empty when all ended);
    their outcomes (cancelled, or an exception) are retrieved, never raised.

    Example:
        >>> async def main() -> int:
        ...     task = asyncio.create_task(asyncio.sleep(10))
        ...     return len(await cancel_and_wait([task], timeout=1.0))
        >>> asyncio.run(main())
        0
    """
    tasks = list(tasks)
    pending = {task for task in tasks if not task.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(every, left))
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: not reported as "never retrieved"
    return pending


class LoopTask:
    """A component whose ``_loop`` runs as one task from `start` to `stop_loop` (stopped with
    `cancel_and_wait`, so a library that swallows one cancellation cannot keep it running).

    Example:
        >>> class Ticker(LoopTask):
        ...     ticks = 0
        ...     async def _loop(self) -> None:
        ...         while True:
        ...             self.ticks += 1
        ...             await asyncio.sleep(0.001)
        >>> async def run() -> tuple[bool, bool]:
        ...     ticker = Ticker()
        ...     await ticker.start()
        ...     await asyncio.sleep(0.02)
        ...     await ticker.stop_loop()
        ...     return ticker.ticks > 0, ticker.running
        >>> asyncio.run(run())
        (True, False)
    """

    _task: asyncio.Task[None] | None = None
    loop_name = "loop"
    """The task's name (shown by asyncio's debug output and task dumps)."""

    @property
    def running(self) -> bool:
        """Whether the loop's task has been started and not stopped."""
        return self._task is not None

    async def start(self) -> None:
        """Start the loop."""
        self._task = asyncio.create_task(self._loop(), name=self.loop_name)

    async def stop_loop(self) -> None:
        """Stop the loop (a step in progress is cancelled)."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])

    async def _loop(self) -> None:
        raise NotImplementedError
