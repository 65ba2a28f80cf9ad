"""Micro-assertions (Mastra's ``checks``): tiny 0/1 scorers over the answer text or the tool calls.

Each factory returns a normal agent scorer whose default id is ``check-<name>``
(``check-includes``, ``check-called-tool``...). Text checks read the answer: every
assistant message's text, joined with newlines. They are case-insensitive unless
``case_sensitive=True``. Tool checks read the named tool calls of the output (state
"call" or "result"), in order. The step result (preprocess) says what was checked.

Example:
    >>> from scorers.builtin import checks
    >>> checks.includes("paris").run_sync(input="Capital of France?", output="Paris.").score
    1.0
    >>> checks.used_no_tools().id
    'check-used-no-tools'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from scorers._agent_types import ToolResultPart
from scorers._builder import Scorer
from scorers._create import create_scorer
from scorers._text import output_messages
from scorers.builtin._common import output_text
from scorers.builtin._similarity import dice_similarity
from scorers.builtin._tool_calls import check_tool_order
from scorers.errors import ScorerDefinitionError
from scorers.utils import extract_tool_calls, round_to_two_decimals

__all__ = [
    "CheckResult",
    "called_tool",
    "did_not_call",
    "equals",
    "excludes",
    "includes",
    "matches",
    "max_tool_calls",
    "no_tool_errors",
    "similarity",
    "tool_order",
    "used_no_tools",
]


class CheckResult(BaseModel):
    """What a check looked at and found (the preprocess step result of every check)."""

    passed: bool
    value: float
    details: dict[str, Any]


def _check(name: str, description: str, id: str | None, fn: Callable[[Any], CheckResult]) -> Scorer[Any, Any]:
    return (
        create_scorer(id=id or f"check-{name}", name=f"check {name}", description=description, type="agent")
        .preprocess(fn)
        .generate_score(lambda results: results.preprocess_step_result.value)
    )


def _texts(value: str | Sequence[str], what: str) -> list[str]:
    texts = [value] if isinstance(value, str) else list(value)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ScorerDefinitionError(f"{what}: give a string or a non-empty list of strings, got {value!r}")
    return texts


def _answer(run: Any, case_sensitive: bool) -> str:
    text = output_text(run.output, "\n")
    return text if case_sensitive else text.lower()


def _passed(ok: bool, **details: Any) -> CheckResult:
    return CheckResult(passed=ok, value=1.0 if ok else 0.0, details=details)


def includes(text: str | Sequence[str], *, case_sensitive: bool = False, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the answer contains ``text`` (every one of them, for a list), else 0.

    Example:
        >>> includes(["paris", "France"]).run_sync(input="q", output="Paris is in France.").score
        1.0
    """
    wanted = _texts(text, "checks.includes")

    def run_check(run: Any) -> CheckResult:
        answer = _answer(run, case_sensitive)
        missing = [t for t in wanted if (t if case_sensitive else t.lower()) not in answer]
        return _passed(not missing, expected=wanted, missing=missing)

    return _check("includes", f"The answer includes {wanted}", id, run_check)


