"""Processor decision rules (pure) and processors on real judge calls."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from judge_support import Reply

from scorers._judge import execute_judge_call, get_judge_concurrency, set_judge_concurrency
from scorers._judge_types import Judge
from scorers._retry_after import iter_error_chain, parse_retry_after_ms, retry_after_ms_from_headers
from scorers.errors import JudgeError
from scorers.processors import (
    JudgeReply,
    PIIRedactor,
    RetryDecision,
    RetryMatcher,
    StreamErrorRetryProcessor,
    is_connection_reset_error,
    is_provider_retryable,
    is_terminal_auth_error,
)


class ProviderError(Exception):
    def __init__(self, status: int | None = None, retryable: bool | None = None,
                 headers: dict[str, str] | None = None, body: Any = None) -> None:
        super().__init__(f"provider error {status}")
        self.status_code = status
        if retryable is not None:
            self.is_retryable = retryable
        self.response_headers = headers or {}
        self.body = body


def decide(processor: StreamErrorRetryProcessor, error: BaseException, count: int = 0) -> RetryDecision | None:
    return asyncio.run(processor.process_api_error(error, count))


def chained(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


# --------------------------------------------------------------------------- decision rules


def test_provider_retryable_is_retried_deep_in_the_chain() -> None:
    error = chained(RuntimeError("wrapper"), ProviderError(503, retryable=True))
    assert decide(StreamErrorRetryProcessor(), error) == RetryDecision(retry=True, delay_ms=0)


def test_unknown_errors_are_not_retried_unless_asked() -> None:
    assert decide(StreamErrorRetryProcessor(), ValueError("odd")) is None
    assert decide(StreamErrorRetryProcessor(retry_unknown_errors=True), ValueError("odd")) is not None


def test_terminal_auth_errors_are_never_retried() -> None:
    processor = StreamErrorRetryProcessor(retry_unknown_errors=True, matchers=[lambda e: True])
    assert decide(processor, ProviderError(401, retryable=True)) is None
    assert decide(processor, chained(RuntimeError("x"), ProviderError(403))) is None
    assert is_terminal_auth_error(ProviderError(400, body={"error": {"code": "invalid_api_key"}}))
    assert is_terminal_auth_error(ProviderError(400, body={"type": "permission_denied"}))
    assert not is_terminal_auth_error(ProviderError(400, body={"error": {"code": "bad"}}))


def test_matcher_policy_outranks_provider_retryability() -> None:
    matcher = RetryMatcher(match=lambda e: isinstance(e, ProviderError), max_retries=3, delay_ms=40)
    processor = StreamErrorRetryProcessor(max_retries=1, delay_ms=5, matchers=[matcher])
    error = ProviderError(503, retryable=True)
    assert decide(processor, error, 2) == RetryDecision(retry=True, delay_ms=40)
    assert decide(processor, error, 3) is None
    # A matcher deeper in the chain still outranks a retryable wrapper.
    reset = chained(ProviderError(500, retryable=True), ConnectionResetError(104, "reset"))
    policy = StreamErrorRetryProcessor(matchers=[RetryMatcher(is_connection_reset_error, max_retries=5)])
    assert decide(policy, reset, 4) is not None


def test_first_matching_matcher_wins() -> None:
    first = RetryMatcher(match=lambda e: True, max_retries=0)
    second = RetryMatcher(match=lambda e: True, max_retries=9)
    assert decide(StreamErrorRetryProcessor(matchers=[first, second]), ValueError("x")) is None


def test_cause_chain_cycles_are_guarded() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert [str(e) for e in iter_error_chain(a)] == ["a", "b"]
    assert decide(StreamErrorRetryProcessor(), a) is None


def test_delay_sanitising_and_retry_after_cap() -> None:
    for bad in (-5, math.inf, math.nan, "x"):
        assert decide(StreamErrorRetryProcessor(delay_ms=bad), ProviderError(429, True)) == RetryDecision(True, 0)
    hinted = ProviderError(429, True, headers={"Retry-After": "120"})
    assert decide(StreamErrorRetryProcessor(), hinted) == RetryDecision(True, 30_000)
    assert decide(StreamErrorRetryProcessor(delay_ms=50_000), hinted) == RetryDecision(True, 50_000)
    assert decide(StreamErrorRetryProcessor(max_retry_after_ms=100), hinted) == RetryDecision(True, 100)


async def test_async_delay_function() -> None:
    async def delay(retry_count: int) -> float:
        return 7.0 * (retry_count + 1)

    processor = StreamErrorRetryProcessor(max_retries=5, delay_ms=delay)
    assert await processor.process_api_error(ProviderError(500, True), 2) == RetryDecision(True, 21.0)


def test_openai_stream_error_payload_matcher() -> None:
    payload = {"type": "error", "error": {"code": "rate_limit_exceeded", "message": "slow down"}}
    assert decide(StreamErrorRetryProcessor(), ProviderError(None, body=payload)) is not None
    failed = {"type": "response.failed",
              "response": {"error": {"code": "weird", "message": "You can retry your request"}}}
    assert decide(StreamErrorRetryProcessor(), ProviderError(None, body=failed)) is not None


def test_litellm_errors_count_as_provider_retryable() -> None:
    import httpx
    import litellm

    response = httpx.Response(429, request=httpx.Request("POST", "http://x"))
    assert is_provider_retryable(litellm.RateLimitError("slow", "openai", "m", response=response))
    assert is_provider_retryable(litellm.Timeout("slow", "m", "openai"))
    assert is_provider_retryable(litellm.APIConnectionError("down", "openai", "m"))
    bad = httpx.Response(400, request=httpx.Request("POST", "http://x"))
    assert not is_provider_retryable(litellm.BadRequestError("no", "m", "openai", response=bad))


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250", "retry-after": "9"}, 250.0),
        ({"RETRY-AFTER-MS": "bad", "Retry-After": "3"}, 3000.0),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "1.5"}, None),
        ({"retry-after": "1e3"}, None),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # in the past
        ({"retry-after-ms": "12.5"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_ms_from_headers(headers) == expected


def test_retry_after_first_usable_value_in_the_chain_wins() -> None:
    outer = ProviderError(429, headers={"retry-after": "soon"})
    chained(outer, ProviderError(429, headers={"retry-after-ms": "80"}))
    assert parse_retry_after_ms(outer) == 80.0


# --------------------------------------------------------------------------- PII


def test_pii_redactor_kinds() -> None:
    redactor = PIIRedactor()
    assert redactor.redact("write to a.b+c@mail.example.co.uk") == "write to [EMAIL]"
    assert redactor.redact("call (415) 555-0100 or +44 20 7946 0958") == "call [PHONE] or [PHONE]"
    assert redactor.redact("card 5500-0000-0000-0004 ok") == "card [CARD] ok"
    assert redactor.redact("order 1234567812345678") == "order 1234567812345678"  # fails Luhn
    assert redactor.redact("AKIAABCDEFGHIJKLMNOP and ghp_" + "a" * 36) == "[API_KEY] and [API_KEY]"
    assert redactor.redact("Authorization: Bearer abcdefghijklmnopqrstuvwxyz012") == (
        "Authorization: Bearer [API_KEY]")
    assert redactor.redact("score 0.75 on 2024-05-01, 12 items") == "score 0.75 on 2024-05-01, 12 items"
    assert redactor.redact("host 192.168.100.200, call 415-555-0100.") == "host 192.168.100.200, call [PHONE]."
    with pytest.raises(ValueError):
        PIIRedactor(kinds=["ssn"])


async def test_pii_never_reaches_the_server(server: Any, settings: dict[str, Any]) -> None:
    judge = Judge(model="openai/gpt-4o-mini", instructions="Judge for ops@corp.com",
                  model_settings=settings, input_processors=[PIIRedactor()])
    server.script(Reply.text("fine"))
    _, execution = await execute_judge_call(
        judge, "User jane@example.com, key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX", output_schema=None)
    sent = server.requests[0]
    assert sent.message_text("system") == "Judge for [EMAIL]"
    assert sent.message_text("user") == "User [EMAIL], key [API_KEY]"
    assert execution.prompt == "User jane@example.com, key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX"  # the step's


async def test_output_processor_sees_the_parsed_result_and_may_replace_it(
        server: Any, settings: dict[str, Any]) -> None:
    seen: list[JudgeReply] = []

    class Double:
        async def process_output_result(self, result: JudgeReply) -> JudgeReply:
            seen.append(result)
            return replace(result, object={"score": result.object["score"] * 2})

    judge = Judge(model="openai/gpt-4o-mini", instructions="i", model_settings=settings,
                  output_processors=[Double()])
    server.script(Reply.json({"score": 4}))
    value, execution = await execute_judge_call(judge, "p", output_schema={"type": "object"})
    assert seen[0].object == {"score": 4} and seen[0].text == '{"score": 4}'
    assert value == {"score": 8} and execution.output == {"score": 8}
    assert execution.raw_output == '{"score": 4}'  # the reply as the model sent it


async def test_a_failing_processor_is_a_judge_error(server: Any, settings: dict[str, Any]) -> None:
    class Broken:
        def process_input(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            raise RuntimeError("broken processor")

    judge = Judge(model="openai/gpt-4o-mini", instructions="i", model_settings=settings,
                  input_processors=[Broken()])
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge, "p", output_schema=None)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert caught.value.execution is not None and caught.value.execution.attempt_count == 0
    assert server.requests == []


# --------------------------------------------------------------------------- concurrency


@pytest.fixture
def concurrency() -> Any:
    before = get_judge_concurrency()
    yield set_judge_concurrency
    set_judge_concurrency(before)


async def until(check: Callable[[], object], what: str) -> None:
    """Poll ``check`` until it is true (bounded: a failure detector, not a speed claim)."""
    deadline = asyncio.get_running_loop().time() + 30
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


async def calls_at_the_cap(server: Any, calls: list[Awaitable[Any]], cap: int) -> None:
    """Run ``calls`` with every reply held until ``cap`` requests are in flight at once (then
    released): the cap is reached however the machine schedules them, and a request past it,
    were there one, has had a moment to come before the release."""
    gate = asyncio.Event()
    server.responder = lambda body: Reply.json({"score": 0.5}).held(gate)
    running = asyncio.gather(*calls)
    try:
        await until(lambda: server.in_flight >= cap, f"{cap} requests in flight")
        await asyncio.sleep(0.1)  # after the cap was reached: one more request would be in by now
    finally:
        gate.set()
    await running


async def test_concurrency_limit_per_model(server: Any, settings: dict[str, Any], concurrency: Any) -> None:
    concurrency(4)
    judge = Judge(model="openai/gpt-4o-mini", instructions="i", model_settings=settings)
    await calls_at_the_cap(server, [execute_judge_call(judge, f"p{i}", output_schema=None) for i in range(30)], 4)
    assert len(server.requests) == 30
    assert server.max_in_flight == 4


async def test_models_have_separate_limits(server: Any, settings: dict[str, Any], concurrency: Any) -> None:
    concurrency(3)
    judges = [Judge(model=m, instructions="i", model_settings=settings)
              for m in ("openai/gpt-4o-mini", "hosted_vllm/other")]
    await calls_at_the_cap(server, [execute_judge_call(judges[i % 2], "p", output_schema=None)
                                    for i in range(24)], 6)
    assert server.max_in_flight == 6


async def test_retry_delays_do_not_hold_a_slot(server: Any, settings: dict[str, Any], concurrency: Any) -> None:
    """The 429 is held until a second call waits for the only slot: the slot must go to it
    during the retry's delay, so the order is the same however slow the machine (with a 60 ms
    delay raced against the second call's start, a busy machine could reorder them)."""
    from scorers import _judge

    concurrency(1)
    gate = asyncio.Event()
    server.script(Reply.error(429, headers={"retry-after-ms": "60"}).held(gate))
    judge = Judge(model="openai/gpt-4o-mini", instructions="i", model_settings=settings,
                  error_processors=[StreamErrorRetryProcessor()])
    slow = asyncio.create_task(execute_judge_call(judge, "retried", output_schema=None))
    try:
        await until(lambda: len(server.requests) == 1, "the first (429) request")  # it holds the slot
        meanwhile = asyncio.create_task(execute_judge_call(judge, "meanwhile", output_schema=None))
        slots = _judge._semaphores._by_loop[asyncio.get_running_loop()].values()
        await until(lambda: any(slot._waiters for slot in slots), "the second call waiting for the slot")
    finally:
        gate.set()  # the 429 comes now
    await meanwhile
    await slow
    assert [r.message_text("user") for r in server.requests] == ["retried", "meanwhile", "retried"]


def test_concurrency_must_be_positive() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            set_judge_concurrency(bad)  # type: ignore[arg-type]
