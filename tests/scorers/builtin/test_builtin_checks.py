"""The `checks` micro-assertions."""

from __future__ import annotations

import re
from typing import Any

import pytest

from scorers import ScorerDefinitionError
from scorers.builtin import checks
from scorers.utils import make_message, make_tool_call


def score(scorer: Any, output: Any) -> float | None:
    return scorer.run_sync(input="q", output=output).score


def calls(*names: str) -> list[Any]:
    return [make_message("", role="assistant", tool_calls=[make_tool_call(n, result="ok") for n in names]),
            make_message("Done.", role="assistant")]


@pytest.mark.parametrize(("factory", "expected_id"), [
    (lambda: checks.includes("x"), "check-includes"),
    (lambda: checks.excludes("x"), "check-excludes"),
    (lambda: checks.equals("x"), "check-equals"),
    (lambda: checks.matches("x"), "check-matches"),
    (lambda: checks.similarity("x"), "check-similarity"),
    (lambda: checks.called_tool("x"), "check-called-tool"),
    (lambda: checks.did_not_call("x"), "check-did-not-call"),
    (lambda: checks.tool_order(["x"]), "check-tool-order"),
    (lambda: checks.max_tool_calls(1), "check-max-tool-calls"),
    (lambda: checks.used_no_tools(), "check-used-no-tools"),
    (lambda: checks.no_tool_errors(), "check-no-tool-errors"),
])
def test_default_ids_and_agent_type(factory: Any, expected_id: str) -> None:
    scorer = factory()
    assert (scorer.id, scorer.type) == (expected_id, "agent")


def test_custom_id() -> None:
    assert checks.includes("x", id="mentions-x").id == "mentions-x"


def test_includes_case_insensitive_by_default_and_lists_need_all() -> None:
    assert score(checks.includes("PARIS"), "Paris is nice") == 1.0
    assert score(checks.includes("PARIS", case_sensitive=True), "Paris is nice") == 0.0
    result = checks.includes(["paris", "rome"]).run_sync(input="q", output="Paris only")
    assert result.score == 0.0 and result.preprocess_step_result.details["missing"] == ["rome"]


def test_excludes() -> None:
    assert score(checks.excludes(["sorry", "as an ai"]), "Here you go") == 1.0
    result = checks.excludes(["sorry", "as an ai"]).run_sync(input="q", output="Sorry, as an AI...")
    assert result.score == 0.0 and result.preprocess_step_result.details["found"] == ["sorry", "as an ai"]


def test_equals_strips_and_ignores_case() -> None:
    assert score(checks.equals("Yes"), "  yes\n") == 1.0
    assert score(checks.equals("Yes", case_sensitive=True), "yes") == 0.0
    assert score(checks.equals("Yes"), "Yes!") == 0.0


def test_matches_string_and_compiled_patterns() -> None:
    assert score(checks.matches(r"order #\d+"), "Your ORDER #123 shipped") == 1.0
    assert score(checks.matches(r"order #\d+", case_sensitive=True), "Your ORDER #123 shipped") == 0.0
    assert score(checks.matches(re.compile("ORDER")), "order") == 0.0
    result = checks.matches(r"\d+").run_sync(input="q", output="abc 42 def")
    assert result.preprocess_step_result.details == {"pattern": r"\d+", "match": "42"}
    with pytest.raises(ScorerDefinitionError, match="invalid pattern"):
        checks.matches("(")


def test_similarity_raw_and_thresholded() -> None:
    assert score(checks.similarity("healed"), "sealed") == 0.8
    assert score(checks.similarity("HEALED"), "sealed") == 0.8
    assert score(checks.similarity("healed", threshold=0.8), "sealed") == 1.0
    assert score(checks.similarity("healed", threshold=0.81), "sealed") == 0.0
    with pytest.raises(ScorerDefinitionError, match="threshold must be between 0 and 1"):
        checks.similarity("x", threshold=1.5)


def test_text_checks_read_every_assistant_text_not_tool_results() -> None:
    output = [make_message("", role="assistant", tool_calls=[make_tool_call("s", result="secret")]),
              make_message("Public answer", role="assistant")]
    assert score(checks.excludes("secret"), output) == 1.0
    assert score(checks.includes("public answer"), output) == 1.0


def test_tool_presence_checks() -> None:
    assert score(checks.called_tool("search"), calls("fetch", "search")) == 1.0
    assert score(checks.called_tool("search"), "no tools") == 0.0
    assert score(checks.did_not_call("delete"), calls("search")) == 1.0
    assert score(checks.did_not_call("delete"), calls("delete")) == 0.0
    assert score(checks.used_no_tools(), "text") == 1.0
    assert score(checks.used_no_tools(), calls("search")) == 0.0


def test_tool_order_and_max_tool_calls() -> None:
    assert score(checks.tool_order(["a", "c"]), calls("a", "b", "c")) == 1.0
    assert score(checks.tool_order(["c", "a"]), calls("a", "b", "c")) == 0.0
    assert score(checks.tool_order(["a", "b"], strict=True), calls("a", "b")) == 1.0
    assert score(checks.max_tool_calls(2), calls("a", "b")) == 1.0
    result = checks.max_tool_calls(1).run_sync(input="q", output=calls("a", "b"))
    assert result.score == 0.0 and result.preprocess_step_result.details == {"limit": 1, "count": 2}
    assert score(checks.max_tool_calls(0), "text") == 1.0
    for bad in (-1, 1.5, True):
        with pytest.raises(ScorerDefinitionError, match="non-negative integer"):
            checks.max_tool_calls(bad)  # type: ignore[arg-type]
    with pytest.raises(ScorerDefinitionError, match="non-empty list"):
        checks.tool_order([])


def test_no_tool_errors_kinds_of_failure() -> None:
    ok = [make_message("", role="assistant", tool_calls=[make_tool_call("a", result={"rows": 1})])]
    assert score(checks.no_tool_errors(), ok) == 1.0
    assert score(checks.no_tool_errors(), "no tools") == 1.0
    error_result = [make_message("", role="assistant", tool_calls=[make_tool_call("a", result={"error": "x"})])]
    unfinished = [make_message("", role="assistant", tool_calls=[make_tool_call("a", state="call")])]
    output_error = [make_message("", role="assistant", tool_calls=[make_tool_call("a", state="output-error")])]
    for output in (error_result, unfinished, output_error):
        assert score(checks.no_tool_errors(), output) == 0.0


def test_no_tool_errors_matches_openai_style_tool_messages() -> None:
    answered = [{"role": "assistant", "tool_calls": [{"id": "c1", "name": "w", "arguments": "{}"}]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    assert score(checks.no_tool_errors(), answered) == 1.0
    failed_part = [{"role": "assistant", "tool_calls": [{"id": "c1", "name": "w", "arguments": "{}"}]},
                   {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "w",
                                                  "result": "boom", "isError": True}]}]
    result = checks.no_tool_errors().run_sync(input="q", output=failed_part)
    assert result.score == 0.0 and result.preprocess_step_result.details == {"failed": ["w"]}
