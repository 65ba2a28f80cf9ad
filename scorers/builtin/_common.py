"""Shared helpers of the built-in scorers: run text, tool calls, and judge resolution.

Built-in scorers are agent scorers (``type="agent"``), so run.input is a
`ScorerRunInputForAgent` and run.output a `ScorerRunOutputForAgent`; plain strings are
coerced into a user message / an assistant message before any step runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scorers._agent_types import ScorerRunInputForAgent
from scorers._judge_types import Judge, merge_judges
from scorers._text import output_messages
from scorers.errors import ScorerDefinitionError
from scorers.utils import extract_tool_results, get_assistant_message, get_user_message

JudgeOption = Judge | Mapping[str, Any] | str


def input_text(run_input: Any, sep: str = ", ") -> str:
    """The text of every input message with text, joined with ``sep`` (Mastra's code scorers)."""
    if isinstance(run_input, ScorerRunInputForAgent):
        texts = [m.content for m in run_input.input_messages]
    elif isinstance(run_input, str):
        texts = [run_input]
    else:
        texts = [get_user_message(run_input) or ""]
    return sep.join(t for t in texts if t)


def output_text(run_output: Any, sep: str = ", ") -> str:
    """The text of every assistant message with text, joined with ``sep``."""
    return sep.join(m.content for m in output_messages(run_output) if m.role == "assistant" and m.content)


def user_text(run_input: Any) -> str:
    """The user's message ("" when there is none)."""
    return get_user_message(run_input) or ""


def answer_text(run_output: Any) -> str:
    """The agent's answer: the last assistant message with text ("" when there is none)."""
    return get_assistant_message(run_output) or ""


def tool_results_text(run_output: Any) -> list[str]:
    """Each tool result of the output as a string (strings kept, other values as JSON-ish text)."""
    import json

    texts = []
    for info in extract_tool_results(run_output):
        result = info.result
        texts.append(result if isinstance(result, str) else json.dumps(result, default=str))
    return texts


def resolve_judge(judge: JudgeOption | None, instructions: str, scorer: str) -> Judge:
    """The scorer's judge: a `Judge`, a dict of its fields, or a model string.

    The scorer's default instructions are used when the judge gives none.
    """
    if judge is None:
        raise ScorerDefinitionError(f"{scorer}: a judge is required (a Judge, a dict or a model string)")
    if isinstance(judge, str):
        given = Judge(model=judge)
    elif isinstance(judge, Judge):
        given = judge
    elif isinstance(judge, Mapping):
        given = Judge.model_validate(dict(judge))
    else:
        raise ScorerDefinitionError(f"{scorer}: judge must be a Judge, a dict or a model string, got {judge!r}")
    if given.model is None:
        raise ScorerDefinitionError(f"{scorer}: the judge needs a model")
    return merge_judges(Judge(instructions=instructions), given)


def check_scale(scale: float, scorer: str) -> float:
    """``scale`` as a float; it must be positive."""
    if isinstance(scale, bool) or not isinstance(scale, int | float) or scale <= 0:
        raise ScorerDefinitionError(f"{scorer}: scale must be a positive number, got {scale!r}")
    return float(scale)


def numbered(items: Sequence[str]) -> str:
    """``items`` as a numbered list, one per line (``"(none)"`` when empty)."""
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1)) or "(none)"


__all__ = [
    "JudgeOption",
    "answer_text",
    "check_scale",
    "input_text",
    "numbered",
    "output_text",
    "resolve_judge",
    "tool_results_text",
    "user_text",
]
