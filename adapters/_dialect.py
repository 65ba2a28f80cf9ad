"""Framework dialects: what an agent framework writes into its messages that is not the user's or the model's words.

Owned by the adapters. A dialect is applied only where its framework is recognised (the
span's instrumentation scope or its framework attributes), to the span's messages and to
the model calls of a run whose agent span is the framework's. Recognised frameworks:

* **smolagents** (scope ``openinference.instrumentation.smolagents``, ``smolagents.*``
  attributes). Its memory sends the task as ``"New task:\\n<task>"``, replays tool calls as
  a ``tool-call`` message ``"Calling tools:\\n<Python list of calls>"`` and tool results as a
  ``tool-response`` message ``"Observation:\\n<result>"`` (``"Call id: <id>\\n"`` before an
  error), which become ``assistant``/``user`` messages on the wire. A run ends with a call
  of its ``final_answer`` tool: that call is the assistant's answer, not a tool call.

* **dspy** (scope ``openinference.instrumentation.dspy``). ReAct's model writes its tool
  choice as text; the trace shows the calls as TOOL spans, among them ``finish``, ReAct's
  own signal that the trajectory is complete: a control step, not a tool call of the agent.

Invariant: a dialect only rewrites messages it recognises; anything else passes unchanged.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from adapters._messages import Call, Msg, parse_json
from adapters._trace import TraceSpan
from adapters._view import SpanView

__all__ = ["DSPY", "SMOLAGENTS", "answer_of", "answer_tools", "apply_to_view", "framework_of", "normalise",
           "step_tools"]

SMOLAGENTS = "smolagents"
DSPY = "dspy"
_TASK_PREFIX = "New task:\n"
_CALLS_PREFIX = "Calling tools:\n"
_RESULT = re.compile(r"^(?:Call id: (?P<id>[^\n]*)\n)?(?:Observation:\n)?", re.DOTALL)
_ANSWER_TOOLS: dict[str, frozenset[str]] = {SMOLAGENTS: frozenset({"final_answer"})}
_STEP_TOOLS: dict[str, frozenset[str]] = {DSPY: frozenset({"finish"})}


def framework_of(span: TraceSpan) -> str | None:
    """The agent framework a span comes from, when it has a dialect here; else None.

    Example:
        >>> framework_of(TraceSpan("a" * 32, "b" * 16, None, "Step 1",
        ...                        scope_name="openinference.instrumentation.smolagents"))
        'smolagents'
        >>> framework_of(TraceSpan("a" * 32, "b" * 16, None, "chat")) is None
        True
    """
    if span.scope_name.startswith("openinference.instrumentation.smolagents"):
        return SMOLAGENTS
    if span.has_key_prefix("smolagents."):
        return SMOLAGENTS
    if span.scope_name.startswith("openinference.instrumentation.dspy"):
        return DSPY
    return None


def answer_tools(framework: str | None) -> frozenset[str]:
    """Names of the tools whose call is the framework's final answer (none for unknown frameworks).

    Example:
        >>> (sorted(answer_tools("smolagents")), answer_tools(None))
        (['final_answer'], frozenset())
    """
    return _ANSWER_TOOLS.get(framework or "", frozenset())


def step_tools(framework: str | None) -> frozenset[str]:
    """Names of the framework's own control steps recorded as tool spans: neither tool calls nor the answer.

    Example:
        >>> (sorted(step_tools("dspy")), step_tools("smolagents"))
        (['finish'], frozenset())
    """
    return _STEP_TOOLS.get(framework or "", frozenset())


def _parse_calls(text: str) -> tuple[Call, ...] | None:
    """smolagents' replayed calls (the repr of a list of call dicts), or None when it is not that."""
    try:
        raw = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(raw, list):
        return None
    calls = []
    for item in raw:
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return None
        calls.append(Call(id=str(item.get("id") or ""), name=fn["name"], arguments=fn.get("arguments")))
    return tuple(calls)


def _answer_text(call: Call) -> str:
    """The answer an answer-tool call carries (its ``answer`` argument, else all its arguments)."""
    args = call.arguments
    if isinstance(args, str) and args.strip()[:1] == "{":
        try:
            args = parse_json(args)
        except ValueError:
            pass
    if isinstance(args, dict) and "answer" in args:
        args = args["answer"]
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _tool_results(msg: Msg, pending: Sequence[Call]) -> list[Msg]:
    """Tool result message(s) from a replayed observation, linked to the calls it answers."""
    match = _RESULT.match(msg.content)
    body = msg.content[match.end() :] if match else msg.content
    call_id = match.group("id") if match and match.group("id") else None
    if len(pending) > 1 and call_id is None:
        # one observation for parallel calls: each result is filled in from its tool span
        return [Msg("tool", "", name=c.name, tool_call_id=c.id or None, placeholder=True) for c in pending]
    call = next((c for c in pending if c.id == call_id), pending[0] if pending else None)
    return [
        Msg("tool", body.strip(), tool_call_id=call_id or (call.id if call else None) or None,
            name=call.name if call else msg.name)
    ]


