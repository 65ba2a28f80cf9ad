"""Prompt steps through the engine: judge resolution, schemas, records, failures (SPEC §1.1, §1.2).

The judge call itself (`scorers._judge.execute_judge_call`) is the boundary faked here; the
judge's own end-to-end tests live in ``tests/scorers/judge/``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from pydantic import BaseModel

from scorers import (
    Judge,
    JudgeError,
    JudgeExecution,
    JudgeStepRecord,
    PromptStep,
    ScorerDefinitionError,
    ScorerRunError,
    create_scorer,
    not_scorable,
)

JUDGE = Judge(model="openai/gpt-4o-mini", instructions="You are an expert evaluator")


class Verdict(BaseModel):
    relevant: bool


class FakeJudge:
    """Answers judge calls from a queue and records what it was asked."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[Judge, str, Any]] = []

    async def execute_judge_call(
        self, judge: Judge, prompt: str, *, output_schema: Any = None
    ) -> tuple[Any, JudgeExecution]:
        self.calls.append((judge, prompt, output_schema))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        output = answer.model_dump() if isinstance(answer, BaseModel) else answer
        execution = JudgeExecution(
            status="success", prompt=prompt, output=output, model=judge.model or "", attempt_count=1
        )
        return answer, execution


@pytest.fixture
def fake_judge(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(*answers: Any) -> FakeJudge:
        fake = FakeJudge(*answers)
        module = types.ModuleType("scorers._judge")
        module.execute_judge_call = fake.execute_judge_call  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "scorers._judge", module)
        return fake

    return install


def analyze_step(**kw: Any) -> PromptStep:
    return PromptStep(
        description="Judge relevance",
        output_schema=Verdict,
        create_prompt=lambda run: f"Is {run.output!r} relevant?",
        **kw,
    )


