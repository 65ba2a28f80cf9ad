"""Bounded waits keep a cancellation that lands as the awaited thing completes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest

from collector._aio import bounded, wait_event


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