def _smolagents(msgs: Sequence[Msg]) -> list[Msg]:
    """The smolagents dialect: task prefix, replayed calls and observations, final_answer calls."""
    out: list[Msg] = []
    pending: tuple[Call, ...] = ()
    answers = answer_tools(SMOLAGENTS)
    for msg in msgs:
        if msg.role == "user" and msg.content.startswith(_TASK_PREFIX):
            msg = replace(msg, content=msg.content[len(_TASK_PREFIX) :])
        elif msg.role == "assistant" and not msg.tool_calls and msg.content.startswith(_CALLS_PREFIX):
            calls = _parse_calls(msg.content[len(_CALLS_PREFIX) :])
            if calls is not None:
                msg = replace(msg, content="", tool_calls=calls)
        if msg.role == "assistant" and msg.tool_calls:
            pending = msg.tool_calls
            if all(c.name in answers for c in msg.tool_calls):
                msg = replace(msg, content=_answer_text(msg.tool_calls[0]), tool_calls=())
                pending = ()
            out.append(msg)
            continue
        replayed_result = msg.role == "user" and pending and bool(out) and out[-1].tool_calls
        if (msg.role == "tool" and not msg.tool_call_id) or replayed_result:
            out.extend(_tool_results(msg, pending))
            pending = ()
            continue
        out.append(msg)
    return out


def normalise(framework: str | None, msgs: Sequence[Msg]) -> list[Msg]:
    """Rewrite a framework's messages into plain chat messages (unchanged for frameworks without a dialect).

    Example:
        >>> msgs = normalise("smolagents", [
        ...     Msg("user", "New task:\\nWhat is the weather in Paris?"),
        ...     Msg("assistant", "Calling tools:\\n[{'id': 'c1', 'type': 'function', "
        ...                      "'function': {'name': 'get_weather', 'arguments': {'city': 'Paris'}}}]"),
        ...     Msg("tool", "Observation:\\nsunny"),
        ...     Msg("assistant", "", (Call("c2", "final_answer", '{"answer": "It is sunny."}'),))])
        >>> [(m.role, m.content, [c.name for c in m.tool_calls], m.tool_call_id) for m in msgs]
        [('user', 'What is the weather in Paris?', [], None), ('assistant', '', ['get_weather'], None), \
('tool', 'sunny', [], 'c1'), ('assistant', 'It is sunny.', [], None)]
    """
    if framework == SMOLAGENTS:
        return _smolagents(msgs)
    return list(msgs)


def apply_to_view(view: SpanView, framework: str) -> None:
    """Read a span's messages (and agent name) with its framework's dialect, in place.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "terse_agent.run")
        >>> view = SpanView(span, "openinference", "agent", request=[Msg("user", "New task:\\nHi")])
        >>> apply_to_view(view, "smolagents")
        >>> (view.request[0].content, view.context["agent_name"], view.framework)
        ('Hi', 'terse_agent', 'smolagents')
    """
    view.framework = framework
    before = [(m.role, m.content) for m in (*view.request, *view.response)]
    view.request = normalise(framework, view.request)
    view.response = normalise(framework, view.response)
    if view.conversation is not None:
        view.conversation = normalise(framework, view.conversation)
    if [(m.role, m.content) for m in (*view.request, *view.response)] != before:
        view.notes.append(f"messages read with the {framework} dialect")
    if view.kind == "tool" and view.tool_name in answer_tools(framework):
        view.notes.append(f"answer tool of {framework}: its call is the run's final answer, not a tool call")
    if view.kind == "tool" and view.tool_name in step_tools(framework):
        view.notes.append(f"control step of {framework}: not a tool call of the agent")
    if framework == SMOLAGENTS and view.kind == "agent" and view.span.name.endswith(".run"):
        view.context.setdefault("agent_name", view.span.name[: -len(".run")])


def answer_of(tool: SpanView) -> Any:
    """The answer an answer-tool span carries: its result, else its ``answer`` argument.

    Example:
        >>> answer_of(SpanView(TraceSpan("a" * 32, "b" * 16, None, "FinalAnswerTool"), "openinference", "tool",
        ...                    tool_arguments={"answer": "42"}))
        '42'
    """
    if tool.tool_result is not None:
        return tool.tool_result
    args = tool.tool_arguments
    return args.get("answer") if isinstance(args, dict) else args
