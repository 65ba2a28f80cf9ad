"""Bounded waits keep a cancellation that lands as the awaited thing completes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest

from collector.common.aio import bounded, cancel_and_wait, wait_event


async def _cancel_as_event_fires(
    wait: Callable[[asyncio.Event], Awaitable[object]], turns_between: int
) -> tuple[bool, asyncio.Task[object]]:
    """Set the event, let ``turns_between`` loop turns pass, cancel; (cancel accepted, task)."""
    event = asyncio.Event()
    task: asyncio.Task[object] = asyncio.ensure_future(wait(event))
    for _ in range(3):
        await asyncio.sleep(0)  # the task is now waiting on the event
    event.set()
    for _ in range(turns_between):
        await asyncio.sleep(0)
    accepted = task.cancel()
    await asyncio.wait({task})
    return accepted, task


@pytest.mark.parametrize("turns_between", [0, 1, 2, 3])
@pytest.mark.parametrize("helper", ["wait_event", "bounded"])
async def test_an_accepted_cancellation_always_ends_the_wait(helper: str, turns_between: int) -> None:
    def wait(event: asyncio.Event) -> Awaitable[object]:
        return wait_event(event, 10.0) if helper == "wait_event" else bounded(event.wait(), 10.0)

    accepted, task = await _cancel_as_event_fires(wait, turns_between)
    assert task.cancelled() is accepted


async def test_the_race_is_real_for_3_11_wait_for() -> None:
    """The reason the helpers exist: 3.11's ``wait_for`` accepts this cancellation, then loses it."""
    lost = []
    for turns in range(4):
        accepted, task = await _cancel_as_event_fires(lambda event: asyncio.wait_for(event.wait(), 10.0),
                                                      turns)
        lost.append(accepted and not task.cancelled())
    assert any(lost) is (sys.version_info < (3, 12))


async def test_wait_event_reports_set_or_timed_out() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 0.01) is True


async def test_bounded_times_out() -> None:
    with pytest.raises(TimeoutError):
        await bounded(asyncio.Event().wait(), 0.01)


async def _swallows_first_cancellation(ended: list[str]) -> None:
    """A loop like library code on 3.11: its first cancellation is lost, as `wait_for` loses it."""
    swallowed = False
    try:
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed = True
                asyncio.current_task().uncancel()  # type: ignore[union-attr]
    finally:
        ended.append("ended")


async def test_cancel_and_wait_cancels_again_until_the_task_ends() -> None:
    ended: list[str] = []
    task = asyncio.create_task(_swallows_first_cancellation(ended))
    await asyncio.sleep(0.02)
    assert await cancel_and_wait([task], timeout=30.0) == set()  # bounded: a failure detector
    assert task.cancelled() and ended == ["ended"]


async def test_one_cancel_is_not_enough_for_such_a_loop() -> None:
    """The reason `cancel_and_wait` repeats: a single cancel leaves this loop running."""
    ended: list[str] = []
    task = asyncio.create_task(_swallows_first_cancellation(ended))
    await asyncio.sleep(0.02)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.2)
    assert not done
    assert await cancel_and_wait([task], timeout=30.0) == set()  # bounded: a failure detector


async def test_cancel_and_wait_returns_what_would_not_end_and_retrieves_outcomes() -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                asyncio.current_task().uncancel()  # type: ignore[union-attr]

    async def fails() -> None:
        raise ValueError("boom")

    holdout, failed = asyncio.create_task(stubborn()), asyncio.create_task(fails())
    await asyncio.sleep(0)
    assert await cancel_and_wait([holdout, failed], timeout=0.2) == {holdout}
    assert isinstance(failed.exception(), ValueError)
    release.set()
    await asyncio.wait({holdout})