@pytest.mark.parametrize(
    ("scorer_judge", "step_judge"),
    [
        (None, None),
        (Judge(model="openai/gpt-4o-mini"), None),
        (Judge(instructions="x"), None),
        (None, Judge(model="openai/gpt-4o-mini")),
    ],
)
async def test_missing_model_or_instructions_fails_before_any_judge_call(
    fake_judge: Any, scorer_judge: Judge | None, step_judge: Judge | None
) -> None:
    fake = fake_judge(Verdict(relevant=True))
    scorer = (
        create_scorer(id="s", description="d", judge=scorer_judge)
        .analyze(analyze_step(judge=step_judge))
        .generate_score(lambda: 1)
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(output="o")
    err = info.value
    assert str(err.__cause__) == 'Step "analyze" requires a model and instructions'
    assert isinstance(err.__cause__, ScorerDefinitionError)
    assert str(err) == 'Scorer Run Failed: Step "analyze" requires a model and instructions'
    assert (err.failed_step, err.partial_result) == ("analyze", None)
    assert fake.calls == []


async def test_step_judge_overrides_scorer_judge_field_by_field(fake_judge: Any) -> None:
    fake = fake_judge(Verdict(relevant=True))
    scorer = (
        create_scorer(id="s", description="d", judge=Judge(model="openai/gpt-4o-mini"))
        .analyze(analyze_step(judge=Judge(instructions="Be lenient")))
        .generate_score(lambda results: float(results.analyze_step_result.relevant))
    )
    result = await scorer.run(output="o")
    judge, _, _ = fake.calls[0]
    assert (judge.model, judge.instructions) == ("openai/gpt-4o-mini", "Be lenient")
    assert result.score == 1.0


async def test_prompt_analyze_result_prompt_and_judge_record(fake_judge: Any) -> None:
    fake = fake_judge(Verdict(relevant=False))
    scorer = (
        create_scorer(id="s", description="d", judge=JUDGE)
        .analyze(analyze_step())
        .generate_score(lambda results: 0.0 if not results.analyze_step_result.relevant else 1.0)
    )
    result = await scorer.run(output="Paris")
    assert fake.calls == [(JUDGE, "Is 'Paris' relevant?", Verdict)]
    assert result.analyze_step_result == Verdict(relevant=False)
    assert result.analyze_prompt == "Is 'Paris' relevant?"
    assert result.generate_score_prompt is None and result.score == 0.0
    assert list(result.judge) == ["analyze"]
    record = result.judge["analyze"]
    assert isinstance(record, JudgeStepRecord) and len(record.executions) == 1
    assert record.executions[0].output == {"relevant": False}


async def test_dict_schema_is_passed_through_and_dict_result_kept(fake_judge: Any) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    fake = fake_judge({"ok": True})
    scorer = (
        create_scorer(id="s", description="d", judge=JUDGE)
        .preprocess(description="Check", output_schema=schema, create_prompt=lambda: "check")
        .generate_score(lambda results: float(results.preprocess_step_result["ok"]))
    )
    result = await scorer.run()
    assert fake.calls[0][2] is schema
    assert result.preprocess_step_result == {"ok": True} and result.score == 1.0


async def test_prompt_generate_score_asks_for_score_and_records_the_number(fake_judge: Any) -> None:
    fake = fake_judge()

    async def answer(judge: Judge, prompt: str, *, output_schema: Any = None) -> Any:
        fake.calls.append((judge, prompt, output_schema))
        value = {"score": 0.8}  # a dict schema yields a dict
        return value, JudgeExecution(
            status="success", prompt=prompt, output={"score": 0.8}, model="m"
        )

    sys.modules["scorers._judge"].execute_judge_call = answer  # type: ignore[attr-defined]
    scorer = create_scorer(id="s", description="d", judge=JUDGE).generate_score(
        description="Score it", create_prompt=lambda run: f"Score {run.output}"
    )
    result = await scorer.run(output="x")
    assert fake.calls[0][2] == {"type": "object", "properties": {"score": {"type": "number"}},
                                "required": ["score"], "additionalProperties": False}
    assert result.score == 0.8 and result.generate_score_prompt == "Score x"
    assert result.judge["generate_score"].executions[0].output == 0.8


async def test_calculate_score_turns_judge_output_into_the_score(fake_judge: Any) -> None:
    fake = fake_judge(Verdict(relevant=True))
    seen: dict[str, Any] = {}

    def calculate(run: Any, results: Any, judge_output: Verdict) -> float:
        seen.update(run=run, results=results, judge_output=judge_output)
        return 0.9 if judge_output.relevant else 0.1

    scorer = create_scorer(id="s", description="d", judge=JUDGE).generate_score(
        description="Score it",
        create_prompt=lambda: "Relevant?",
        output_schema=Verdict,
        calculate_score=calculate,
    )
    result = await scorer.run(output="x")
    assert fake.calls[0][2] is Verdict
    assert seen["judge_output"] == Verdict(relevant=True)
    assert result.score == 0.9
    assert result.judge["generate_score"].executions[0].output == 0.9


async def test_calculate_score_with_default_schema(fake_judge: Any) -> None:
    fake = fake_judge()

    async def answer(judge: Judge, prompt: str, *, output_schema: Any = None) -> Any:
        fake.calls.append((judge, prompt, output_schema))
        assert output_schema["required"] == ["score"]
        return {"score": 4}, JudgeExecution(status="success", prompt=prompt, model="m")

    sys.modules["scorers._judge"].execute_judge_call = answer  # type: ignore[attr-defined]
    scorer = create_scorer(id="s", description="d", judge=JUDGE).generate_score(
        description="Score it",
        create_prompt=lambda: "1-5?",
        calculate_score=lambda judge_output: judge_output["score"] / 5,
    )
    assert (await scorer.run()).score == 0.8


async def test_prompt_score_is_validated(fake_judge: Any) -> None:
    fake_judge(Verdict(relevant=True))
    scorer = create_scorer(id="s", description="d", judge=JUDGE).generate_score(
        description="Score it",
        create_prompt=lambda: "p",
        output_schema=Verdict,
        calculate_score=lambda judge_output: "high",
    )
    with pytest.raises(
        ScorerRunError, match="generate_score must return a finite real number"
    ) as info:
        await scorer.run()
    partial = info.value.partial_result  # generate_score did not complete, its judge call did
    assert partial is not None and (partial.score, partial.generate_score_prompt) == (None, None)
    assert [e.status for e in partial.judge["generate_score"].executions] == ["success"]


async def test_prompt_generate_reason_gets_plain_text_and_may_use_score(fake_judge: Any) -> None:
    fake = fake_judge("Because it is relevant.")
    scorer = (
        create_scorer(id="s", description="d", judge=JUDGE)
        .generate_score(lambda: 0.7)
        .generate_reason(description="Explain", create_prompt=lambda score: f"Explain {score}")
    )
    result = await scorer.run()
    assert fake.calls == [(JUDGE, "Explain 0.7", None)]
    assert result.reason == "Because it is relevant."
    assert result.generate_reason_prompt == "Explain 0.7"
    assert result.judge["generate_reason"].executions[0].output == "Because it is relevant."


async def test_async_create_prompt(fake_judge: Any) -> None:
    fake = fake_judge("text")

    async def build(run: Any) -> str:
        return f"async {run.output}"

    scorer = (
        create_scorer(id="s", description="d", judge=JUDGE)
        .generate_score(lambda: 1)
        .generate_reason(description="Explain", create_prompt=build)
    )
    await scorer.run(output="o")
    assert fake.calls[0][1] == "async o"


async def test_create_prompt_must_return_a_string(fake_judge: Any) -> None:
    fake = fake_judge()
    scorer = create_scorer(id="s", description="d", judge=JUDGE).generate_score(
        description="Score it", create_prompt=lambda: 42
    )
    with pytest.raises(
        ScorerRunError, match="create_prompt must return the prompt string, got int"
    ):
        await scorer.run()
    assert fake.calls == []


async def test_create_prompt_returning_not_scorable_skips_the_judge(fake_judge: Any) -> None:
    fake = fake_judge()
    scorer = create_scorer(id="s", description="d", judge=JUDGE).generate_score(
        description="Score it", create_prompt=lambda: not_scorable("no context")
    )
    result = await scorer.run()
    assert fake.calls == [] and result.score is None
    assert result.not_scorable is not None and result.not_scorable.reason == "no context"
    assert result.judge == {}


async def test_failed_judge_call_adds_its_record_to_the_completed_steps_in_the_partial_result(
        fake_judge: Any) -> None:
    failed = JudgeExecution(
        status="failed", prompt="why?", model="m", attempt_count=1, error={"message": "429"}
    )
    error = JudgeError("rate limited", retryable=True, execution=failed)
    fake_judge(Verdict(relevant=True), error)
    scorer = (
        create_scorer(id="s", description="d", judge=JUDGE)
        .preprocess(lambda run: "pre")
        .analyze(analyze_step())
        .generate_score(lambda: 1)
        .generate_reason(description="Explain", create_prompt=lambda: "why?")
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(output="o")
    err = info.value
    assert err.__cause__ is error and str(err) == "Scorer Run Failed: rate limited"
    assert (err.failed_step, err.completed_steps) == (
        "generate_reason",
        ["preprocess", "analyze", "generate_score"],
    )
    partial = err.partial_result
    assert partial is not None
    assert partial.preprocess_step_result == "pre" and partial.score == 1.0
    assert partial.analyze_prompt == "Is 'o' relevant?" and partial.generate_reason_prompt is None
    assert partial.judge["analyze"].executions[0].status == "success"
    assert partial.judge["generate_reason"].executions == [failed]  # also on the judge error
    assert partial.reason is None


@pytest.mark.parametrize(
    "execution", [None, JudgeExecution(status="failed", prompt="p", model="m", attempt_count=0)]
)
async def test_a_first_step_failing_before_any_judge_attempt_leaves_no_partial_result(
        fake_judge: Any, execution: JudgeExecution | None) -> None:
    fake_judge(JudgeError("connection refused", execution=execution))
    scorer = (
        create_scorer(id="s", description="d", judge=JUDGE)
        .analyze(analyze_step())
        .generate_score(lambda: 1)
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(output="o")
    assert info.value.partial_result is None  # nothing completed, no attempt: Mastra's rule


async def test_unavailable_judge_is_a_clear_run_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "scorers._judge", None)
    scorer = create_scorer(id="s", description="d", judge=JUDGE).generate_score(
        description="Score it", create_prompt=lambda: "p"
    )
    with pytest.raises(
        ScorerRunError, match="^Scorer Run Failed: the LLM judge is not available: "
    ):
        await scorer.run()


async def test_function_steps_never_call_the_judge(fake_judge: Any) -> None:
    fake = fake_judge()
    scorer = create_scorer(id="s", description="d", judge=JUDGE).generate_score(lambda: 1)
    result = await scorer.run()
    assert fake.calls == [] and result.judge == {}