def excludes(text: str | Sequence[str], *, case_sensitive: bool = False, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the answer contains none of ``text``, else 0.

    Example:
        >>> excludes("as an ai").run_sync(input="q", output="As an AI, I cannot.").score
        0.0
    """
    banned = _texts(text, "checks.excludes")

    def run_check(run: Any) -> CheckResult:
        answer = _answer(run, case_sensitive)
        found = [t for t in banned if (t if case_sensitive else t.lower()) in answer]
        return _passed(not found, banned=banned, found=found)

    return _check("excludes", f"The answer excludes {banned}", id, run_check)


def equals(text: str, *, case_sensitive: bool = False, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the answer equals ``text`` (both stripped of surrounding whitespace), else 0.

    Example:
        >>> equals("42").run_sync(input="q", output=" 42\\n").score
        1.0
    """
    expected = _texts(text, "checks.equals")[0]

    def run_check(run: Any) -> CheckResult:
        answer = _answer(run, case_sensitive).strip()
        wanted = (expected if case_sensitive else expected.lower()).strip()
        return _passed(answer == wanted, expected=expected, actual=answer)

    return _check("equals", f"The answer equals {expected!r}", id, run_check)


def matches(pattern: str | re.Pattern[str], *, case_sensitive: bool = False, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the regular expression is found in the answer (``re.search``), else 0.

    A string pattern is compiled with ``re.IGNORECASE`` unless ``case_sensitive``; a
    compiled pattern is used as it is.

    Raises:
        ScorerDefinitionError: the pattern does not compile.

    Example:
        >>> matches(r"\\d{4}-\\d{2}-\\d{2}").run_sync(input="q", output="Due 2024-05-01.").score
        1.0
    """
    if isinstance(pattern, re.Pattern):
        compiled = pattern
    else:
        try:
            compiled = re.compile(pattern, 0 if case_sensitive else re.IGNORECASE)
        except (re.error, TypeError) as exc:
            raise ScorerDefinitionError(f"checks.matches: invalid pattern {pattern!r}: {exc}") from exc

    def run_check(run: Any) -> CheckResult:
        found = compiled.search(output_text(run.output, "\n"))
        return _passed(found is not None, pattern=compiled.pattern, match=found.group(0) if found else None)

    return _check("matches", f"The answer matches /{compiled.pattern}/", id, run_check)


def similarity(
    expected: str, *, threshold: float | None = None, case_sensitive: bool = False, id: str | None = None
) -> Scorer[Any, Any]:
    """Dice similarity (`dice_similarity`) of the answer and ``expected``, rounded to two
    decimals; with ``threshold``, 1 when the similarity is at least the threshold, else 0.

    Raises:
        ScorerDefinitionError: a threshold outside 0-1.

    Example:
        >>> similarity("night").run_sync(input="q", output="nacht").score
        0.25
        >>> similarity("night", threshold=0.2).run_sync(input="q", output="nacht").score
        1.0
    """
    if threshold is not None and not (isinstance(threshold, int | float) and 0 <= threshold <= 1):
        raise ScorerDefinitionError(f"checks.similarity: threshold must be between 0 and 1, got {threshold!r}")
    reference = expected if case_sensitive else expected.lower()

    def run_check(run: Any) -> CheckResult:
        value = round_to_two_decimals(dice_similarity(_answer(run, case_sensitive), reference))
        if threshold is None:
            return CheckResult(passed=True, value=value, details={"similarity": value})
        ok = value >= threshold
        return CheckResult(passed=ok, value=1.0 if ok else 0.0, details={"similarity": value, "threshold": threshold})

    return _check("similarity", f"The answer is similar to {expected!r}", id, run_check)


def _tools(run: Any) -> list[str]:
    return extract_tool_calls(run.output).tools


def called_tool(name: str, *, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the agent called tool ``name`` at least once, else 0.

    Example:
        >>> from scorers.utils import make_message, make_tool_call
        >>> called_tool("search").run_sync(input="q", output=[
        ...     make_message("", role="assistant", tool_calls=[make_tool_call("search")])]).score
        1.0
    """
    return _check(
        "called-tool", f"The agent called {name!r}", id,
        lambda run: _passed(name in (tools := _tools(run)), tool=name, calls=tools),
    )  # fmt: skip


def did_not_call(name: str, *, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the agent never called tool ``name``, else 0.

    Example:
        >>> did_not_call("delete_user").run_sync(input="q", output="No tools used.").score
        1.0
    """
    return _check(
        "did-not-call", f"The agent did not call {name!r}", id,
        lambda run: _passed(name not in (tools := _tools(run)), tool=name, calls=tools),
    )  # fmt: skip


def tool_order(names: Sequence[str], *, strict: bool = False, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the tools were called in this order, else 0.

    Lenient (default): ``names`` is a subsequence of the calls; strict: the calls are
    exactly ``names``.

    Example:
        >>> from scorers.utils import make_message, make_tool_call
        >>> calls = [make_message("", role="assistant", tool_calls=[make_tool_call(t) for t in ("a", "b", "c")])]
        >>> (tool_order(["a", "c"]).run_sync(input="q", output=calls).score,
        ...  tool_order(["a", "c"], strict=True).run_sync(input="q", output=calls).score)
        (1.0, 0.0)
    """
    expected = _texts(names, "checks.tool_order")

    def run_check(run: Any) -> CheckResult:
        tools = _tools(run)
        return _passed(check_tool_order(tools, expected, strict), expected=expected, calls=tools, strict=strict)

    return _check("tool-order", f"The agent called {expected} in order", id, run_check)


def max_tool_calls(limit: int, *, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the agent made at most ``limit`` tool calls, else 0.

    Raises:
        ScorerDefinitionError: ``limit`` is not a non-negative integer.

    Example:
        >>> max_tool_calls(3).run_sync(input="q", output="no tools").score
        1.0
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ScorerDefinitionError(f"checks.max_tool_calls: limit must be a non-negative integer, got {limit!r}")
    return _check(
        "max-tool-calls", f"The agent made at most {limit} tool calls", id,
        lambda run: _passed(len(tools := _tools(run)) <= limit, limit=limit, count=len(tools)),
    )  # fmt: skip


def used_no_tools(*, id: str | None = None) -> Scorer[Any, Any]:
    """1 when the agent called no tool, else 0.

    Example:
        >>> used_no_tools().run_sync(input="q", output="Just text.").score
        1.0
    """
    return _check(
        "used-no-tools", "The agent called no tool", id,
        lambda run: _passed(not (tools := _tools(run)), calls=tools),
    )  # fmt: skip


def _is_error_result(result: Any) -> bool:
    return isinstance(result, Mapping) and bool(result.get("error"))


def tool_errors(run_output: Any) -> list[str]:
    """The names of the tool calls that failed.

    A call failed when it is marked ``is_error`` (Mastra's ``isError``) or its state is
    ``"output-error"``; when its result (on the call, or in
    a matching tool-result part or ``tool`` message) is a mapping with a truthy ``error``;
    when that tool-result part is marked ``is_error``; or when it never got a result (state
    ``"call"`` and no matching tool result), as Mastra counts an unfinished invocation.

    Example:
        >>> from scorers.utils import make_message, make_tool_call
        >>> tool_errors([make_message("", role="assistant", tool_calls=[
        ...     make_tool_call("ok", result=1), make_tool_call("bad", result={"error": "boom"}),
        ...     make_tool_call("lost", state="call")])])
        ['bad', 'lost']
    """
    messages = output_messages(run_output)
    results: dict[str, tuple[Any, bool]] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolResultPart) and part.tool_call_id:
                results[part.tool_call_id] = (part.result, part.is_error)
        if message.role == "tool" and message.tool_call_id and message.tool_call_id not in results:
            results[message.tool_call_id] = (message.content, False)
    failed = []
    for message in messages:
        for call in message.tool_calls:
            if not call.name:
                continue
            matched = results.get(call.id) if call.id else None
            if call.is_error or call.state == "output-error" or _is_error_result(call.result):
                failed.append(call.name)
            elif matched is not None:
                if matched[1] or _is_error_result(matched[0]):
                    failed.append(call.name)
            elif call.state != "result":
                failed.append(call.name)
    return failed


def no_tool_errors(*, id: str | None = None) -> Scorer[Any, Any]:
    """1 when no tool call failed (see `tool_errors`), else 0. No tool call gives 1.

    Example:
        >>> from scorers.utils import make_message, make_tool_call
        >>> no_tool_errors().run_sync(input="q", output=[make_message("", role="assistant",
        ...     tool_calls=[make_tool_call("search", result={"error": "timeout"})])]).score
        0.0
    """
    return _check(
        "no-tool-errors", "No tool call failed", id,
        lambda run: _passed(not (failed := tool_errors(run.output)), failed=failed),
    )  # fmt: skip
