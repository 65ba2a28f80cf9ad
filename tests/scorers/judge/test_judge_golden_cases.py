"""Four behaviours where the scorer API differed from ``@mastra/core`` 1.71.0 on golden cases.

Each test goes through the public API (``create_scorer``, ``Judge``, processors,
``run``/``run_sync``, ``ScorerRunError``) over real HTTP to the fake OpenAI-compatible
server (``tests/support/llm_server.py``): the failed step's judge record on the partial
result (4), judge replies with extra keys (5), the recorded prompt under input processors
(6), and error processors at the retry cap (7).
"""

from __future__ import annotations

from typing import Any

import pytest
from judge_support import Reply

from scorers import Judge, JudgeError, ScorerRunError, create_scorer
from scorers.processors import PIIRedactor, RetryDecision

INSTRUCTIONS = "You are an expert evaluator"


def judge(settings: dict[str, Any], **kw: Any) -> Judge:
    return Judge(model="openai/gpt-4o-mini", instructions=INSTRUCTIONS, model_settings=settings, **kw)


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
    assert (execution.attempt_count, execution.model_call_count) == (1, 3)


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
