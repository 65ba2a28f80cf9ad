"""Exact request counts for the JSON fallback and every processor retry rule."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from judge_support import SCORE_SCHEMA, Reply

from scorers._judge import execute_judge_call
from scorers._judge_types import Judge
from scorers._structured_output import SYSTEM_SUFFIX
from scorers.errors import JudgeError, JudgeOutputError
from scorers.processors import (
    RetryDecision,
    RetryMatcher,
    StreamErrorRetryProcessor,
    is_bad_request_error,
    is_connection_reset_error,
)

SLACK_S = 0.005  # timer granularity: a lower bound may be met this much early


def judge(settings: dict[str, Any], **kw: Any) -> Judge:
    return Judge(model="openai/gpt-4o-mini", instructions="Grade it.", model_settings=settings, **kw)


# --------------------------------------------------------------------------- JSON fallback


async def test_junk_then_valid_retries_once_with_system_injection(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    server.script(Reply.text("I think it is good", usage=usage), Reply.json({"score": 0.9}, usage=usage))
    value, execution = await execute_judge_call(judge(settings), "Score it.", output_schema=SCORE_SCHEMA)
    assert value == {"score": 0.9}
    assert len(server.requests) == 2
    first, second = server.requests
    assert "response_format" in first.body  # auto -> native for gpt-4o-mini
    assert "response_format" not in second.body  # fallback: system injection only
    assert second.message_text("system").endswith(SYSTEM_SUFFIX)
    assert second.message_text("user") == "Score it."
    assert (execution.attempt_count, execution.model_call_count) == (2, 2)  # the fallback: 2 and 2
    assert (execution.usage.input_tokens, execution.usage.output_tokens,
            execution.usage.total_tokens) == (20, 40, 60)


async def test_validation_failure_triggers_the_fallback(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.json({"score": "high"}), Reply.json({"score": 0.3}))
    value, execution = await execute_judge_call(judge(settings), "Score it.", output_schema=SCORE_SCHEMA)
    assert value == {"score": 0.3} and execution.attempt_count == 2 and len(server.requests) == 2


@pytest.mark.parametrize("fallback", ["inline", True])
async def test_the_fallback_injection_mode_can_be_chosen(server: Any, settings: dict[str, Any],
                                                         fallback: Any) -> None:
    server.script(Reply.text("nope"), Reply.json({"score": 1}))
    value, _ = await execute_judge_call(judge(settings, fallback_json_prompt_injection=fallback),
                                        "Score it.", output_schema=SCORE_SCHEMA)
    first, second = server.requests
    assert value == {"score": 1} and "response_format" in first.body
    assert "response_format" not in second.body
    if fallback == "inline":  # Mastra's fallbackJsonPromptInjection: "inline"
        assert second.message_text("user").startswith("Score it.\n")
        assert "Return only valid JSON" in second.message_text("user")
        assert not second.message_text("system").endswith(SYSTEM_SUFFIX)
    else:
        assert second.message_text("user") == "Score it."
        assert second.message_text("system").endswith(SYSTEM_SUFFIX)


def test_the_fallback_injection_mode_is_validated() -> None:
    with pytest.raises(ValueError, match="fallback_json_prompt_injection"):
        Judge(model="openai/x", instructions="i", fallback_json_prompt_injection="auto")  # type: ignore[arg-type]


async def test_two_bad_replies_fail_quoting_the_reply(server: Any, settings: dict[str, Any],
                                                      transport: str) -> None:
    server.script(Reply.text("junk one"), Reply.text("Totally not JSON, sorry " + "x" * 400))
    with pytest.raises(JudgeOutputError) as caught:
        await execute_judge_call(judge(settings), "Score it.", output_schema=SCORE_SCHEMA)
    err = caught.value
    assert len(server.requests) == 2
    assert "Totally not JSON, sorry" in str(err)
    assert err.raw_output is not None and err.raw_output.startswith("Totally not JSON")
    assert err.retryable is False
    assert err.execution is not None
    assert err.execution.status == "failed" and err.execution.attempt_count == 2
    assert err.execution.model_call_count == 2
    assert err.execution.raw_output is not None and err.execution.raw_output.startswith("Totally")
    assert err.execution.error is not None and err.execution.error["type"] == "JudgeOutputError"
    assert err.execution.usage.total_tokens == 30


async def test_plain_text_steps_have_no_fallback(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.text(""))
    value, execution = await execute_judge_call(judge(settings), "Explain.", output_schema=None)
    assert value == "" and execution.attempt_count == 1 and len(server.requests) == 1


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_provider_errors_never_trigger_the_json_fallback(
        server: Any, settings: dict[str, Any], status: int, transport: str) -> None:
    server.script(Reply.error(status))
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge(settings), "Score it.", output_schema=SCORE_SCHEMA)
    assert len(server.requests) == 1
    err = caught.value
    assert not isinstance(err, JudgeOutputError)
    assert err.status_code == status and err.retryable is True
    assert err.execution is not None and err.execution.attempt_count == 1
    assert (err.execution.model_call_count, err.execution.request_count) == (0, 1)  # sent, no reply
    assert err.execution.error == {"type": type(err.__cause__).__name__,
                                   "message": str(err.__cause__), "status_code": status}


# --------------------------------------------------------------------------- provider errors


async def test_without_error_processors_a_429_fails_at_once(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    import litellm

    server.script(Reply.error(429, headers={"retry-after": "7"}))
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge(settings), "Hi", output_schema=None)
    err = caught.value
    assert len(server.requests) == 1
    assert isinstance(err.__cause__, litellm.RateLimitError)
    assert (err.retryable, err.retry_after_s, err.status_code) == (True, 7.0, 429)


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (403, False), (404, False), (408, True),
                              (409, True), (500, True), (502, True), (503, True)])
async def test_retryable_flag_follows_litellm(server: Any, settings: dict[str, Any], status: int,
                                              retryable: bool) -> None:
    server.script(Reply.error(status))
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge(settings), "Hi", output_schema=None)
    assert caught.value.retryable is retryable
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [408, 429, 500, 503])
async def test_default_retry_processor_retries_transient_errors_once(
        server: Any, settings: dict[str, Any], status: int, transport: str) -> None:
    server.script(Reply.error(status), Reply.text("ok"))
    value, execution = await execute_judge_call(
        judge(settings, error_processors=[StreamErrorRetryProcessor()]), "Hi", output_schema=None)
    assert value == "ok"
    assert len(server.requests) == 2
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 1, 2)


async def test_default_retry_processor_stops_at_its_max_retries(server: Any, settings: dict[str, Any]) -> None:
    server.default = Reply.error(503)
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge(settings, error_processors=[StreamErrorRetryProcessor()]),
                                 "Hi", output_schema=None)
    assert len(server.requests) == 2
    assert caught.value.execution is not None
    execution = caught.value.execution
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 0, 2)


@pytest.mark.parametrize("status", [400, 401, 403])
async def test_not_retried_by_default(server: Any, settings: dict[str, Any], status: int,
                                      transport: str) -> None:
    server.script(Reply.error(status), Reply.text("ok"))
    with pytest.raises(JudgeError):
        await execute_judge_call(
            judge(settings, error_processors=[StreamErrorRetryProcessor(max_retries=3)]),
            "Hi", output_schema=None)
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_are_never_retried(server: Any, settings: dict[str, Any], status: int) -> None:
    server.default = Reply.error(status, error_type="authentication_error")
    processor = StreamErrorRetryProcessor(max_retries=3, retry_unknown_errors=True,
                                          matchers=[lambda e: True])
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge(settings, error_processors=[processor]), "Hi", output_schema=None)
    assert len(server.requests) == 1 and caught.value.status_code == status


async def test_bad_request_matcher_retries_400(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.error(400), Reply.text("ok"))
    processor = StreamErrorRetryProcessor(matchers=[is_bad_request_error])
    value, execution = await execute_judge_call(judge(settings, error_processors=[processor]),
                                                "Hi", output_schema=None)
    assert value == "ok" and len(server.requests) == 2
    assert (execution.model_call_count, execution.request_count) == (1, 2)


async def test_connection_reset_is_retried_and_matched(server: Any, settings: dict[str, Any],
                                                       transport: str) -> None:
    seen: list[bool] = []
    matcher = RetryMatcher(match=is_connection_reset_error, max_retries=2,
                           on_retry=lambda err, count, delay: seen.append(True))
    server.script(Reply.reset(), Reply.reset(), Reply.text("ok"))
    value, execution = await execute_judge_call(
        judge(settings, error_processors=[StreamErrorRetryProcessor(matchers=[matcher])]),
        "Hi", output_schema=None)
    assert value == "ok" and len(server.requests) == 3
    # two resets, then a reply: three requests, one model call
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 1, 3)
    assert seen == [True, True]  # the matcher's policy (2 retries) outranks the default (1)


async def test_connection_reset_without_processors_fails_retryable(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.reset())
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge(settings), "Hi", output_schema=None)
    assert len(server.requests) == 1 and caught.value.retryable is True


async def test_max_processor_retries_caps_the_processor(server: Any, settings: dict[str, Any]) -> None:
    server.default = Reply.error(503)
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(
            judge(settings, error_processors=[StreamErrorRetryProcessor(max_retries=50)],
                  max_processor_retries=2), "Hi", output_schema=None)
    assert len(server.requests) == 3
    execution = caught.value.execution
    assert execution is not None and (execution.model_call_count, execution.request_count) == (0, 3)


async def test_implicit_budget_is_ten(server: Any, settings: dict[str, Any]) -> None:
    server.default = Reply.error(500)
    with pytest.raises(JudgeError):
        await execute_judge_call(
            judge(settings, error_processors=[StreamErrorRetryProcessor(max_retries=50)]),
            "Hi", output_schema=None)
    assert len(server.requests) == 11


async def test_zero_budget_disables_processor_retries(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.error(429), Reply.text("ok"))
    with pytest.raises(JudgeError):
        await execute_judge_call(
            judge(settings, error_processors=[StreamErrorRetryProcessor()], max_processor_retries=0),
            "Hi", output_schema=None)
    assert len(server.requests) == 1


async def test_first_processor_saying_retry_wins(server: Any, settings: dict[str, Any]) -> None:
    calls: list[tuple[str, int]] = []

    class Never:
        def process_api_error(self, error: BaseException, retry_count: int) -> None:
            calls.append(("never", retry_count))

    class Always:
        def __init__(self, name: str) -> None:
            self.name = name

        async def process_api_error(self, error: BaseException, retry_count: int) -> RetryDecision:
            calls.append((self.name, retry_count))
            return RetryDecision(retry=True)

    server.script(Reply.error(400), Reply.error(400), Reply.text("ok"))
    await execute_judge_call(
        judge(settings, error_processors=[Never(), Always("a"), Always("b")]), "Hi", output_schema=None)
    assert calls == [("never", 0), ("a", 0), ("never", 1), ("a", 1)]
    assert len(server.requests) == 3


async def test_retry_then_fallback_share_one_execution(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.error(429), Reply.text("junk"), Reply.json({"score": 2}))
    value, execution = await execute_judge_call(
        judge(settings, error_processors=[StreamErrorRetryProcessor()]), "Hi",
        output_schema=SCORE_SCHEMA)
    assert value == {"score": 2} and len(server.requests) == 3
    # the 429 sent no reply: two model calls (junk, then the score) of three requests
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (2, 2, 3)


# --------------------------------------------------------------------------- delays


async def test_retry_after_ms_sets_the_delay(server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.error(429, headers={"retry-after-ms": "120", "retry-after": "30"}), Reply.text("ok"))
    await execute_judge_call(judge(settings, error_processors=[StreamErrorRetryProcessor()]),
                             "Hi", output_schema=None)
    first, second = server.requests
    # Timed at the server: the 120 ms of retry-after-ms, not the 30 s of retry-after (the upper
    # bound only has to rule that out, and leaves a busy machine room).
    assert 0.120 - SLACK_S <= second.received_at - first.received_at < 15.0


async def test_retry_after_is_capped_by_max_retry_after_ms(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.error(429, headers={"retry-after": "30"}), Reply.text("ok"))
    await execute_judge_call(
        judge(settings, error_processors=[StreamErrorRetryProcessor(max_retry_after_ms=60)]),
        "Hi", output_schema=None)
    first, second = server.requests
    # The 60 ms cap, not the 30 s asked for (timed at the server; the upper bound rules out 30 s).
    assert 0.060 - SLACK_S <= second.received_at - first.received_at < 15.0


async def test_retry_after_http_date(server: Any, settings: dict[str, Any]) -> None:
    # An HTTP date has whole seconds: now + 3 s is 2 to 3 s ahead once formatted (with +1 s
    # it could already be past when parsed, and the header would rightly be ignored).
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    server.script(Reply.error(503, headers={"retry-after": when}))
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge(settings), "Hi", output_schema=None)
    assert caught.value.retry_after_s is not None and 0 < caught.value.retry_after_s <= 3.0


async def test_delay_function_of_retry_count(server: Any, settings: dict[str, Any]) -> None:
    asked: list[int] = []

    def delay(retry_count: int) -> float:
        asked.append(retry_count)
        return 10 * (retry_count + 1)

    server.script(Reply.error(500), Reply.error(500), Reply.text("ok"))
    started = time.perf_counter()
    await execute_judge_call(
        judge(settings, error_processors=[StreamErrorRetryProcessor(max_retries=2, delay_ms=delay)]),
        "Hi", output_schema=None)
    assert asked == [0, 1]
    assert (time.perf_counter() - started) * 1000 >= 30
    assert len(server.requests) == 3
