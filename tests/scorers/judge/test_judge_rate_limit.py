"""Requests-per-minute limits: the token bucket, its settings, and real judge calls under it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from judge_support import Reply

from scorers import set_judge_rate_limit
from scorers._judge import execute_judge_call
from scorers._judge_types import Judge
from scorers._rate_limit import (
    RateLimiter,
    configure_judge_rate_limits,
    get_judge_rate_limit,
    judge_rate_limiter,
)
from scorers.processors import StreamErrorRetryProcessor

MODEL = "openai/gpt-4o-mini"
SLACK_S = 0.02  # timer granularity: a lower bound may be met this much early


@pytest.fixture(autouse=True)
def no_limits_after() -> Iterator[None]:
    yield
    configure_judge_rate_limits(None, {})


def _most_in_any_window(times: list[float], window_s: float) -> int:
    times = sorted(times)
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] > window_s:
            start += 1
        most = max(most, end - start + 1)
    return most


async def test_a_burst_of_one_second_then_the_rate() -> None:
    limiter = RateLimiter(6000)  # 100 a second; holds one second's worth
    loop = asyncio.get_running_loop()
    start = loop.time()
    times, waited = [], []
    for _ in range(250):
        waited.append(await limiter.acquire())
        times.append(loop.time() - start)
    assert waited[:100] == [0.0] * 100  # the first 100 need no wait (as the limiter tells, not a clock)
    assert times[-1] >= (250 - 100) / 100 - SLACK_S  # the other 150 come at 100 a second
    assert _most_in_any_window(times, 1.0) <= 100 + 100 + 1


async def test_concurrent_waiters_are_served_in_arrival_order() -> None:
    limiter = RateLimiter(1200)  # 20 a second, bursts of 20
    order: list[int] = []

    async def take(i: int) -> None:
        await limiter.acquire()
        order.append(i)

    await asyncio.gather(*(take(i) for i in range(30)))
    assert order == list(range(30))


async def test_a_cancelled_waiter_takes_no_token() -> None:
    limiter = RateLimiter(60)  # one a second
    loop = asyncio.get_running_loop()
    before = loop.time()
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)  # the waiter runs to its sleep for a token (nothing it awaits before)
    waiter.cancel()  # long before its ~1 s wait could end, however busy the machine
    await asyncio.wait({waiter})
    assert waiter.cancelled()
    now = loop.time()
    limiter._refill(now)
    # Refilling since the first token (taken at `before` or later); nothing taken since.
    assert 0.0 < limiter.tokens <= min(1.0, (now - before) * limiter.rate) + 1e-9


def test_settings_default_per_model_and_exemption() -> None:
    assert get_judge_rate_limit(MODEL) is None
    set_judge_rate_limit(500)
    set_judge_rate_limit(60, model="openai/gpt-4o")
    set_judge_rate_limit(0, model="ollama/llama3")  # exempt from the default
    assert (get_judge_rate_limit(MODEL), get_judge_rate_limit("openai/gpt-4o"),
            get_judge_rate_limit("ollama/llama3")) == (500, 60, None)
    set_judge_rate_limit(None, model="openai/gpt-4o")  # back to the default
    assert get_judge_rate_limit("openai/gpt-4o") == 500
    set_judge_rate_limit(0)
    assert get_judge_rate_limit(MODEL) is None


@pytest.mark.parametrize("bad", [-1, 1.5, True, "100"])
def test_a_bad_limit_is_rejected(bad: Any) -> None:
    with pytest.raises(ValueError, match="requests per minute"):
        set_judge_rate_limit(bad)


async def test_a_limiter_exists_only_for_limited_models() -> None:
    set_judge_rate_limit(120, model=MODEL)
    limiter = judge_rate_limiter(MODEL)
    assert limiter is not None and limiter.requests_per_minute == 120
    assert judge_rate_limiter(MODEL) is limiter  # one bucket per model and loop
    assert judge_rate_limiter("hosted_vllm/other") is None


async def test_judge_calls_reach_the_provider_at_the_limited_rate(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    judge = Judge(model=MODEL, instructions="i", model_settings=settings)
    # Warm up (litellm's first call imports and builds its client: it would reach the server
    # late, and the spread measured there would look shorter than the one sent).
    await execute_judge_call(judge, "warm-up", output_schema=None)
    server.requests.clear()
    set_judge_rate_limit(1200, model=MODEL)  # 20 a second, bursts of 20
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.gather(*(execute_judge_call(judge, f"p{i}", output_schema=None) for i in range(50)))
    assert loop.time() - start >= (50 - 20) / 20 - SLACK_S  # the last 30 were sent at 20 a second
    times = [r.received_at for r in server.requests]
    assert len(times) == 50
    # What the provider saw: a burst of 20, then 20 a second (a few may arrive bunched up,
    # as the client's own CPU delays some sends more than others).
    assert _most_in_any_window(times, 0.5) <= 20 + 10 + 10  # unlimited: all 50 within ~0.1 s


async def test_every_attempt_takes_a_token(server: Any, settings: dict[str, Any]) -> None:
    """A retried request is a request to the provider: it waits for the rate too."""
    set_judge_rate_limit(60, model=MODEL)  # one a second, no burst
    server.script(Reply.error(429, headers={"retry-after-ms": "1"}))
    judge = Judge(model=MODEL, instructions="i", model_settings=settings,
                  error_processors=[StreamErrorRetryProcessor()])
    started = time.monotonic()  # before the first token: the second token is a second after it, at least
    value, execution = await execute_judge_call(judge, "p", output_schema=None)
    first, second = server.requests
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 1, 2)
    # Measured from before the first token, not from the first request's arrival: a first request
    # that a busy machine delays on its way would shorten the gap between arrivals, not the rate.
    assert second.received_at - started >= 1.0 - SLACK_S


async def test_unlimited_models_are_not_slowed(server: Any, settings: dict[str, Any]) -> None:
    set_judge_rate_limit(60, model="openai/gpt-4o")  # another model: one a second
    judge = Judge(model=MODEL, instructions="i", model_settings=settings)
    await asyncio.gather(*(execute_judge_call(judge, f"p{i}", output_schema=None) for i in range(20)))
    times = [r.received_at for r in server.requests]
    # 20 at one a second would take 19 s: half of that leaves a busy machine room.
    assert len(times) == 20 and max(times) - min(times) < 9.5
