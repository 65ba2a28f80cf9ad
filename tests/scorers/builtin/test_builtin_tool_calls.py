"""Code-based tool-call accuracy."""

from __future__ import annotations

from typing import Any

import pytest

from scorers import ScorerDefinitionError, ScorerRunError
from scorers.builtin import tool_call_accuracy_code
from scorers.utils import make_message, make_tool_call


def calls(*names: str, answer: str = "Done.") -> list[Any]:
    return [make_message("", role="assistant", tool_calls=[make_tool_call(n) for n in names]),
            make_message(answer, role="assistant")]


def score(scorer: Any, output: Any, input: Any = "Do it") -> float | None:
    return scorer.run_sync(input=input, output=output).score


def test_single_tool_lenient_and_strict() -> None:
    lenient = tool_call_accuracy_code(expected_tool="search")
    strict = tool_call_accuracy_code(expected_tool="search", strict_mode=True)
    assert (score(lenient, calls("search")), score(strict, calls("search"))) == (1.0, 1.0)
    assert (score(lenient, calls("fetch", "search")), score(strict, calls("fetch", "search"))) == (1.0, 0.0)
    assert (score(lenient, calls("search", "search")), score(strict, calls("search", "search"))) == (1.0, 0.0)
    assert score(lenient, calls("fetch")) == 0.0


def test_no_tool_calls_scores_zero() -> None:
    result = tool_call_accuracy_code(expected_tool="search").run_sync(input="q", output="Plain answer.")
    assert result.score == 0.0
    assert result.preprocess_step_result.has_tool_calls is False


def test_order_mode_strict_and_lenient_subsequence() -> None:
    lenient = tool_call_accuracy_code(expected_tool_order=["a", "c"])
    strict = tool_call_accuracy_code(expected_tool_order=["a", "c"], strict_mode=True)
    assert (score(lenient, calls("a", "b", "c")), score(strict, calls("a", "b", "c"))) == (1.0, 0.0)
    assert (score(lenient, calls("a", "c")), score(strict, calls("a", "c"))) == (1.0, 1.0)
    assert score(lenient, calls("c", "a")) == 0.0
    # Mastra compares first occurrences and fails this; a subsequence b, a exists
    assert score(tool_call_accuracy_code(expected_tool_order=["b", "a"]), calls("a", "b", "a")) == 1.0


def test_order_wins_over_single_tool_and_preprocess_reports_both() -> None:
    scorer = tool_call_accuracy_code(expected_tool="x", expected_tool_order=["a", "b"])
    result = scorer.run_sync(input="q", output=calls("a", "b"))
    pre = result.preprocess_step_result
    assert result.score == 1.0
    assert (pre.correct_tool_called, pre.correct_order_called, pre.actual_tools) == (False, True, ["a", "b"])
    assert [i.tool_call_id for i in pre.tool_call_infos] == ["0-0", "0-1"]


def test_mastra_json_tool_invocations() -> None:
    output = [{"role": "assistant", "content": {"format": 2, "parts": [
        {"type": "tool-invocation", "toolInvocation": {
            "state": "result", "toolCallId": "c1", "toolName": "weather", "args": {}, "result": "sun"}},
        {"type": "text", "text": "Sunny."}]}}]
    assert score(tool_call_accuracy_code(expected_tool="weather"), output) == 1.0


def test_definition_error_without_expectation() -> None:
    with pytest.raises(ScorerDefinitionError, match="Either expected_tool or expected_tool_order must be provided"):
        tool_call_accuracy_code()
    with pytest.raises(ScorerDefinitionError):
        tool_call_accuracy_code(expected_tool_order=[])


@pytest.mark.parametrize(("input", "output", "field"), [
    ("q", [], "run.output"), ("q", None, "run.output"), ([], calls("a"), "run.input"), (None, calls("a"), "run.input"),
])
def test_empty_input_or_output_fails_the_preprocess_step(input: Any, output: Any, field: str) -> None:
    with pytest.raises(ScorerRunError) as caught:
        tool_call_accuracy_code(expected_tool="a").run_sync(input=input, output=output)
    assert caught.value.failed_step == "preprocess"
    assert str(caught.value.__cause__) == "Input and output messages cannot be null or empty"
    assert caught.value.__cause__.field == field  # type: ignore[union-attr]
