"""Test builders for agent runs: `make_message`, `make_tool_call`, `make_agent_run`.

Public through `scorers.utils`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scorers._agent_types import (
    Message,
    ReasoningPart,
    ScorerRunInputForAgent,
    ScorerRunOutputForAgent,
    ToolCall,
)
from scorers._run import ScorerRun
from scorers._text import to_message


def make_tool_call(
    name: str,
    arguments: Any = None,
    result: Any = None,
    *,
    id: str = "",
    state: str = "result",
) -> ToolCall:
    """Build a `ToolCall` for tests (state "result" by default, as in Mastra).

    Example:
        >>> make_tool_call("search", {"q": "x"}, ["hit"]).state
        'result'
    """
    return ToolCall(id=id, name=name, arguments=arguments, result=result, state=state)


def make_message(
    content: str = "",
    role: str = "user",
    *,
    tool_calls: Sequence[ToolCall | Mapping[str, Any]] = (),
    reasoning: str | None = None,
    id: str | None = None,
    name: str | None = None,
    tool_call_id: str | None = None,
) -> Message:
    """Build a `Message` for tests.

    Example:
        >>> m = make_message("Let me check.", role="assistant", tool_calls=[make_tool_call("search")])
        >>> (m.role, m.content, m.tool_calls[0].name, [p.type for p in m.parts])
        ('assistant', 'Let me check.', 'search', ['text', 'tool-call'])
    """
    parts: list[Any] = [ReasoningPart(text=reasoning)] if reasoning else []
    return Message.model_validate(
        {
            "role": role,
            "content": content,
            "parts": parts,
            "tool_calls": [
                c if isinstance(c, ToolCall) else ToolCall.model_validate(c) for c in tool_calls
            ],
            "id": id,
            "name": name,
            "tool_call_id": tool_call_id,
        }
    )


def _message_list(values: Any, role: str) -> list[Message]:
    if values is None:
        return []
    if isinstance(values, str | Message | Mapping):
        values = [values]
    messages = []
    for value in values:
        message = to_message(value, role)
        if message is None:
            raise ValueError(f"not a message: {value!r}")
        messages.append(message)
    return messages


def make_agent_run(
    input_messages: Any = (),
    output: Any = (),
    *,
    remembered_messages: Any = (),
    system_messages: Any = (),
    tagged_system_messages: Mapping[str, Any] | None = None,
    ground_truth: Any = None,
    request_context: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
    start_ns: int | None = None,
) -> ScorerRun[ScorerRunInputForAgent, ScorerRunOutputForAgent]:
    """Build an agent-typed `ScorerRun` for tests; pass it to ``scorer.run(run)``.

    Strings become messages: user messages for the input and remembered history,
    assistant messages for the output, system messages for ``system_messages``.
    ``start_ns`` (when the run started, nanoseconds since the epoch) orders the run as a
    turn of a `ConversationRun`; the run keeps it as an extra field.

    Example:
        >>> run = make_agent_run("Hi", "Hello!", system_messages=["Be kind."], run_id="r1")
        >>> (run.input.input_messages[0].role, run.output[0].content, run.input.system_messages[0].content, run.run_id)
        ('user', 'Hello!', 'Be kind.', 'r1')
    """
    tagged = {
        tag: _message_list(group, "system") for tag, group in (tagged_system_messages or {}).items()
    }
    run_input = ScorerRunInputForAgent(
        input_messages=_message_list(input_messages, "user"),
        remembered_messages=_message_list(remembered_messages, "user"),
        system_messages=_message_list(system_messages, "system"),
        tagged_system_messages=tagged,
    )
    return ScorerRun(
        input=run_input,
        output=ScorerRunOutputForAgent(_message_list(output, "assistant")),
        ground_truth=ground_truth,
        request_context=dict(request_context or {}),
        run_id=run_id or "",
        trace_id=trace_id,
        span_id=span_id,
        **({} if start_ns is None else {"start_ns": start_ns}),
    )
