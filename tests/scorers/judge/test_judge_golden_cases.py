"""Four behaviours where the scorer API differed from ``@mastra/core`` 1.71.0 on golden cases.

Each test goes through the public API (``create_scorer``, ``Judge``, processors,
``run``/``run_sync``, ``ScorerRunError``) over real HTTP to the fake OpenAI-compatible
server (``tests/support/llm_server.py``): the failed step's judge record on the partial
result (4), judge replies with extra keys (5), the recorded prompt under input processors
(6), and error processors at the retry cap (7).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from judge_support import Reply
from pydantic import BaseModel, ConfigDict

from scorers import Judge, JudgeError, JudgeOutputError, ScorerRunError, create_scorer
from scorers.processors import PIIRedactor, RetryDecision, StreamErrorRetryProcessor

INSTRUCTIONS = "You are an expert evaluator"
DEFAULT_SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}},
                  "required": ["score"], "additionalProperties": False}


def judge(settings: dict[str, Any], **kw: Any) -> Judge:
    return Judge(model="openai/gpt-4o-mini", instructions=INSTRUCTIONS, model_settings=settings, **kw)


# --------------------------------------------------------------------------- 4. the failed step's judge record


USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


async def test_a_failed_first_step_leaves_its_judge_record_on_the_partial_result(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.text("not JSON", usage=USAGE), Reply.text("still not JSON", usage=USAGE))
    scorer = (create_scorer(id="first", description="d", judge=judge(settings))
              .analyze(description="a", output_schema={"type": "object"},
                       create_prompt=lambda run: f"Check {run.output}")
              .generate_score(lambda: 1.0))
    with pytest.raises(ScorerRunError) as caught:
        await scorer.run(input="q", output="a", run_id="r1")
    err = caught.value
    assert (err.failed_step, err.completed_steps) == ("analyze", [])
    partial = err.partial_result
    assert partial is not None  # nothing completed, yet the failed call is recorded
    assert (partial.input, partial.output, partial.run_id) == ("q", "a", "r1")
    assert (partial.analyze_prompt, partial.analyze_step_result, partial.score) == (None, None, None)
    assert list(partial.judge) == ["analyze"]
    (failed,) = partial.judge["analyze"].executions
    assert isinstance(err.__cause__, JudgeOutputError) and failed is err.__cause__.execution
    assert (failed.status, failed.prompt) == ("failed", "Check a")
    assert (failed.attempt_count, failed.model_call_count) == (2, 2)  # the JSON fallback ran
    assert (failed.usage.input_tokens, failed.usage.output_tokens) == (24, 6)
    assert failed.error is not None and "still not JSON" in failed.error["message"]


async def test_a_failed_later_step_adds_its_record_to_what_completed(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.json({"ok": True}), Reply.error(503), Reply.error(503))
    scorer = (create_scorer(id="later", description="d", judge=judge(
        settings, error_processors=[StreamErrorRetryProcessor(max_retries=1)]))
              .preprocess(lambda run: {"words": len(run.output.split())})
              .analyze(description="a", output_schema={"type": "object"}, create_prompt=lambda: "Check")
              .generate_score(description="s", create_prompt=lambda: "Score"))
    with pytest.raises(ScorerRunError) as caught:
        await scorer.run(output="two words")
    err = caught.value
    assert (err.failed_step, err.completed_steps) == ("generate_score", ["preprocess", "analyze"])
    partial = err.partial_result
    assert partial is not None
    assert (partial.preprocess_step_result, partial.analyze_step_result) == ({"words": 2}, {"ok": True})
    assert (partial.analyze_prompt, partial.generate_score_prompt, partial.score) == ("Check", None, None)
    assert [e.status for e in partial.judge["analyze"].executions] == ["success"]
    (failed,) = partial.judge["generate_score"].executions
    assert (failed.status, failed.prompt, failed.error["status_code"]) == ("failed", "Score", 503)
    # one processor retry: two requests, neither answered
    assert (failed.attempt_count, failed.model_call_count, failed.request_count) == (1, 0, 2)


# --------------------------------------------------------------------------- 7. error processors at the cap


class AlwaysRetry:
    """An error processor that always answers retry and records the retry_count it was given."""

    def __init__(self) -> None:
        self.retry_counts: list[int] = []

    def process_api_error(self, error: BaseException, retry_count: int) -> RetryDecision:
        self.retry_counts.append(retry_count)
        return RetryDecision(retry=True)


async def test_error_processors_are_asked_once_more_at_the_cap(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.default = Reply.error(500)
    processor = AlwaysRetry()
    scorer = create_scorer(id="capped", description="d", judge=judge(
        settings, error_processors=[processor], max_processor_retries=2)).generate_score(
        description="score", create_prompt=lambda run: f"Score: {run.output}")
    with pytest.raises(ScorerRunError) as caught:
        await scorer.run(output="a")
    assert processor.retry_counts == [0, 1, 2]  # the last answer (at the cap) is ignored
    assert len(server.requests) == 3
    err = caught.value
    assert err.failed_step == "generate_score" and isinstance(err.__cause__, JudgeError)
    execution = err.__cause__.execution
    assert execution is not None and execution.status == "failed"
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 0, 3)


async def test_a_zero_budget_still_asks_the_error_processors_once(
        server: Any, settings: dict[str, Any]) -> None:
    server.default = Reply.error(503)
    processor = AlwaysRetry()
    scorer = create_scorer(id="zero", description="d", judge=judge(
        settings, error_processors=[processor], max_processor_retries=0)).generate_score(
        description="score", create_prompt=lambda run: "Score")
    with pytest.raises(ScorerRunError):
        await scorer.run(output="a")
    assert processor.retry_counts == [0] and len(server.requests) == 1


# --------------------------------------------------------------------------- 6. the recorded prompt


async def test_the_recorded_prompt_is_the_steps_not_the_processed_one(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.json({"score": 0.5}), Reply.text("Fine."))
    scorer = (
        create_scorer(id="pii", description="d", judge=judge(settings, input_processors=[PIIRedactor()]))
        .generate_score(description="score", create_prompt=lambda run: f"Score the reply to {run.input}")
        .generate_reason(description="reason", create_prompt=lambda score: f"Explain {score} to ann@corp.io")
    )
    result = await scorer.run(input="jane.doe@example.com", output="a")
    sent = [r.message_text("user") for r in server.requests]
    assert sent == ["Score the reply to [EMAIL]", "Explain 0.5 to [EMAIL]"]  # what left the machine
    assert result.generate_score_prompt == "Score the reply to jane.doe@example.com"
    assert result.generate_reason_prompt == "Explain 0.5 to ann@corp.io"
    assert [e.prompt for e in result.judge["generate_score"].executions] == [
        "Score the reply to jane.doe@example.com"]
    assert [e.prompt for e in result.judge["generate_reason"].executions] == ["Explain 0.5 to ann@corp.io"]


# --------------------------------------------------------------------------- 5. extra keys in a reply


async def test_a_score_reply_with_an_extra_key_is_the_score_after_one_call(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.json({"score": 0.5, "extra": "x"}), Reply.json({"score": 0.9}))
    scorer = create_scorer(id="extra", description="d", judge=judge(settings)).generate_score(
        description="score", create_prompt=lambda run: "Score")
    result = await scorer.run(output="a")
    assert result.score == 0.5 and len(server.requests) == 1
    (execution,) = result.judge["generate_score"].executions
    assert (execution.attempt_count, execution.model_call_count) == (1, 1)
    assert json.loads(execution.raw_output or "") == {"score": 0.5, "extra": "x"}  # as received
    sent = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert sent == DEFAULT_SCHEMA  # the schema sent still forbids other keys


async def test_extra_keys_are_dropped_under_inline_injection_too(
        server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.fenced({"score": 1, "confidence": "high"}))
    scorer = create_scorer(id="extra", description="d", judge=judge(
        settings, json_prompt_injection="inline")).generate_score(
        description="score", create_prompt=lambda run: "Score")
    assert (await scorer.run(output="a")).score == 1.0 and len(server.requests) == 1
    assert '"additionalProperties":false' in server.requests[0].message_text("user")


VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "object", "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"], "additionalProperties": False},
        "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        "notes": {"type": "array", "items": {"type": "object", "properties": {"text": {"type": "string"}},
                                             "additionalProperties": False}},
    },
    "required": ["verdict", "weights", "notes"],
    "additionalProperties": False,
}


async def test_a_dict_schema_drops_the_keys_it_does_not_allow_and_keeps_the_others(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.json({"verdict": {"ok": True, "why": "x"}, "weights": {"a": 1, "b": 2},
                              "notes": [{"text": "n", "id": 3}], "comment": "y"}))
    scorer = (create_scorer(id="dict", description="d", judge=judge(settings))
              .analyze(description="a", output_schema=VERDICT_SCHEMA, create_prompt=lambda run: "Check")
              .generate_score(lambda results: float(results.analyze_step_result["verdict"]["ok"])))
    result = await scorer.run(output="a")
    assert result.analyze_step_result == {"verdict": {"ok": True}, "weights": {"a": 1, "b": 2},
                                          "notes": [{"text": "n"}]}  # weights allows any key
    assert result.score == 1.0 and len(server.requests) == 1
    assert result.judge["analyze"].executions[0].output == result.analyze_step_result


async def test_a_dict_schema_still_rejects_a_reply_that_is_wrong_beyond_its_extra_keys(
        server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.json({"score": "high", "extra": 1}), Reply.json({"score": 0.3, "extra": 2}))
    scorer = create_scorer(id="extra", description="d", judge=judge(settings)).generate_score(
        description="score", create_prompt=lambda run: "Score")
    result = await scorer.run(output="a")
    assert result.score == 0.3 and len(server.requests) == 2  # the JSON fallback ran once
    assert result.judge["generate_score"].executions[0].attempt_count == 2


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str


class Claims(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claims: list[Claim]
    best: Claim | None = None


async def test_a_pydantic_schema_drops_unknown_keys_even_when_the_model_forbids_them(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.json({"claims": [{"text": "a", "confidence": 0.9}], "best": {"text": "a", "rank": 1},
                              "summary": "one claim"}))
    scorer = (create_scorer(id="claims", description="d", judge=judge(settings))
              .preprocess(description="p", output_schema=Claims, create_prompt=lambda run: "Extract")
              .generate_score(lambda results: float(len(results.preprocess_step_result.claims))))
    result = await scorer.run(output="a")
    assert result.preprocess_step_result == Claims(claims=[Claim(text="a")], best=Claim(text="a"))
    assert result.score == 1.0 and len(server.requests) == 1
    sent = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert sent["additionalProperties"] is False  # what the model was told is unchanged


async def test_a_native_array_reply_with_a_key_beside_its_wrapper(
        server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.json({"elements": ["a", "b"], "note": "two"}))
    scorer = (create_scorer(id="list", description="d", judge=judge(settings))
              .analyze(description="a", output_schema={"type": "array", "items": {"type": "string"}},
                       create_prompt=lambda run: "List")
              .generate_score(lambda results: float(len(results.analyze_step_result))))
    result = await scorer.run(output="a")
    assert result.analyze_step_result == ["a", "b"] and len(server.requests) == 1
