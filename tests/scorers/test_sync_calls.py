"""Where sync step functions run (scorers._sync_calls): in a thread until they have shown they
are quick, then on the event loop; a slow one never stalls the loop's other work."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from scorers import create_scorer
from scorers._sync_calls import (
    DEMOTE_AFTER_S,
    INLINE_LIMIT_S,
    PROBE_CALLS,
    SLOW_CALLS_TO_DEMOTE,
    SyncCallPlacement,
    allow_sync_calls_on_loop,
)


def _recording(threads: list[int], pause_s: list[float] | None = None):  # type: ignore[no-untyped-def]
    def fn() -> int:
        threads.append(threading.get_ident())
        pause = pause_s.pop(0) if pause_s else 0.0
        if pause:
            time.sleep(pause)
        return len(threads)
    return fn


async def test_a_quick_callable_moves_onto_the_loop_after_its_probes() -> None:
    threads: list[int] = []
    placement = SyncCallPlacement("quick")
    results = [await placement.call(_recording(threads)) for _ in range(PROBE_CALLS + 2)]
    assert results == list(range(1, PROBE_CALLS + 3))
    loop_thread = threading.get_ident()
    assert all(t != loop_thread for t in threads[:PROBE_CALLS])
    assert threads[PROBE_CALLS:] == [loop_thread, loop_thread]


async def test_a_slow_probe_starts_the_count_again() -> None:
    threads: list[int] = []
    fn = _recording(threads, [0.0, 3 * INLINE_LIMIT_S])  # the second call is slow, the rest quick
    placement = SyncCallPlacement("slow once")
    for _ in range(PROBE_CALLS + 3):
        await placement.call(fn)
    loop_thread = threading.get_ident()
    assert loop_thread not in threads[:PROBE_CALLS + 2]  # 1 quick, 1 slow, then PROBE_CALLS quick
    assert threads[PROBE_CALLS + 2] == loop_thread


async def test_a_callable_slow_every_time_never_runs_on_the_loop() -> None:
    threads: list[int] = []
    fn = _recording(threads, [2 * INLINE_LIMIT_S] * (PROBE_CALLS + 3))
    placement = SyncCallPlacement("always slow")
    for _ in range(PROBE_CALLS + 3):
        await placement.call(fn)
    assert not placement.on_loop and threading.get_ident() not in threads


async def test_slow_calls_in_a_row_on_the_loop_move_it_back_to_a_thread_and_say_so(
        caplog: pytest.LogCaptureFixture) -> None:
    threads: list[int] = []
    slow = 2 * DEMOTE_AFTER_S
    fn = _recording(threads, [0.0] * PROBE_CALLS + [slow, 0.0] + [slow] * SLOW_CALLS_TO_DEMOTE)
    placement = SyncCallPlacement("becomes slow")
    with caplog.at_level(logging.WARNING, logger="scorers._sync_calls"):
        for _ in range(PROBE_CALLS + 2 + SLOW_CALLS_TO_DEMOTE + 2):
            await placement.call(fn)
    loop_thread = threading.get_ident()
    on_loop = PROBE_CALLS + 2 + SLOW_CALLS_TO_DEMOTE  # one slow call alone does not move it
    assert threads[PROBE_CALLS:on_loop] == [loop_thread] * (on_loop - PROBE_CALLS)
    assert loop_thread not in threads[on_loop:]
    (record,) = caplog.records
    assert "becomes slow" in record.getMessage() and "worker thread" in record.getMessage()


async def test_errors_come_out_of_either_place() -> None:
    calls = 0

    def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls in (2, PROBE_CALLS + 2):
            raise ValueError(f"call {calls}")

    placement = SyncCallPlacement("flaky")
    raised = []
    for _ in range(PROBE_CALLS + 3):
        try:
            await placement.call(flaky)
        except ValueError as err:
            raised.append(str(err))
    assert raised == ["call 2", f"call {PROBE_CALLS + 2}"]
    assert placement.on_loop  # failing calls are not probes, and a quick failure does not demote


async def test_a_blocking_step_never_stalls_the_loop() -> None:
    scorer = create_scorer(id="blocking", description="d", type="agent").generate_score(
        lambda run: time.sleep(0.3) or 1.0)
    gaps: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    stop = asyncio.Event()
    ticking = asyncio.create_task(ticker(stop))
    for _ in range(PROBE_CALLS + 3):
        result = await scorer.run(input={"input_messages": []}, output=[])
        assert result.score == 1.0
    stop.set()
    await ticking
    assert max(gaps) < 0.25  # each call sleeps 0.3 s: none of them ran on the loop


async def test_with_calls_on_the_loop_not_allowed_every_call_runs_in_a_thread() -> None:
    threads: list[int] = []
    placement = SyncCallPlacement("threaded")
    allow_sync_calls_on_loop(False)
    try:
        for _ in range(PROBE_CALLS + 2):
            await placement.call(_recording(threads))
    finally:
        allow_sync_calls_on_loop(True)
    assert len(threads) == PROBE_CALLS + 2 and threading.get_ident() not in threads
    assert not placement.on_loop  # nothing was probed meanwhile: allowed again, it probes first
    for _ in range(PROBE_CALLS + 1):
        await placement.call(_recording(threads))
    assert threading.get_ident() not in threads[:-1] and threads[-1] == threading.get_ident()


async def test_a_call_stalling_the_loop_is_named_in_the_log_and_moves_to_a_thread_at_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from scorers import _sync_calls

    monkeypatch.setattr(_sync_calls, "STALL_S", 0.2)
    threads: list[int] = []
    fn = _recording(threads, [0.0] * PROBE_CALLS + [1.6])  # the watch looks every second
    placement = SyncCallPlacement("hangs once")
    with caplog.at_level(logging.ERROR, logger="scorers._sync_calls"):
        for _ in range(PROBE_CALLS + 2):
            await placement.call(fn)
    loop_thread = threading.get_ident()
    assert threads[PROBE_CALLS] == loop_thread and threads[-1] != loop_thread  # one slow call was enough
    stalled = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert stalled and "hangs once has blocked its event loop" in stalled[0] and "sync_steps" in stalled[0]
