"""Agent-typed and custom-typed scorers: coercion of run.input / run.output (SPEC §1.3)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from scorers import (
    Message,
    ScorerInputError,
    ScorerRun,
    ScorerRunError,
    ScorerRunInputForAgent,
    ScorerRunOutputForAgent,
    ToolCallPart,
    create_scorer,
)


def capture() -> tuple[list[ScorerRun[Any, Any]], Any]:
    seen: list[ScorerRun[Any, Any]] = []

    def score(run: ScorerRun[Any, Any]) -> float:
        seen.append(run)
        return 1.0

    return seen, score


async def test_agent_scorer_coerces_plain_strings() -> None:
    seen, score = capture()
    scorer = create_scorer(id="a", description="d", type="agent").generate_score(score)
    result = await scorer.run(input="What is the capital of France?", output="Paris.")
    run = seen[0]
    assert isinstance(run.input, ScorerRunInputForAgent)
    assert [(m.role, m.content) for m in run.input.input_messages] == [
        ("user", "What is the capital of France?")
    ]
    assert isinstance(run.output, ScorerRunOutputForAgent)
    assert [(m.role, m.content) for m in run.output] == [("assistant", "Paris.")]
    assert isinstance(result.input, ScorerRunInputForAgent)
    assert isinstance(result.output, ScorerRunOutputForAgent)


async def test_agent_scorer_coerces_mastra_camel_case_json() -> None:
    seen, score = capture()
    scorer = create_scorer(id="a", description="d", type="agent").generate_score(score)
    mastra_input = {
        "inputMessages": [
            {
                "id": "m1",
                "role": "user",
                "content": {"format": 2, "parts": [{"type": "text", "text": "Weather?"}]},
            }
        ],
        "rememberedMessages": [{"role": "assistant", "content": "Hello"}],
        "systemMessages": [{"role": "system", "content": "Be terse."}],
        "taggedSystemMessages": {"memory": [{"role": "system", "content": "User likes sun"}]},
    }
    mastra_output = [
        {
            "role": "assistant",
            "content": {
                "format": 2,
                "parts": [
                    {
                        "type": "tool-invocation",
                        "toolInvocation": {
                            "state": "result",
                            "toolCallId": "c1",
                            "toolName": "weather",
                            "args": {"city": "Paris"},
                            "result": "sunny",
                        },
                    },
                    {"type": "text", "text": "Sunny."},
                ],
            },
        }
    ]
    await scorer.run(input=mastra_input, output=mastra_output)
    run = seen[0]
    assert run.input.input_messages[0].content == "Weather?"
    assert run.input.remembered_messages[0].content == "Hello"
    assert run.input.system_messages[0].content == "Be terse."
    assert run.input.tagged_system_messages["memory"][0].content == "User likes sun"
    message = run.output[0]
    assert (message.content, message.tool_calls[0].name, message.tool_calls[0].result) == (
        "Sunny.",
        "weather",
        "sunny",
    )


async def test_agent_scorer_keeps_model_instances_as_given() -> None:
    seen, score = capture()
    scorer = create_scorer(id="a", description="d", type="agent").generate_score(score)
    run_input = ScorerRunInputForAgent(input_messages=[Message(role="user", content="hi")])
    run_output = ScorerRunOutputForAgent([Message(role="assistant", content="yo")])
    await scorer.run(input=run_input, output=run_output)
    assert seen[0].input is run_input and seen[0].output is run_output


async def test_agent_scorer_turns_none_into_empty_models() -> None:
    seen, score = capture()
    await create_scorer(id="a", description="d", type="agent").generate_score(score).run()
    assert seen[0].input == ScorerRunInputForAgent()
    assert list(seen[0].output) == []


async def test_agent_scorer_rejects_invalid_messages_naming_the_field() -> None:
    scorer = create_scorer(id="a", description="d", type="agent").generate_score(lambda: 1)
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(input={"inputMessages": [{"role": "robot", "content": "x"}]})
    cause = info.value.__cause__
    assert isinstance(cause, ScorerInputError) and cause.field == "run.input"
    assert "inputMessages.0.role: Input should be" in str(cause)
    assert str(info.value).startswith(
        'Scorer Run Failed: Scorer "a": run.input is not a valid ScorerRunInputForAgent: '
    )
    assert info.value.failed_step is None


async def test_agent_types_are_coerced_before_prepare_run_and_again_after() -> None:
    seen_by_prepare: list[Any] = []

    def prepare(run: ScorerRun[Any, Any]) -> dict[str, Any]:
        seen_by_prepare.append(run.input)
        return {"input": "rewritten question", "output": "rewritten answer", "runId": run.run_id}

    seen, score = capture()
    scorer = create_scorer(id="a", description="d", type="agent", prepare_run=prepare)
    await scorer.generate_score(score).run(input="q", output="a")
    assert isinstance(seen_by_prepare[0], ScorerRunInputForAgent)
    assert seen[0].input.input_messages[0].content == "rewritten question"
    assert seen[0].output[0].content == "rewritten answer"


class Question(BaseModel):
    question: str
    language: str = "en"


class Answer(BaseModel):
    text: str
    confidence: float


async def test_custom_types_validate_dicts_into_models() -> None:
    seen: list[ScorerRun[Question, Answer]] = []

    def score(run: ScorerRun[Question, Answer]) -> float:
        seen.append(run)
        return run.output.confidence

    scorer = create_scorer(
        id="c", description="d", input_type=Question, output_type=Answer
    ).generate_score(score)
    result = await scorer.run(input={"question": "2+2?"}, output={"text": "4", "confidence": 0.9})
    assert seen[0].input == Question(question="2+2?")
    assert result.score == 0.9 and result.output == Answer(text="4", confidence=0.9)


async def test_custom_input_type_failure_names_the_field() -> None:
    scorer = create_scorer(id="c", description="d", input_type=Question).generate_score(lambda: 1)
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(input={"language": "fr"})
    assert str(info.value) == (
        'Scorer Run Failed: Scorer "c": run.input is not a valid Question: question: Field required'
    )
    cause = info.value.__cause__
    assert isinstance(cause, ScorerInputError) and cause.field == "run.input"


async def test_custom_output_type_failure_names_the_field() -> None:
    scorer = create_scorer(id="c", description="d", output_type=Answer).generate_score(lambda: 1)
    with pytest.raises(ScorerRunError, match="run.output is not a valid Answer: confidence: "):
        await scorer.run(output={"text": "4", "confidence": "very"})


async def test_prepare_run_result_is_validated_against_custom_types() -> None:
    scorer = create_scorer(
        id="c",
        description="d",
        input_type=Question,
        prepare_run=lambda run: run.model_copy(update={"input": {"nope": 1}}),
    ).generate_score(lambda: 1)
    with pytest.raises(ScorerRunError, match="run.input is not a valid Question") as info:
        await scorer.run(input={"question": "q"})
    assert info.value.failed_step == "prepare_run"


async def test_untyped_scorer_passes_values_through() -> None:
    seen, score = capture()
    payload = {"anything": [1, 2]}
    await create_scorer(id="u", description="d").generate_score(score).run(input=payload)
    assert seen[0].input is payload


def test_mastra_tool_invocation_error_flag_is_kept() -> None:
    failed = {
        "role": "assistant",
        "content": {"format": 2, "parts": [
            {"type": "tool-invocation", "toolInvocation": {
                "state": "result", "toolCallId": "c1", "toolName": "search", "args": {},
                "result": "quota exceeded", "isError": True}},
            {"type": "tool-invocation", "toolInvocation": {
                "state": "output-error", "toolCallId": "c2", "toolName": "fetch", "args": {},
                "errorText": "404"}},
            {"type": "tool-invocation", "toolInvocation": {
                "state": "result", "toolCallId": "c3", "toolName": "ok", "args": {}, "result": 1}},
        ]},
    }
    message = Message.model_validate(failed)
    assert [(c.name, c.is_error, c.result) for c in message.tool_calls] == [
        ("search", True, "quota exceeded"), ("fetch", True, "404"), ("ok", False, 1)]
    assert [p.is_error for p in message.parts if isinstance(p, ToolCallPart)] == [True, True, False]
