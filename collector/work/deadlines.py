"""`JobDeadlines`: a worker's job timeout, kept by one timer for all of its jobs.

``asyncio.timeout`` schedules a timer when a job starts and cancels it when the job ends:
about 3 us a job, a twentieth of what a function scorer's job costs the worker. Here a job
notes its deadline in a dict on entry and takes it out on exit, and one loop timer, armed
only while jobs are in flight, looks every ``check_s`` seconds for jobs past their deadline
and cancels them. The block of a job so cancelled raises `TimeoutError`, by the protocol
``asyncio.timeout`` follows (``Task.cancelling`` / ``Task.uncancel``): a cancellation from
elsewhere (the worker shutting down) still comes out as `asyncio.CancelledError`, and a block
that swallowed the cancellation ends normally with its task no longer cancelling. A job may
run up to ``check_s`` past its timeout before it is cancelled.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

__all__ = ["JobDeadlines"]


class JobDeadlines:
    """The deadlines of the jobs in flight, and the timer that cancels the late ones.

    Example:
        >>> async def slow_then_quick():
        ...     deadlines = JobDeadlines(0.05, check_s=0.01)
        ...     try:
        ...         async with deadlines.guard():
        ...             await asyncio.sleep(1)
        ...     except TimeoutError:
        ...         late = "timed out"
        ...     async with deadlines.guard():
        ...         await asyncio.sleep(0)
        ...     return late, deadlines.in_flight
        >>> asyncio.run(slow_then_quick())
        ('timed out', 0)
    """

    __slots__ = ("_check_s", "_due", "_expired", "_loop", "_timer", "timeout_s")

    def __init__(self, timeout_s: float, check_s: float | None = None) -> None:
        self.timeout_s = timeout_s
        self._check_s = check_s if check_s is not None else min(1.0, max(timeout_s / 8, 0.01))
        self._due: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def in_flight(self) -> int:
        """How many guarded blocks are running."""
        return len(self._due)

    def guard(self) -> _Deadline:
        """An async context manager that times its block out after ``timeout_s`` (`TimeoutError`)."""
        return _Deadline(self)

    def _enter(self, task: asyncio.Task[Any]) -> None:
        loop = task.get_loop()
        self._due[task] = loop.time() + self.timeout_s
        if self._timer is None or self._loop is not loop:  # armed once per loop, while jobs run
            self._loop = loop
            self._timer = loop.call_later(self._check_s, self._check)

    def _check(self) -> None:
        """Cancel the jobs past their deadline; stay armed while any job is in flight."""
        loop = self._loop
        assert loop is not None
        now = loop.time()
        for task, due in self._due.items():  # cancel() only requests: the dict is not changed here
            if due <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        self._timer = loop.call_later(self._check_s, self._check) if self._due else None

    def _exit(self, task: asyncio.Task[Any], cancelling: int, cancelled: bool) -> bool:
        """Forget the task's deadline; whether its block must raise `TimeoutError`."""
        self._due.pop(task, None)
        if task not in self._expired:
            return False
        self._expired.discard(task)
        return task.uncancel() <= cancelling and cancelled


class _Deadline:
    """One job's guard (`JobDeadlines.guard`)."""

    __slots__ = ("_cancelling", "_deadlines", "_task")

    def __init__(self, deadlines: JobDeadlines) -> None:
        self._deadlines = deadlines
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a job deadline is kept only inside a task")
        self._task, self._cancelling = task, task.cancelling()
        self._deadlines._enter(task)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._task is not None
        if self._deadlines._exit(self._task, self._cancelling, exc_type is asyncio.CancelledError):
            raise TimeoutError from exc
