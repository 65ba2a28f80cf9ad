"""A worker's job timeout kept by one timer (`collector.work.deadlines`): it times out what
``asyncio.timeout`` would, and leaves every other cancellation as it was."""

from __future__ import annotations

import asyncio
import time

import pytest

from collector.work.deadlines import JobDeadlines


async def test_a_job_past_its_timeout_raises_timeout_error_within_one_check() -> None:
    deadlines = JobDeadlines(0.1, check_s=0.02)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with deadlines.guard():
            await asyncio.sleep(5)
    assert 0.1 <= time.monotonic() - started < 0.1 + 0.02 + 0.2  # bounded: timeout, one check, slack
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # the timeout's cancellation was taken back
    assert deadlines.in_flight == 0


async def test_only_the_late_jobs_are_cancelled_and_the_timer_stops_when_none_is_left() -> None:
    deadlines = JobDeadlines(0.15, check_s=0.02)

    async def job(seconds: float) -> str:
        try:
            async with deadlines.guard():
                await asyncio.sleep(seconds)
        except TimeoutError:
            return "timed out"
        return "done"

    outcomes = await asyncio.wait_for(asyncio.gather(job(0.01), job(5), job(0.05), job(5)), timeout=5)
    assert outcomes == ["done", "timed out", "done", "timed out"]
    assert deadlines.in_flight == 0
    await asyncio.sleep(0.05)
    assert deadlines._timer is None  # not armed while no job runs


async def _guarded_job(deadlines: JobDeadlines) -> asyncio.Task[None]:
    """A job waiting inside its guard (returned once it has entered it)."""
    entered = asyncio.Event()

    async def job() -> None:
        async with deadlines.guard():
            entered.set()
            await asyncio.sleep(5)

    task = asyncio.create_task(job())
    await asyncio.wait_for(entered.wait(), timeout=5)
    return task


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    deadlines = JobDeadlines(10.0, check_s=0.02)
    task = await _guarded_job(deadlines)
    task.cancel()  # the worker shutting down
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=5)
    assert deadlines.in_flight == 0


async def test_a_late_job_that_swallows_the_cancellation_ends_normally_and_is_not_left_cancelling() -> None:
    deadlines = JobDeadlines(0.05, check_s=0.01)
    async with deadlines.guard():
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            pass  # scorer code that catches everything
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # and no cancellation is still pending on the task


async def test_an_outside_cancel_that_comes_with_the_timeout_is_kept() -> None:
    # Cancelled by its deadline and by the worker before it runs again: the outside
    # cancellation wins, as with asyncio.timeout (CancelledError, not TimeoutError).
    deadlines = JobDeadlines(0.01, check_s=60.0)  # the check is made by hand below
    task = await _guarded_job(deadlines)
    await asyncio.sleep(0.03)
    deadlines._check()  # the deadline has passed: the timer's check cancels the job
    task.cancel()  # and the worker cancels it too, in the same turn of the loop
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=5)
    assert deadlines.in_flight == 0
