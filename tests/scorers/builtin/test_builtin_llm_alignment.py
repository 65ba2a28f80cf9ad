"""Prompt alignment and LLM tool-call accuracy against the fake judge server."""

from __future__ import annotations

from typing import Any

import pytest
from builtin_support import by_prefix, prompts

from scorers import Judge, ScorerDefinitionError, ScorerRunError
from scorers.builtin import prompt_alignment, tool_call_accuracy_llm
from scorers.utils import make_agent_run, make_message, make_tool_call


def alignment(intent: float, req: float, comp: float, appr: float) -> dict[str, Any]:
    return {"intent_alignment": intent, "requirements_fulfillment": req, "completeness": comp,
            "response_appropriateness": appr, "requirements": [{"requirement": "list 3", "fulfilled": False}],
            "missing_elements": ["third item"], "reasoning": "r"}


RUN = make_agent_run("List three fruits", "Apple, pear.", system_messages=["Answer in French."])


async def test_user_mode_weights(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Evaluate how well": {"user": alignment(1, 0.5, 0.5, 1)},
                                  "Explain the prompt alignment": "Missed one fruit."})
    result = await prompt_alignment(judge, evaluation_mode="user").run(input=RUN.input, output=RUN.output)
    assert result.score == 0.75  # 0.4 + 0.15 + 0.1 + 0.1
    sent = prompts(server)
    assert "User prompt:\nList three fruits" in sent[0] and "System prompt" not in sent[0]
    assert sent[0].endswith("Answer:\nApple, pear.")
    assert "missing [\"third item\"]" in sent[1]
    assert result.analyze_step_result.user.requirements[0].fulfilled is False


async def test_system_mode_weights(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Evaluate how well": {"system": alignment(0, 1, 1, 0)}, "Explain": "x"})
    result = await prompt_alignment(judge, evaluation_mode="system", scale=10).run(input=RUN.input, output=RUN.output)
    assert result.score == 5.0  # (0.35 + 0.15) * 10
    assert "System prompt:\nAnswer in French." in prompts(server)[0]
    assert "User prompt" not in prompts(server)[0]


async def test_both_mode_judges_user_and_system_separately(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Evaluate how well": {"user": alignment(1, 1, 1, 1), "system": alignment(0, 0, 0, 0)},
                                  "Explain": "x"})
    result = await prompt_alignment(judge).run(input=RUN.input, output=RUN.output)
    assert result.score == 0.7  # 0.7 * 1 + 0.3 * 0 (Mastra would give 1.0)
    sent = prompts(server)[0]
    assert "System prompt:\nAnswer in French." in sent and "User prompt:\nList three fruits" in sent
    assert set(server.requests[0].body["response_format"]["json_schema"]["schema"]["properties"]) == {"user", "system"}


@pytest.mark.parametrize(("mode", "run_input", "output", "message"), [
    ("user", "q", "", "Agent response is required for prompt alignment scoring"),
    ("system", "q", "a", "System prompt is required for system prompt alignment scoring"),
    ("both", "q", "a", "System prompt is required for both prompt alignment scoring"),
    ("user", {"systemMessages": ["s"]}, "a", "User prompt is required for user prompt alignment scoring"),
])
async def test_missing_prompts_fail_the_analyze_step(server: Any, judge: Judge, mode: Any, run_input: Any,
                                                     output: str, message: str) -> None:
    with pytest.raises(ScorerRunError) as caught:
        await prompt_alignment(judge, evaluation_mode=mode).run(input=run_input, output=output)
    assert caught.value.failed_step == "analyze" and str(caught.value.__cause__) == message
    assert server.requests == []


def test_prompt_alignment_bad_mode() -> None:
    with pytest.raises(ScorerDefinitionError, match="evaluation_mode must be"):
        prompt_alignment("openai/gpt-4o-mini", evaluation_mode="all")  # type: ignore[arg-type]


TOOLS = [{"name": "get_weather", "description": "Weather for a city"}, "search"]


def with_calls(*names: str) -> list[Any]:
    return [make_message("", role="assistant", tool_calls=[make_tool_call(n) for n in names]),
            make_message("Done.", role="assistant")]


async def test_tool_accuracy_llm_appropriate_share(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({
        "Evaluate the agent's tool calls": {"evaluations": [
            {"tool_called": "get_weather", "was_appropriate": True, "reasoning": "asked weather"},
            {"tool_called": "search", "was_appropriate": False, "reasoning": "not needed"}], "missing_tools": []},
        "Explain the tool call accuracy": "One needless search.",
    })
    result = await tool_call_accuracy_llm(judge, available_tools=TOOLS).run(
        input="Weather in Paris?", output=with_calls("get_weather", "search"))
    assert result.score == 0.5
    assert result.preprocess_step_result.actual_tools == ["get_weather", "search"]
    sent = prompts(server)
    assert "- get_weather: Weather for a city\n- search" in sent[0]
    assert 'Tool calls made:\n["get_weather", "search"]' in sent[0] and "User request:\nWeather in Paris?" in sent[0]
    assert "- search: inappropriate (not needed)" in sent[1]


@pytest.mark.parametrize(("missing", "expected"), [([], 1.0), (["get_weather"], 0.0)])
async def test_tool_accuracy_llm_no_calls(server: Any, judge: Judge, missing: list[str], expected: float) -> None:
    server.responder = by_prefix({"Evaluate the agent's tool calls": {"evaluations": [], "missing_tools": missing},
                                  "Explain": "x"})
    result = await tool_call_accuracy_llm(judge, available_tools=TOOLS).run(input="Hi", output="Hello!")
    assert result.score == expected


async def test_tool_accuracy_llm_calls_without_evaluations_is_zero(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Evaluate the agent's tool calls": {"evaluations": []}, "Explain": "x"})
    result = await tool_call_accuracy_llm(judge, available_tools=TOOLS).run(input="q", output=with_calls("search"))
    assert result.score == 0.0


def test_tool_accuracy_llm_definition_errors() -> None:
    with pytest.raises(ScorerDefinitionError, match="available_tools must be a non-empty list"):
        tool_call_accuracy_llm("openai/gpt-4o-mini", available_tools=[])
    with pytest.raises(ScorerDefinitionError, match="a tool needs a name"):
        tool_call_accuracy_llm("openai/gpt-4o-mini", available_tools=[{"description": "nameless"}])
