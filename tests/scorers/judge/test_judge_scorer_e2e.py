"""All four prompt steps through ``create_scorer(...).run(...)`` against the fake server."""

from __future__ import annotations

from typing import Any

import pytest
from judge_support import Reply
from pydantic import BaseModel

from scorers import Judge, ScorerRunError, create_scorer
from scorers.errors import JudgeError
from scorers.processors import PIIRedactor, StreamErrorRetryProcessor


class Claims(BaseModel):
    claims: list[str]


class Verdicts(BaseModel):
    supported: int
    total: int


def responder(body: dict[str, Any]) -> Any:
    """Answer by prompt, so steps are independent of request order."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if user.startswith("Extract"):
        return Reply.json({"claims": ["sky is blue", "grass is red"]})
    if user.startswith("Check"):
        return Reply.json({"supported": 1, "total": 2})
    if user.startswith("Score"):
        return Reply.json({"score": 0.5})
    if user.startswith("Explain"):
        return Reply.text("One of two claims is supported.")
    return None


def faithfulness(settings: dict[str, Any], **judge_kw: Any) -> Any:
    judge = Judge(model="openai/gpt-4o-mini", instructions="You are an expert evaluator",
                  model_settings=settings, **judge_kw)
    return (
        create_scorer(id="faithfulness", description="claims supported by context", judge=judge)
        .preprocess(description="extract claims", output_schema=Claims,
                    create_prompt=lambda run: f"Extract claims from: {run.output}")
        .analyze(description="check claims", output_schema=Verdicts,
                 create_prompt=lambda results: f"Check: {results.preprocess_step_result.claims}")
        .generate_score(description="score", create_prompt=lambda results:
                        f"Score {results.analyze_step_result.supported}/"
                        f"{results.analyze_step_result.total}")
        .generate_reason(description="reason", create_prompt=lambda score: f"Explain the score {score}")
    )


async def test_four_prompt_steps_store_results_prompts_and_executions(
        server: Any, settings: dict[str, Any]) -> None:
    server.responder = responder
    result = await faithfulness(settings).run(input="Describe nature", output="The sky is blue.")
    assert isinstance(result.preprocess_step_result, Claims)
    assert result.preprocess_step_result.claims == ["sky is blue", "grass is red"]
    assert result.analyze_step_result == Verdicts(supported=1, total=2)
    assert result.score == 0.5
    assert result.reason == "One of two claims is supported."
    assert result.preprocess_prompt == "Extract claims from: The sky is blue."
    assert result.analyze_prompt == "Check: ['sky is blue', 'grass is red']"
    assert result.generate_score_prompt == "Score 1/2"
    assert result.generate_reason_prompt == "Explain the score 0.5"
    assert set(result.judge) == {"preprocess", "analyze", "generate_score", "generate_reason"}
    executions = {step: record.executions for step, record in result.judge.items()}
    assert all(len(ex) == 1 and ex[0].status == "success" and ex[0].attempt_count == 1
               and ex[0].model_call_count == 1
               for ex in executions.values())
    assert executions["preprocess"][0].output == {"claims": ["sky is blue", "grass is red"]}
    assert executions["generate_score"][0].output == 0.5
    assert executions["generate_reason"][0].output == "One of two claims is supported."
    assert executions["generate_reason"][0].prompt == "Explain the score 0.5"
    assert all(ex[0].cost_usd and ex[0].cost_usd > 0 for ex in executions.values())
    assert len(server.requests) == 4
    bodies = [r.body for r in server.requests]
    assert [("response_format" in b) for b in bodies] == [True, True, True, False]
    assert bodies[2]["response_format"]["json_schema"]["schema"]["properties"]["score"]["type"] == "number"


async def test_reason_429_retries_only_the_reason_request(server: Any, settings: dict[str, Any]) -> None:
    """Mastra's test: the score prompt is sent once and the reason prompt twice."""
    scorer = (
        create_scorer(id="quality", description="q", judge=Judge(
            model="openai/gpt-4o-mini", instructions="Judge.", model_settings=settings,
            error_processors=[StreamErrorRetryProcessor()]))
        .generate_score(description="score", create_prompt=lambda run: "score this")
        .generate_reason(description="reason", create_prompt=lambda score: "explain this score")
    )
    server.script(Reply.json({"score": 0.8}), Reply.error(429, headers={"retry-after-ms": "5"}),
                  Reply.text("because"))
    result = await scorer.run(input="q", output="a")
    prompts = [r.message_text("user") for r in server.requests]
    assert prompts == ["score this", "explain this score", "explain this score"]
    assert (result.score, result.reason) == (0.8, "because")
    score, reason = result.judge["generate_score"].executions[0], result.judge["generate_reason"].executions[0]
    assert (score.attempt_count, score.model_call_count) == (1, 1)
    # the 429 and its retry: two requests, one model call (the 429 returned no reply)
    assert (reason.attempt_count, reason.model_call_count, reason.request_count) == (1, 1, 2)


async def test_reason_429_without_processors_fails_with_one_request(
        server: Any, settings: dict[str, Any]) -> None:
    scorer = (
        create_scorer(id="quality", description="q", judge=Judge(
            model="openai/gpt-4o-mini", instructions="Judge.", model_settings=settings))
        .generate_score(description="score", create_prompt=lambda run: "score this")
        .generate_reason(description="reason", create_prompt=lambda score: "explain this score")
    )
    server.script(Reply.json({"score": 0.8}), Reply.error(429))
    with pytest.raises(ScorerRunError) as caught:
        await scorer.run(input="q", output="a")
    err = caught.value
    assert len(server.requests) == 2
    assert err.failed_step == "generate_reason" and err.completed_steps == ["generate_score"]
    assert isinstance(err.__cause__, JudgeError) and err.__cause__.retryable
    partial = err.partial_result
    assert partial is not None and set(partial.judge) == {"generate_score", "generate_reason"}
    (failed,) = partial.judge["generate_reason"].executions
    assert failed is err.__cause__.execution  # the failed call's record, on the judge error too
    assert failed.status == "failed" and failed.error["status_code"] == 429


