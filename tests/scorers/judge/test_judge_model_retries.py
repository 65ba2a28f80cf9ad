"""Issue 12, points 8 and 9: ``model_settings["max_retries"]`` works like the AI SDK's
``maxRetries`` and every HTTP attempt has a timeout (default 120 s, never litellm's 6000 s).

Through ``create_scorer(...).run(...)`` over real HTTP, on both transports. The backoff base
(1 s) is patched down to keep most tests fast; one test shows the real first delay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from judge_support import Reply, failed_judge_call, score_it

from scorers import Judge, JudgeError, ScorerRunError, StreamErrorRetryProcessor
from scorers.processors import RetryDecision

SLACK_S = 0.05  # timer granularity: a lower bound may be met this much early
HANG_S = 90.0  # a call still running then has hung (the default timeout, 120 s, did not apply)
NOT_THE_DEFAULT_S = 60.0
"""An upper bound that only tells a short configured timeout from the 120 s default (or
litellm's 6000 s): half of 120 s, so a busy machine (or litellm's first import) cannot reach it."""


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> float:
    from scorers import _judge_retry

    monkeypatch.setattr(_judge_retry, "MODEL_RETRY_BASE_DELAY_S", 0.01)
    return 0.01


def scorer(settings: dict[str, Any], **judge_kw: Any) -> Any:
    return score_it("retried", settings, **judge_kw)


def failure(caught: pytest.ExceptionInfo[ScorerRunError]) -> JudgeError:
    return failed_judge_call(caught, JudgeError)


# --------------------------------------------------------------------------- 8. max_retries


async def test_max_retries_retries_retryable_provider_errors(server: Any, settings: dict[str, Any],
                                                             fast_backoff: float, transport: str) -> None:
    server.script(Reply.error(503), Reply.error(429), Reply.json({"score": 0.5}))
    result = await scorer({**settings, "max_retries": 2}).run(output="a")
    (execution,) = result.judge["generate_score"].executions
    assert result.score == 0.5 and len(server.requests) == 3
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 1, 3)
    assert "max_retries" not in server.requests[0].body


async def test_max_retries_gives_up_after_that_many_retries(server: Any, settings: dict[str, Any],
                                                            fast_backoff: float, transport: str) -> None:
    server.default = Reply.error(500)
    with pytest.raises(ScorerRunError) as caught:
        await scorer({**settings, "max_retries": 2}).run(output="a")
    assert len(server.requests) == 3
    err = failure(caught)
    assert err.retryable and err.status_code == 500 and err.execution is not None
    assert (err.execution.model_call_count, err.execution.request_count) == (0, 3)


@pytest.mark.parametrize("status", [400, 401, 404])
async def test_max_retries_never_retries_other_errors(server: Any, settings: dict[str, Any],
                                                      fast_backoff: float, status: int) -> None:
    server.script(Reply.error(status), Reply.json({"score": 1}))
    with pytest.raises(ScorerRunError):
        await scorer({**settings, "max_retries": 3}).run(output="a")
    assert len(server.requests) == 1


async def test_max_retries_retries_connection_resets(server: Any, settings: dict[str, Any],
                                                     fast_backoff: float, transport: str) -> None:
    server.script(Reply.reset(), Reply.json({"score": 0.25}))
    assert (await scorer({**settings, "max_retries": 1}).run(output="a")).score == 0.25
    assert len(server.requests) == 2


async def test_model_retries_come_before_error_processors(server: Any, settings: dict[str, Any],
                                                          fast_backoff: float, transport: str) -> None:
    seen: list[tuple[int, int]] = []

    class Recorder:
        def process_api_error(self, error: BaseException, retry_count: int) -> RetryDecision:
            seen.append((len(server.requests), retry_count))
            return RetryDecision(retry=True)

    server.script(Reply.error(503), Reply.error(503), Reply.error(503), Reply.json({"score": 1}))
    result = await scorer({**settings, "max_retries": 1}, error_processors=[Recorder()]).run(output="a")
    assert result.score == 1.0
    assert seen == [(2, 0)]  # asked once, after the request and its one model-level retry
    (execution,) = result.judge["generate_score"].executions
    assert (execution.model_call_count, execution.request_count) == (1, 4)


async def test_the_default_is_no_model_retry(server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.error(503), Reply.json({"score": 1}))
    with pytest.raises(ScorerRunError):
        await scorer(settings).run(output="a")
    assert len(server.requests) == 1


async def test_the_first_backoff_is_one_second(server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.error(503), Reply.json({"score": 1}))
    await asyncio.wait_for(scorer({**settings, "max_retries": 1}).run(output="a"), timeout=HANG_S)
    first, second = server.requests
    # Timed at the server: the 1 s first delay, not 2 s (the second delay, or the AI SDK's
    # first one). The upper bound is as wide as that allows: up to 1 s for the client to take
    # the 503 in and send again, on however busy a machine.
    assert 1.0 - SLACK_S <= second.received_at - first.received_at < 2.0


async def test_retry_after_raises_the_backoff(server: Any, settings: dict[str, Any],
                                              fast_backoff: float) -> None:
    server.script(Reply.error(429, headers={"retry-after-ms": "300"}), Reply.json({"score": 1}))
    await scorer({**settings, "max_retries": 1}).run(output="a")
    first, second = server.requests
    # The 300 ms hint, not the 10 ms backoff; the upper bound only rules out a hint misread as
    # seconds (capped at 30 s).
    assert 0.3 - SLACK_S <= second.received_at - first.received_at < 15.0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_max_retries_must_be_a_non_negative_integer(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_retries"):
        Judge(model="openai/gpt-4o-mini", instructions="i", model_settings={"max_retries": bad})


# --------------------------------------------------------------------------- 9. timeouts


@pytest.fixture
async def silent_server() -> AsyncIterator[Any]:
    """A judge server that accepts connections and reads requests, and never answers."""
    from scorers._judge_transport import aclose_judge_clients

    writers: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)

    listener = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield SimpleNamespace(settings={"api_base": f"http://127.0.0.1:{port}/v1", "api_key": "k"},
                              connections=writers)
    finally:
        await aclose_judge_clients()
        for writer in writers:
            writer.close()
        listener.close()
        await listener.wait_closed()


async def test_a_server_that_never_answers_times_out(silent_server: Any, transport: str) -> None:
    started = time.monotonic()
    with pytest.raises(ScorerRunError) as caught:
        await asyncio.wait_for(scorer({**silent_server.settings, "timeout": 0.3}).run(output="a"), HANG_S)
    elapsed = time.monotonic() - started
    assert 0.3 - SLACK_S <= elapsed < NOT_THE_DEFAULT_S
    err = failure(caught)
    assert err.retryable and err.status_code == 408 and len(silent_server.connections) == 1


async def test_a_timeout_is_retried_by_max_retries(silent_server: Any, fast_backoff: float,
                                                   transport: str) -> None:
    settings = {**silent_server.settings, "timeout": 0.2, "max_retries": 1}
    started = time.monotonic()
    with pytest.raises(ScorerRunError) as caught:
        await asyncio.wait_for(scorer(settings).run(output="a"), HANG_S)
    assert 0.4 - SLACK_S <= time.monotonic() - started < NOT_THE_DEFAULT_S  # two attempts, each timed out
    execution = failure(caught).execution
    assert execution is not None and (execution.model_call_count, execution.request_count) == (0, 2)


async def test_a_slow_test_server_reply_times_out(server: Any, settings: dict[str, Any],
                                                  transport: str) -> None:
    # 0.6 s tells a 3 s reply from an immediate one with room for a busy machine (0.2 s once
    # timed the immediate retry out too, under the full suite)
    server.script(Reply.json({"score": 1}, latency_ms=3000), Reply.json({"score": 0.5}))
    result = await scorer({**settings, "timeout": 0.6},
                          error_processors=[StreamErrorRetryProcessor()]).run(output="a")
    assert result.score == 0.5 and len(server.requests) == 2


async def test_the_default_timeout_applies_when_none_is_set(silent_server: Any, transport: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``timeout`` in model_settings the judge's default bounds each attempt (120 s;
    patched down here), not litellm's 6000 s."""
    from scorers import _judge_route

    monkeypatch.setattr(_judge_route, "DEFAULT_JUDGE_TIMEOUT_S", 0.3)
    started = time.monotonic()
    with pytest.raises(ScorerRunError) as caught:
        await asyncio.wait_for(scorer(silent_server.settings).run(output="a"), HANG_S)
    # Seen failing at 5.05 s < 5.0 on a busy machine: the bound only has to rule out 120 s.
    assert 0.3 - SLACK_S <= time.monotonic() - started < NOT_THE_DEFAULT_S
    assert failure(caught).status_code == 408


def test_the_default_timeout_is_120_seconds() -> None:
    from scorers import _judge_route

    assert _judge_route.DEFAULT_JUDGE_TIMEOUT_S == 120.0


@pytest.mark.parametrize("bad", [0, -1, float("inf"), True])
def test_timeout_must_be_positive(bad: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        Judge(model="openai/gpt-4o-mini", instructions="i", model_settings={"timeout": bad})
