"""Issue 12: the judge behaves as Mastra's ``createScorer`` judge wherever SPEC §1.5 does not
deliberately differ. Every test goes through ``create_scorer(...).run(...)`` over real HTTP
to the loopback test LLM server, on both transports where both apply.

Schemas (point 1), counters (4), partial results (5), output processors (6), the JSON
fallback (7); retries (8) and timeouts (9) are in ``test_judge_model_retries.py``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from judge_support import Reply
from pydantic import BaseModel

from scorers import Judge, JudgeError, ScorerRunError, StreamErrorRetryProcessor, create_scorer
from scorers.processors import JudgeReply

DEFAULT_SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}},
                  "required": ["score"], "additionalProperties": False}
COMPACT_DEFAULT = ('{"type":"object","properties":{"score":{"type":"number"}},"required":["score"],'
                   '"additionalProperties":false}')
INSTRUCTIONS = "You are an expert evaluator"
SYSTEM_SUFFIX = "You MUST answer with a JSON object that matches the JSON schema above."
INLINE_START = "Return your response as JSON matching this schema:"


def quality(settings: dict[str, Any], model: str = "openai/gpt-4o-mini", *, reason: bool = False,
            **judge_kw: Any) -> Any:
    judge = Judge(model=model, instructions=INSTRUCTIONS, model_settings=settings, **judge_kw)
    scorer = create_scorer(id="quality", description="q", judge=judge).generate_score(
        description="score", create_prompt=lambda run: f"Score: {run.output}")
    if reason:
        scorer = scorer.generate_reason(description="reason", create_prompt=lambda score: f"Explain {score}")
    return scorer


def system_with(schema: str) -> str:
    return f"{INSTRUCTIONS}\n\nJSON schema:\n{schema}\n{SYSTEM_SUFFIX}"


def inline_with(prompt: str, schema: str) -> str:
    return (f"{prompt}\n\n{INLINE_START}\n\n{schema}\n\nReturn only valid JSON. Do not include "
            "markdown or explanatory text.")


# --------------------------------------------------------------------------- 1. the schema


async def test_default_score_schema_is_sent_exactly_natively(server: Any, settings: dict[str, Any],
                                                             transport: str) -> None:
    server.script(Reply.json({"score": 0.5}))
    result = await quality(settings).run(input="q", output="a")
    assert result.score == 0.5
    body = server.requests[0].body
    assert body["response_format"]["json_schema"] == {"name": "response", "schema": DEFAULT_SCHEMA,
                                                       "strict": True}
    assert [m["content"] for m in body["messages"]] == [INSTRUCTIONS, "Score: a"]


async def test_default_score_schema_not_strict_for_other_providers(server: Any, settings: dict[str, Any],
                                                                   transport: str) -> None:
    server.script(Reply.json({"score": 1}))
    await quality(settings, "hosted_vllm/house", json_prompt_injection=False).run(output="a")
    assert server.requests[0].body["response_format"]["json_schema"] == {"name": "response",
                                                                         "schema": DEFAULT_SCHEMA}


@pytest.mark.parametrize("mode", [True, "system"])
async def test_default_score_schema_under_system_injection(server: Any, settings: dict[str, Any],
                                                           mode: Any, transport: str) -> None:
    server.script(Reply.json({"score": 1}))
    await quality(settings, json_prompt_injection=mode).run(output="a")
    sent = server.requests[0]
    assert sent.message_text("system") == system_with(COMPACT_DEFAULT)
    assert sent.message_text("user") == "Score: a" and "response_format" not in sent.body


async def test_default_score_schema_under_inline_injection(server: Any, settings: dict[str, Any],
                                                           transport: str) -> None:
    server.script(Reply.json({"score": 1}))
    await quality(settings, "hosted_vllm/house").run(output="a")  # auto -> inline (unknown model)
    sent = server.requests[0]
    assert sent.message_text("system") == INSTRUCTIONS
    assert sent.message_text("user") == inline_with("Score: a", COMPACT_DEFAULT)


async def test_default_score_schema_on_the_fallback_retry(server: Any, settings: dict[str, Any],
                                                          transport: str) -> None:
    server.script(Reply.text("I would say 0.4"), Reply.json({"score": 0.4}))
    result = await quality(settings).run(output="a")
    assert result.score == 0.4
    assert server.requests[1].message_text("system") == system_with(COMPACT_DEFAULT)


async def test_nothing_of_ours_reaches_the_judge_in_any_step(server: Any, settings: dict[str, Any]) -> None:
    def answer(body: dict[str, Any]) -> Any:
        user = body["messages"][-1]["content"]
        return Reply.json({"ok": True}) if user.startswith("Check") else (
            Reply.text("fine") if user.startswith("Explain") else Reply.json({"score": 1}))

    server.responder = answer
    judge = Judge(model="openai/gpt-4o-mini", instructions=INSTRUCTIONS, model_settings=settings)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    scorer = (create_scorer(id="all", description="d", judge=judge)
              .preprocess(description="pre", output_schema=schema, create_prompt=lambda: "Check pre")
              .analyze(description="an", output_schema=schema, create_prompt=lambda: "Check an",
                       judge=Judge(json_prompt_injection="system"))
              .generate_score(description="s", create_prompt=lambda: "Score",
                              judge=Judge(json_prompt_injection="inline"))
              .generate_reason(description="r", create_prompt=lambda: "Explain"))
    result = await scorer.run(output="a")
    assert (result.score, result.reason) == (1.0, "fine")
    sent = json.dumps([r.body for r in server.requests])
    for ours in ("_ScoreOutput", "title", "description", "What a prompt-mode"):
        assert ours not in sent
    assert server.requests[0].body["response_format"]["json_schema"]["schema"] == {
        **schema, "additionalProperties": False}  # OpenAI strict form of the user's own schema


class Verdict(BaseModel):
    """Whether the answer is on topic."""

    relevant: bool


async def test_a_user_pydantic_model_sends_its_own_schema(server: Any, settings: dict[str, Any],
                                                          transport: str) -> None:
    server.script(Reply.json({"relevant": True}), Reply.json({"relevant": True}))
    judge = Judge(model="openai/gpt-4o-mini", instructions=INSTRUCTIONS, model_settings=settings,
                  json_prompt_injection="system")
    scorer = create_scorer(id="own", description="d", judge=judge).analyze(
        description="a", output_schema=Verdict, create_prompt=lambda: "Relevant?").generate_score(
        lambda results: float(results.analyze_step_result.relevant))
    assert (await scorer.run(output="a")).score == 1.0
    own = json.dumps(Verdict.model_json_schema(), separators=(",", ":"))
    assert server.requests[0].message_text("system") == system_with(own)


# --------------------------------------------------------------------------- 4. counters
# attempt_count: structured-output attempts; model_call_count: model calls that returned a
# reply (Mastra's completed model steps), a reply that then failed to parse included;
# request_count: every request sent (tracescore's own, what the judge metrics count).


async def test_processor_retries_are_requests_not_model_calls_or_attempts(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.error(503), Reply.error(503), Reply.json({"score": 0.9}))
    scorer = quality(settings, error_processors=[StreamErrorRetryProcessor(max_retries=3)])
    result = await scorer.run(output="a")
    (execution,) = result.judge["generate_score"].executions
    assert result.score == 0.9 and len(server.requests) == 3
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 1, 3)


async def test_the_json_fallback_is_a_second_attempt(server: Any, settings: dict[str, Any],
                                                     transport: str) -> None:
    server.script(Reply.error(429), Reply.text("junk"), Reply.json({"score": 0.2}), Reply.text("why"))
    scorer = quality(settings, reason=True, error_processors=[StreamErrorRetryProcessor()])
    result = await scorer.run(output="a")
    score, reason = result.judge["generate_score"].executions[0], result.judge["generate_reason"].executions[0]
    # The 429 is a request without a reply; "junk" is a model call although it did not parse.
    assert (score.attempt_count, score.model_call_count, score.request_count) == (2, 2, 3)
    assert (reason.attempt_count, reason.model_call_count, reason.request_count) == (1, 1, 1)


# --------------------------------------------------------------------------- 5. partial results


def failed_execution(caught: pytest.ExceptionInfo[ScorerRunError], step: str) -> Any:
    """The failed step's one judge execution on the partial result, the judge error's own record."""
    err = caught.value
    assert err.failed_step == step and err.partial_result is not None
    (failed,) = err.partial_result.judge[step].executions
    cause = err.__cause__
    assert isinstance(cause, JudgeError) and failed is cause.execution
    assert failed.status == "failed"
    return failed


async def test_a_non_retryable_provider_error_is_an_attempt_without_a_model_call(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    """Mastra: a non-retryable provider error leaves attemptCount 1 and modelCallCount 0."""
    server.script(Reply.error(400), Reply.json({"score": 1}))
    scorer = quality(settings, error_processors=[StreamErrorRetryProcessor(max_retries=3)])
    with pytest.raises(ScorerRunError) as caught:
        await scorer.run(output="a")
    assert len(server.requests) == 1  # not retried, even with a retry processor
    failed = failed_execution(caught, "generate_score")
    assert (failed.attempt_count, failed.model_call_count, failed.request_count) == (1, 0, 1)
    assert (failed.error["status_code"], failed.raw_output, failed.usage.total_tokens) == (400, None, 0)
    assert caught.value.partial_result.score is None


@pytest.mark.parametrize(("processors", "requests"), [(None, 1), ([StreamErrorRetryProcessor()], 2)],
                         ids=["no-processor", "default-retry-processor"])
async def test_a_plain_error_under_the_default_handling_is_no_model_call(
        server: Any, settings: dict[str, Any], processors: Any, requests: int, transport: str) -> None:
    """A dropped connection (no HTTP reply at all) under the default handling: the default
    ``max_retries`` (0), with no error processor or with `StreamErrorRetryProcessor`'s defaults
    (one retry): every request sent, none a model call."""
    server.default = Reply.reset()
    with pytest.raises(ScorerRunError) as caught:
        await quality(settings, error_processors=processors).run(output="a")
    assert len(server.requests) == requests
    failed = failed_execution(caught, "generate_score")
    assert (failed.attempt_count, failed.model_call_count, failed.request_count) == (1, 0, requests)
    assert "Connection" in failed.error["message"] and failed.raw_output is None


async def test_a_retryable_error_without_an_error_processor_is_no_model_call(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    """Mastra: without an error processor a retryable 429 makes exactly one call and fails."""
    server.script(Reply.error(429, headers={"retry-after": "3"}), Reply.json({"score": 1}))
    with pytest.raises(ScorerRunError) as caught:
        await quality(settings).run(output="a")
    assert len(server.requests) == 1
    failed = failed_execution(caught, "generate_score")
    assert (failed.attempt_count, failed.model_call_count, failed.request_count) == (1, 0, 1)
    cause = caught.value.__cause__
    assert isinstance(cause, JudgeError) and (cause.retryable, cause.retry_after_s) == (True, 3.0)


async def test_partial_result_holds_what_completed_and_the_failed_call(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    """A reason step failing after the score step: the score's execution counts its model call,
    the reason's none (Mastra's modelCallCount 0)."""
    server.script(Reply.json({"score": 0.7}), Reply.error(500))
    with pytest.raises(ScorerRunError) as caught:
        await quality(settings, reason=True).run(output="a")
    err = caught.value
    assert (err.failed_step, err.completed_steps) == ("generate_reason", ["generate_score"])
    partial = err.partial_result
    assert partial is not None and partial.score == 0.7
    assert partial.generate_score_prompt == "Score: a"
    assert (partial.generate_reason_prompt, partial.reason) == (None, None)  # the failed step's fields
    assert set(partial.judge) == {"generate_score", "generate_reason"}
    (score,) = partial.judge["generate_score"].executions
    assert (score.status, score.attempt_count, score.model_call_count, score.request_count) == (
        "success", 1, 1, 1)
    failed = failed_execution(caught, "generate_reason")
    assert failed.prompt == "Explain 0.7"
    assert (failed.attempt_count, failed.model_call_count, failed.request_count) == (1, 0, 1)


async def test_a_reply_that_failed_to_parse_is_a_model_call(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    """Mastra: a reply that did not parse, then a fallback rejected by the provider: 2 attempts,
    1 model call (the reply), its raw text kept."""
    server.script(Reply.text("not valid JSON"), Reply.error(400))
    with pytest.raises(ScorerRunError) as caught:
        await quality(settings).run(output="a")
    assert len(server.requests) == 2
    failed = failed_execution(caught, "generate_score")
    assert (failed.attempt_count, failed.model_call_count, failed.request_count) == (2, 1, 2)
    assert failed.raw_output == "not valid JSON" and failed.usage.total_tokens == 15


# --------------------------------------------------------------------------- 6. output processors


class Upper:
    """Uppercases the judge's text, as a processor normalising replies might."""

    def process_output_result(self, result: JudgeReply) -> JudgeReply:
        return replace(result, text=result.text.upper())