async def test_step_judge_overrides_field_by_field(server: Any, settings: dict[str, Any]) -> None:
    scorer_judge = Judge(model="openai/gpt-4o-mini", instructions="Scorer instructions",
                         model_settings=settings, max_processor_retries=2,
                         error_processors=[StreamErrorRetryProcessor(max_retries=9)],
                         input_processors=[PIIRedactor()])
    scorer = (
        create_scorer(id="override", description="d", judge=scorer_judge)
        # [] disables the scorer's error processors for this step.
        .analyze(description="a", output_schema=Verdicts, create_prompt=lambda run: "a@b.io analyze",
                 judge=Judge(instructions="Analyze instructions", error_processors=[]))
        # Own error processors, inherited max_processor_retries (2) and input processors.
        .generate_score(description="s", create_prompt=lambda run: "c@d.io score",
                        judge=Judge(error_processors=[StreamErrorRetryProcessor(max_retries=9)],
                                    input_processors=[]))
    )
    server.script(Reply.json({"supported": 1, "total": 1}),
                  Reply.error(500), Reply.error(500), Reply.json({"score": 1}))
    result = await scorer.run(input="q", output="a")
    assert result.score == 1
    analyze, *score_requests = server.requests
    assert analyze.message_text("system") == "Analyze instructions"
    assert analyze.message_text("user") == "[EMAIL] analyze"  # input processors inherited
    assert [r.message_text("user") for r in score_requests] == ["c@d.io score"] * 3  # [] disables
    assert score_requests[0].message_text("system") == "Scorer instructions"
    (execution,) = result.judge["generate_score"].executions
    assert (execution.model_call_count, execution.request_count) == (1, 3)

    # The analyze step's [] really disabled retries: a 500 there fails at once.
    server.reset_stats()
    server.script(Reply.error(500), Reply.json({"score": 1}))
    with pytest.raises(ScorerRunError):
        await scorer.run(input="q", output="a")
    assert len(server.requests) == 1


async def test_inherited_budget_caps_step_processors(server: Any, settings: dict[str, Any]) -> None:
    scorer = (
        create_scorer(id="budget", description="d", judge=Judge(
            model="openai/gpt-4o-mini", instructions="i", model_settings=settings,
            max_processor_retries=1))
        .generate_score(description="s", create_prompt=lambda run: "score",
                        judge=Judge(error_processors=[StreamErrorRetryProcessor(max_retries=9)]))
    )
    server.default = Reply.error(503)
    with pytest.raises(ScorerRunError):
        await scorer.run(input="q", output="a")
    assert len(server.requests) == 2


async def test_calculate_score_gets_the_validated_judge_output(server: Any, settings: dict[str, Any]) -> None:
    scorer = create_scorer(id="calc", description="d", judge=Judge(
        model="hosted_vllm/house", instructions="i", model_settings=settings)).generate_score(
        description="s", output_schema=Verdicts, create_prompt=lambda run: "count",
        calculate_score=lambda judge_output: judge_output.supported / judge_output.total)
    server.script(Reply.fenced({"supported": 3, "total": 4}))
    result = await scorer.run(input="q", output="a")
    assert result.score == 0.75
    execution = result.judge["generate_score"].executions[0]
    assert execution.provider == "hosted_vllm" and execution.cost_usd is None
    assert "response_format" not in server.requests[0].body  # auto -> inline for unknown models


async def test_judge_output_error_fails_the_step_after_two_requests(
        server: Any, settings: dict[str, Any]) -> None:
    scorer = create_scorer(id="junk", description="d", judge=Judge(
        model="openai/gpt-4o-mini", instructions="i", model_settings=settings)).generate_score(
        description="s", create_prompt=lambda run: "score")
    server.script(Reply.text("no idea"), Reply.text("still no idea"))
    with pytest.raises(ScorerRunError) as caught:
        await scorer.run(input="q", output="a")
    assert "still no idea" in str(caught.value)
    assert len(server.requests) == 2
    execution = caught.value.__cause__.execution
    assert execution.status == "failed" and execution.attempt_count == 2
    partial = caught.value.partial_result  # nothing completed: the failed call's record alone
    assert partial is not None and partial.judge["generate_score"].executions == [execution]
    assert (partial.score, partial.generate_score_prompt) == (None, None)


async def test_many_scorers_at_once_respect_the_judge_concurrency(
        server: Any, settings: dict[str, Any]) -> None:
    import asyncio

    from scorers import set_judge_concurrency
    from scorers._judge import get_judge_concurrency

    before = get_judge_concurrency()
    set_judge_concurrency(5)
    try:
        server.latency_ms = 10
        judge = Judge(model="openai/gpt-4o-mini", instructions="i", model_settings=settings)
        scorers = [
            create_scorer(id=f"s{i}", description="d", judge=judge)
            .generate_score(description="s", create_prompt=lambda run: "score")
            .generate_reason(description="r", create_prompt=lambda score: "explain")
            for i in range(4)
        ]
        server.responder = lambda body: (Reply.json({"score": 1}) if body["messages"][-1]["content"]
                                         == "score" else Reply.text("why"))
        results = await asyncio.gather(*(s.run(input="q", output=f"a{i}")
                                         for i in range(10) for s in scorers))
    finally:
        set_judge_concurrency(before)
    assert all(r.score == 1 and r.reason == "why" for r in results)
    assert len(server.requests) == 80
    assert server.max_in_flight == 5
