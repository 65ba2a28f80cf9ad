"""Helpers for step code: where to find the user's question, the answer, tools, system prompts.

Every helper accepts our pydantic types (`ScorerRunInputForAgent`, `ScorerRunOutputForAgent`,
`Message`), plain dicts and Mastra's camelCase JSON (``inputMessages``, ``content: {format:
2, parts}``), lists of messages, plain strings, and a whole `ScorerRun` (its input or output
is used). Text follows Mastra's rules (``@mastra/evals/scorers/utils``); where Mastra reads
"the first assistant message", we read the last assistant message that has text, because
our outputs hold every message of a tool loop (tool calls, tool results, then the answer).

Example:
    >>> run = make_agent_run("What is the weather in Paris?", [
    ...     make_message("", role="assistant", tool_calls=[make_tool_call("get_weather", {"city": "Paris"}, "sunny")]),
    ...     make_message("It is sunny in Paris.", role="assistant")])
    >>> (get_user_message(run.input), get_assistant_message(run.output))
    ('What is the weather in Paris?', 'It is sunny in Paris.')
    >>> extract_tool_calls(run.output).tools
    ['get_weather']
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from scorers._agent_types import (
    ReasoningPart,
    ScorerRunInputForAgent,
    ToolCall,
    ToolResultPart,
)
from scorers._run import ScorerRun
from scorers._test_builders import make_agent_run, make_message, make_tool_call
from scorers._text import (
    get_text_content,
    input_messages,
    input_of,
    output_messages,
    role_of,
)

__all__ = [
    "ExtractedToolCalls",
    "ToolCallInfo",
    "ToolResultInfo",
    "extract_agent_response_messages",
    "extract_input_messages",
    "extract_tool_calls",
    "extract_tool_results",
    "get_assistant_message",
    "get_combined_system_prompt",
    "get_reasoning",
    "get_system_messages",
    "get_text_content",
    "get_user_message",
    "make_agent_run",
    "make_message",
    "make_tool_call",
    "round_to_two_decimals",
]


def get_user_message(run_input: Any) -> str | None:
    """The user's message: a string input, else the first user message's text, else None.

    Mastra's order: a string; the first ``role == "user"`` entry of the input messages,
    then of ``messages``; ``prompt``; ``text``; the text of ``content``, ``input``, ``user``.

    Example:
        >>> get_user_message({"inputMessages": [{"role": "user", "content": "Hello?"}]})
        'Hello?'
        >>> (get_user_message("Direct question"), get_user_message({"prompt": "P"}), get_user_message(42))
        ('Direct question', 'P', None)
    """
    run_input = input_of(run_input)
    if isinstance(run_input, str):
        return run_input
    candidates = [input_messages(run_input)]
    if isinstance(run_input, Mapping) and isinstance(run_input.get("messages"), list):
        candidates.append(run_input["messages"])
    for messages in candidates:
        for message in messages:
            if role_of(message) == "user":
                return get_text_content(message)
    if isinstance(run_input, Mapping):
        for key in ("prompt", "text"):
            if isinstance(run_input.get(key), str):
                return str(run_input[key])
        for key in ("content", "input", "user"):
            if run_input.get(key) is not None:
                return get_text_content(run_input[key]) or None
    return None


def get_assistant_message(output: Any) -> str | None:
    """The agent's answer: the last assistant message that has text ("" if none has text).

    A string output is returned as it is; None when there is no assistant message.

    Example:
        >>> get_assistant_message([{"role": "assistant", "content": ""}, {"role": "tool", "content": "42"},
        ...                        {"role": "assistant", "content": "The answer is 42."}])
        'The answer is 42.'
        >>> (get_assistant_message("Plain answer"), get_assistant_message([]))
        ('Plain answer', None)
    """
    output = output.output if isinstance(output, ScorerRun) else output
    if isinstance(output, str):
        return output
    if isinstance(output, Mapping) and output.get("role") in (None, "assistant"):
        for key in ("text", "content"):
            if isinstance(output.get(key), str):
                return str(output[key])
    texts = extract_agent_response_messages(output)
    if not texts:
        return None
    with_text = [t for t in texts if t]
    return with_text[-1] if with_text else ""


def get_system_messages(run_input: Any) -> list[str]:
    """The system prompts: system messages, system-role input messages, tagged groups.

    Example:
        >>> get_system_messages({"systemMessages": [{"role": "system", "content": "Be terse."}],
        ...                      "taggedSystemMessages": {"memory": [{"role": "system", "content": "User: Ann"}]}})
        ['Be terse.', 'User: Ann']
    """
    run_input = input_of(run_input)
    if isinstance(run_input, ScorerRunInputForAgent):
        system = list(run_input.system_messages)
        inline = [m for m in run_input.input_messages if m.role == "system"]
        tagged: Any = run_input.tagged_system_messages
    elif isinstance(run_input, Mapping):
        system = list(run_input.get("systemMessages") or run_input.get("system_messages") or [])
        inline = [m for m in input_messages(run_input) if role_of(m) == "system"]
        inline += [m for m in run_input.get("messages") or [] if role_of(m) == "system"]
        tagged = run_input.get("taggedSystemMessages") or run_input.get("tagged_system_messages")
    else:
        return []
    texts = [_system_text(m) for m in system] + [get_text_content(m) for m in inline]
    if isinstance(tagged, Mapping):
        texts += [_system_text(m) for group in tagged.values() for m in group or []]
    return [t for t in texts if t]


def _system_text(message: Any) -> str:
    if isinstance(message, Mapping) and isinstance(message.get("content"), list):
        parts = message["content"]
        return " ".join(
            p.get("text", "") for p in parts if isinstance(p, Mapping) and p.get("text")
        )
    return get_text_content(message)


def get_combined_system_prompt(run_input: Any) -> str:
    """All system prompts joined with a blank line.

    Example:
        >>> get_combined_system_prompt(make_agent_run("q", "a", system_messages=["A.", "B."]).input)
        'A.\\n\\nB.'
    """
    return "\n\n".join(get_system_messages(run_input))


def get_reasoning(output: Any) -> str | None:
    """The reasoning text of the assistant messages (joined with newlines), or None.

    Example:
        >>> get_reasoning([{"role": "assistant", "content": {"format": 2, "reasoning": "Think first.",
        ...                 "parts": [{"type": "text", "text": "Done"}]}}])
        'Think first.'
        >>> get_reasoning("no reasoning") is None
        True
    """
    texts = [
        part.text
        for message in output_messages(output)
        if message.role == "assistant"
        for part in message.parts
        if isinstance(part, ReasoningPart) and part.text
    ]
    return "\n".join(texts) if texts else None


class ToolCallInfo(BaseModel):
    """Where one tool call was found: its tool, id, and message / invocation index.

    Example:
        >>> ToolCallInfo(tool_name="search", tool_call_id="c1", message_index=0, invocation_index=0).tool_name
        'search'
    """

    tool_name: str
    tool_call_id: str
    message_index: int
    invocation_index: int


class ExtractedToolCalls(BaseModel):
    """The result of `extract_tool_calls`: tool names in call order, and where each call is.

    Example:
        >>> ExtractedToolCalls(tools=[], tool_call_infos=[]).tools
        []
    """

    tools: list[str]
    tool_call_infos: list[ToolCallInfo]


class ToolResultInfo(BaseModel):
    """One tool call with its result, from `extract_tool_results`.

    Example:
        >>> ToolResultInfo(tool_name="calc", tool_call_id="c1", args={"x": 1}, result=2).result
        2
    """

    tool_name: str
    tool_call_id: str
    args: Any = None
    result: Any = None


def extract_tool_calls(output: Any) -> ExtractedToolCalls:
    """The tool calls (in state "call" or "result", with a name) of the output messages.

    A call without an id gets ``"<message index>-<invocation index>"``.

    Example:
        >>> calls = extract_tool_calls([make_message("", role="assistant", tool_calls=[
        ...     make_tool_call("search"), make_tool_call("fetch", id="c2")])])
        >>> (calls.tools, [i.tool_call_id for i in calls.tool_call_infos])
        (['search', 'fetch'], ['0-0', 'c2'])
    """
    tools: list[str] = []
    infos: list[ToolCallInfo] = []
    for m_index, message in enumerate(output_messages(output)):
        for i_index, call in enumerate(message.tool_calls):
            if not call.name or call.state not in ("call", "result"):
                continue
            tools.append(call.name)
            infos.append(
                ToolCallInfo(
                    tool_name=call.name,
                    tool_call_id=call.id or f"{m_index}-{i_index}",
                    message_index=m_index,
                    invocation_index=i_index,
                )
            )
    return ExtractedToolCalls(tools=tools, tool_call_infos=infos)


def extract_tool_results(output: Any) -> list[ToolResultInfo]:
    """Tool calls with their results: calls in state "result", plus tool-result parts and
    role "tool" messages matched to their call by id.

    Example:
        >>> results = extract_tool_results([
        ...     {"role": "assistant", "tool_calls": [{"id": "c1", "name": "weather", "arguments": '{"city": "Paris"}'}]},
        ...     {"role": "tool", "tool_call_id": "c1", "name": "weather", "content": "sunny"}])
        >>> [(r.tool_name, r.args, r.result) for r in results]
        [('weather', {'city': 'Paris'}, 'sunny')]
    """
    messages = output_messages(output)
    calls: dict[str, ToolCall] = {c.id: c for m in messages for c in m.tool_calls if c.id}
    found: dict[str, ToolResultInfo] = {}
    ordered: list[ToolResultInfo] = []

    def add(call_id: str, name: str, result: Any) -> None:
        if call_id and call_id in found:
            return
        call = calls.get(call_id)
        info = ToolResultInfo(
            tool_name=name or (call.name if call else ""),
            tool_call_id=call_id,
            args=call.arguments if call else None,
            result=result,
        )
        if call_id:
            found[call_id] = info
        ordered.append(info)

    for message in messages:
        for call in message.tool_calls:
            if call.state == "result" and call.result is not None:
                add(call.id, call.name, call.result)
        result_parts = [p for p in message.parts if isinstance(p, ToolResultPart)]
        for part in result_parts:
            add(part.tool_call_id, part.tool_name, part.result)
        if message.role == "tool" and message.tool_call_id and not result_parts:
            add(message.tool_call_id, message.name or "", message.content)
    return ordered


def extract_input_messages(run_input: Any) -> list[str]:
    """The text of each input message.

    Example:
        >>> extract_input_messages({"inputMessages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})
        ['a', 'b']
    """
    return [get_text_content(m) for m in input_messages(run_input)]


def extract_agent_response_messages(output: Any) -> list[str]:
    """The text of each assistant message of the output ("" for a tool-call-only message).

    Example:
        >>> extract_agent_response_messages(["First.", {"role": "tool", "content": "x"}, "Second."])
        ['First.', 'Second.']
    """
    return [m.content for m in output_messages(output) if m.role == "assistant"]


def round_to_two_decimals(value: float) -> float:
    """Round half up to two decimals after adding machine epsilon (Mastra's rounding).

    Example:
        >>> (round_to_two_decimals(1.005), round_to_two_decimals(0.125), round_to_two_decimals(2 / 3))
        (1.01, 0.13, 0.67)
    """
    return math.floor((value + sys.float_info.epsilon) * 100 + 0.5) / 100