class UpperTextOnly:
    """The same, building a new reply from the text alone."""

    async def process_output_result(self, result: JudgeReply) -> JudgeReply:
        return JudgeReply(text=result.text.upper())


@pytest.mark.parametrize("processor", [Upper(), UpperTextOnly()], ids=["replace", "text-only"])
async def test_output_processors_run_after_parsing(server: Any, settings: dict[str, Any],
                                                   processor: Any, transport: str) -> None:
    server.script(Reply.json({"score": 0.7}), Reply.text("Because it is fine."))
    result = await quality(settings, reason=True, output_processors=[processor]).run(output="a")
    assert (result.score, result.reason) == (0.7, "BECAUSE IT IS FINE.")
    assert len(server.requests) == 2  # the uppercased score reply did not trigger the fallback
    execution = result.judge["generate_reason"].executions[0]
    assert (execution.output, execution.raw_output) == ("BECAUSE IT IS FINE.", "Because it is fine.")


# --------------------------------------------------------------------------- 7. the JSON fallback


@pytest.mark.parametrize(("mode", "first", "fallback"), [
    ("inline", "inline", "inline"),
    ("system", "system", "system"),
    (True, "system", "system"),
    ("auto", "native", "system"),
    (False, "native", "system"),
])
async def test_the_fallback_keeps_the_chosen_injection(server: Any, settings: dict[str, Any], mode: Any,
                                                       first: str, fallback: str, transport: str) -> None:
    server.script(Reply.text("no JSON here"), Reply.json({"score": 0.6}))
    result = await quality(settings, json_prompt_injection=mode).run(output="a")
    assert result.score == 0.6

    def injection(request: Any) -> str:
        if "response_format" in request.body:
            return "native"
        if request.message_text("user").startswith(f"Score: a\n\n{INLINE_START}"):
            return "inline"
        return "system" if request.message_text("system").endswith(SYSTEM_SUFFIX) else "none"

    assert [injection(r) for r in server.requests] == [first, fallback]
