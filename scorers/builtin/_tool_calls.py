"""Code-based tool-call accuracy: was the expected tool (or tool sequence) called."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from scorers._builder import Scorer
from scorers._create import create_scorer
from scorers.errors import ScorerDefinitionError, ScorerInputError
from scorers.utils import ToolCallInfo, extract_tool_calls


def is_subsequence(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """True when ``expected`` appears in ``actual`` in order (other calls may come between).

    Example:
        >>> (is_subsequence(["a", "c"], ["a", "b", "c"]), is_subsequence(["b", "a"], ["a", "b", "a"]))
        (True, True)
        >>> is_subsequence(["c", "a"], ["a", "b", "c"])
        False
    """
    remaining = iter(actual)
    return all(any(tool == wanted for tool in remaining) for wanted in expected)


def check_tool_order(actual: Sequence[str], expected: Sequence[str], strict: bool) -> bool:
    """Strict: ``actual`` is exactly ``expected``. Lenient: ``expected`` is a subsequence.

    Example:
        >>> (check_tool_order(["a", "b"], ["a", "b"], True), check_tool_order(["a", "x", "b"], ["a", "b"], True))
        (True, False)
    """
    return list(actual) == list(expected) if strict else is_subsequence(expected, actual)


class ToolCallAccuracyPreprocess(BaseModel):
    """The tool calls found in the output and the checks made on them."""

    expected_tool: str | None
    expected_tool_order: list[str] | None
    strict_mode: bool
    actual_tools: list[str]
    tool_call_infos: list[ToolCallInfo]
    has_tool_calls: bool
    correct_tool_called: bool
    correct_order_called: bool | None


def tool_call_accuracy_code(
    *,
    expected_tool: str | None = None,
    strict_mode: bool = False,
    expected_tool_order: Sequence[str] | None = None,
    id: str = "code-tool-call-accuracy",
) -> Scorer[Any, Any]:
    """1 when the agent called the expected tool (or tool sequence), else 0.

    Tool calls are those of `scorers.utils.extract_tool_calls` (named calls in state "call"
    or "result"), in order. No tool call at all gives 0.

    * Order mode (``expected_tool_order`` non-empty; wins over ``expected_tool``): strict
      requires exactly that sequence of calls; lenient requires it as a subsequence (other
      calls may come before, between and after). Mastra's lenient check compares the
      first occurrence of each tool, which wrongly fails ``["a", "b", "a"]`` against
      ``["b", "a"]``; we check a real subsequence.
    * Single-tool mode: lenient requires the tool among the calls; strict requires exactly
      one call, to that tool.

    Args:
        expected_tool: the tool that should be called.
        strict_mode: see above.
        expected_tool_order: the tools that should be called, in order.
        id: the scorer id.

    Raises:
        ScorerDefinitionError: neither ``expected_tool`` nor ``expected_tool_order`` given.

    At run time an input without messages or an output without messages fails the
    preprocess step with ``"Input and output messages cannot be null or empty"``.

    Example:
        >>> from scorers.utils import make_message, make_tool_call
        >>> scorer = tool_call_accuracy_code(expected_tool="get_weather")
        >>> scorer.run_sync(input="Weather in Paris?", output=[
        ...     make_message("", role="assistant", tool_calls=[make_tool_call("get_weather")]),
        ...     make_message("Sunny.", role="assistant")]).score
        1.0
    """
    if not expected_tool and not expected_tool_order:
        raise ScorerDefinitionError("Either expected_tool or expected_tool_order must be provided")
    order = list(expected_tool_order) if expected_tool_order else None

    def preprocess(run: Any) -> ToolCallAccuracyPreprocess:
        if not run.input or not run.input.input_messages:
            raise ScorerInputError("Input and output messages cannot be null or empty", field="run.input")
        if not run.output:
            raise ScorerInputError("Input and output messages cannot be null or empty", field="run.output")
        extracted = extract_tool_calls(run.output)
        actual = extracted.tools
        if expected_tool:
            correct = (len(actual) == 1 and actual[0] == expected_tool) if strict_mode else expected_tool in actual
        else:
            correct = False
        return ToolCallAccuracyPreprocess(
            expected_tool=expected_tool, expected_tool_order=order, strict_mode=strict_mode,
            actual_tools=actual, tool_call_infos=extracted.tool_call_infos,
            has_tool_calls=bool(actual), correct_tool_called=correct,
            correct_order_called=check_tool_order(actual, order, strict_mode) if order else None,
        )  # fmt: skip

    def score(results: Any) -> float:
        pre = results.preprocess_step_result
        if not pre.has_tool_calls:
            return 0.0
        if pre.correct_order_called is not None:
            return 1.0 if pre.correct_order_called else 0.0
        return 1.0 if pre.correct_tool_called else 0.0

    what = f"the tool sequence {order}" if order else f"the tool {expected_tool!r}"
    return (
        create_scorer(
            id=id,
            name="Tool Call Accuracy",
            description=f"1 when the agent called {what}{' (strict)' if strict_mode else ''}, else 0",
            type="agent",
        )
        .preprocess(preprocess)
        .generate_score(score)
    )


def tool_call_accuracy(judge: Any = None, **options: Any) -> Scorer[Any, Any]:
    """SPEC §1.6's "tool-call accuracy", both kinds: the LLM-judged scorer when a ``judge``
    is given (`tool_call_accuracy_llm`, with ``available_tools``), else the code-based one
    (`tool_call_accuracy_code`, with ``expected_tool`` or ``expected_tool_order``).

    Example:
        >>> tool_call_accuracy(expected_tool="get_weather").id
        'code-tool-call-accuracy'
        >>> tool_call_accuracy("openai/gpt-4o-mini", available_tools=["get_weather"]).id
        'llm-tool-call-accuracy'
    """
    if judge is None:
        return tool_call_accuracy_code(**options)
    from scorers.builtin._llm_alignment import tool_call_accuracy_llm

    return tool_call_accuracy_llm(judge, **options)
