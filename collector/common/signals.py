"""Stop signals that reach the event loop even when its self-pipe is full.

asyncio's ``loop.add_signal_handler`` learns of a signal only from the byte that the C
signal handler writes to the loop's self-pipe. That pipe is also where every
``call_soon_threadsafe`` from a worker thread writes its wake-up byte; when the loop has been
busy for a while under load, the pipe can be full, the write fails ("Exception ignored when
trying to write to the signal wakeup fd: BlockingIOError") and asyncio never sees the signal:
the daemon ignores SIGTERM. `on_signals` therefore delivers the callback from a Python-level
handler, which the interpreter runs in the main thread for every signal whatever became of
that byte, and which hands the callback to the loop with ``call_soon_threadsafe`` (its callback
queue does not depend on the pipe). asyncio's handler is kept only for the wake-up fd it sets:
a loop asleep in ``select()`` wakes on the byte and then runs the Python-level handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterable, Iterator
from types import FrameType


def _wake_only() -> None:
    """asyncio's handler: nothing to do, the Python-level handler delivers the callback."""


@contextlib.contextmanager
def on_signals(callback: Callable[[], object],
               signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[bool]:
    """Run ``callback`` in the running loop each time one of ``signals`` arrives, while the block runs.

    Yields True when the handlers are installed, False where they cannot be (not the main
    thread, or a platform without signals). On exit the signals get their default handlers
    back.

    Example:
        >>> import os
        >>> async def main() -> bool:
        ...     stopped = asyncio.Event()
        ...     with on_signals(stopped.set, [signal.SIGUSR1]):
        ...         os.kill(os.getpid(), signal.SIGUSR1)
        ...         async with asyncio.timeout(5):
        ...             await stopped.wait()
        ...     return stopped.is_set()
        >>> asyncio.run(main())
        True
    """
    loop = asyncio.get_running_loop()

    def deliver(signum: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(callback)

    installed: list[signal.Signals] = []
    try:
        for sig in signals:
            loop.add_signal_handler(sig, _wake_only)  # sets the wake-up fd: select() returns
            installed.append(sig)
            signal.signal(sig, deliver)  # the callback, even when the self-pipe was full
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here, or not the main thread
        for sig in installed:
            loop.remove_signal_handler(sig)
        installed.clear()
    try:
        yield bool(installed)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
