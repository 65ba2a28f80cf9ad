"""`on_signals`: a stop signal reaches the loop even when asyncio's self-pipe is full."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from collector.common.signals import on_signals


def _fill_self_pipe(loop: asyncio.AbstractEventLoop) -> int:
    """Fill the loop's self-pipe, as a burst of ``call_soon_threadsafe`` wake-ups does while
    the loop is busy; returns the bytes written. Reaches into asyncio's private socket: the
    test's point is the state in which asyncio's own signal delivery loses the signal."""
    sock = loop._csock  # type: ignore[attr-defined]
    written = 0
    try:
        while True:
            written += sock.send(b"\0" * 4096)
    except BlockingIOError:
        return written


async def _wait_for_signal(fill: bool, times: int = 1) -> list[str]:
    loop = asyncio.get_running_loop()
    calls: list[str] = []
    called = asyncio.Event()

    def stop() -> None:
        calls.append("stop")
        called.set()

    with on_signals(stop, [signal.SIGUSR1]) as installed:
        assert installed
        if fill:
            assert _fill_self_pipe(loop) > 0
        for _ in range(times):
            called.clear()
            os.kill(os.getpid(), signal.SIGUSR1)
            async with asyncio.timeout(30):  # a failure detector: delivery is immediate
                await called.wait()
        # A second delivery of the same signal would come from the byte the C handler wrote to
        # the self-pipe before the callback above ran: the loop reads it in its next select(),
        # which this sleep's timer has to go through, however busy the machine.
        await asyncio.sleep(0.1)
    return calls


def test_signal_is_delivered_once() -> None:
    assert asyncio.run(_wait_for_signal(fill=False)) == ["stop"]


def test_each_signal_calls_back() -> None:
    # A second SIGTERM cancels the demo again (3.11 can swallow one cancellation).
    assert asyncio.run(_wait_for_signal(fill=False, times=2)) == ["stop", "stop"]


# CPython reports the dropped wake-up byte as an unraisable BlockingIOError: expected here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_signal_is_delivered_when_the_self_pipe_is_full() -> None:
    # Without the Python-level handler this times out: the C handler's byte is dropped.
    assert asyncio.run(_wait_for_signal(fill=True)) == ["stop"]


def test_default_handlers_return_after_the_block() -> None:
    async def main() -> None:
        with on_signals(lambda: None, [signal.SIGUSR1]):
            assert signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None)
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL

    asyncio.run(main())


def test_outside_the_main_thread_nothing_is_installed() -> None:
    async def main() -> bool:
        with on_signals(lambda: None, [signal.SIGUSR1]) as installed:
            return installed

    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(asyncio.run(main())))
    thread.start()
    thread.join(10)
    assert result == [False]
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
