"""Agent-typed scorer input and output: `Message`, `ScorerRunInputForAgent`, `ScorerRunOutputForAgent`.

These pydantic models are the contract between the adapters (which build them from
traces) and scorer steps (which read them). They accept three shapes:

* their own snake_case fields (``input_messages``, ``tool_calls``, ...);
* Mastra's camelCase JSON (``inputMessages``, ``toolCallId``...), including stored
  messages whose ``content`` is ``{"format": 2, "parts": [...], "content": "..."}`` with
  ``tool-invocation`` parts or a legacy ``toolInvocations`` list;
* plain chat messages whose ``content`` is a list of ``{"type": "text", "text": ...}`` parts.

Invariants after validation: ``Message.content`` is the message text ("" when none),
``Message.parts`` holds typed parts, and ``Message.tool_calls`` mirrors the message's
tool-call parts (both are filled from whichever was given).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field, RootModel, model_validator

from scorers._parts import (
    MODEL_CONFIG,
    FilePart,
    OtherPart,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
    coerce_part,
    parse_json_arguments,
    part_from_tool_call,
    tool_call_from_part,
)

__all__ = [
    "FilePart",
    "Message",
    "OtherPart",
    "Part",
    "ReasoningPart",
    "Role",
    "ScorerRunInputForAgent",
    "ScorerRunOutputForAgent",
    "TextPart",
    "ToolCall",
    "ToolCallPart",
    "ToolResultPart",
    "parse_json_arguments",
]

Role = Literal["system", "user", "assistant", "tool"]


class Message(BaseModel):
    """One chat message: its role, its text, typed parts and tool calls.

    Accepts snake_case dicts, Mastra's stored-message JSON and chat messages whose content
    is a list of parts.

    Example:
        >>> m = Message(role="user", content="What is the capital of France?")
        >>> m.parts[0].text
        'What is the capital of France?'
        >>> mastra = {"role": "assistant", "content": {"format": 2, "parts": [
        ...     {"type": "tool-invocation", "toolInvocation": {"state": "result",
        ...      "toolCallId": "c1", "toolName": "weather", "args": {"city": "Paris"},
        ...      "result": "sunny"}},
        ...     {"type": "text", "text": "It is sunny."}]}}
        >>> msg = Message.model_validate(mastra)
        >>> (msg.content, msg.tool_calls[0].name, msg.tool_calls[0].result)
        ('It is sunny.', 'weather', 'sunny')
    """

    model_config = MODEL_CONFIG

    role: Role
    content: str = ""
    parts: list[Part] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        content = data.get("content")
        parts_in = data.get("parts")
        legacy_invocations: list[Any] = []
        last_text_part = False  # Mastra's rule for its stored messages: the last text part
        if isinstance(content, dict):
            # Mastra storage format v2: {format: 2, parts: [...], content?, toolInvocations?}
            parts_in = content.get("parts") if parts_in is None else parts_in
            legacy_invocations = list(content.get("toolInvocations") or [])
            text = content.get("content")
            if not (isinstance(text, str) and text):
                text = content.get("text") if isinstance(content.get("text"), str) else None
            if content.get("metadata") and "metadata" not in data:
                data["metadata"] = content["metadata"]
            if content.get("reasoning") and isinstance(content["reasoning"], str):
                parts_in = [*(parts_in or []), {"type": "reasoning", "text": content["reasoning"]}]
            data["content"] = text if isinstance(text, str) else None
            last_text_part = True
        elif isinstance(content, list):
            parts_in = content if parts_in is None else parts_in
            data["content"] = None
        elif content is not None and not isinstance(content, str):
            data["content"] = json.dumps(content, default=str)
        parts = [coerce_part(p) for p in (parts_in or [])]
        if legacy_invocations and not any(
            isinstance(p, dict) and p.get("type") == "tool-call" for p in parts
        ):
            parts.extend(
                coerce_part({"type": "tool-invocation", "toolInvocation": inv})
                for inv in legacy_invocations
                if isinstance(inv, dict)
            )
        data["parts"] = parts
        if data.get("content") is None:
            texts = [t for p in parts if isinstance(p, dict) and p.get("type") == "text"
                     and (t := p.get("text", ""))]
            # A Mastra message without content.content reads as its last text part (as
            # getTextContentFromMastraDBMessage does); a chat message's text parts are joined.
            data["content"] = (texts[-1] if texts else "") if last_text_part else "\n".join(texts)
        for key in ("toolCalls", "tool_calls"):
            if data.get(key) is None and key in data:
                data[key] = []
        return data

    @model_validator(mode="after")
    def _sync_parts(self) -> Message:
        if self.content and not _has_text_part(self.parts):
            self.parts.insert(0, TextPart(text=self.content))
        call_parts = [p for p in self.parts if isinstance(p, ToolCallPart)]
        if self.tool_calls and not call_parts:
            self.parts.extend(part_from_tool_call(c) for c in self.tool_calls)
        elif call_parts and not self.tool_calls:
            self.tool_calls = [tool_call_from_part(p) for p in call_parts]
        return self


def _has_text_part(parts: list[Any]) -> bool:
    for part in parts:  # a loop, not any() over a generator: asked of every message
        if isinstance(part, TextPart):
            return True
    return False


class ScorerRunInputForAgent(BaseModel):
    """What an agent run received: this turn's input, remembered history and system prompts.

    Example:
        >>> run_input = ScorerRunInputForAgent.model_validate({
        ...     "inputMessages": [{"role": "user", "content": "Hi"}],
        ...     "systemMessages": [{"role": "system", "content": "Be terse."}],
        ... })
        >>> (run_input.input_messages[0].content, run_input.system_messages[0].content)
        ('Hi', 'Be terse.')
        >>> run_input.remembered_messages
        []
    """

    model_config = MODEL_CONFIG

    input_messages: list[Message] = Field(default_factory=list)
    remembered_messages: list[Message] = Field(default_factory=list)
    system_messages: list[Message] = Field(default_factory=list)
    tagged_system_messages: dict[str, list[Message]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"input_messages": [{"role": "user", "content": data}]}
        if isinstance(data, list):
            return {"input_messages": data}
        if isinstance(data, dict):
            data = dict(data)
            for key in ("system_messages", "systemMessages"):
                if isinstance(data.get(key), list):
                    data[key] = [
                        {"role": "system", "content": m} if isinstance(m, str) else m
                        for m in data[key]
                    ]
            for key in ("tagged_system_messages", "taggedSystemMessages"):
                if data.get(key) is None and key in data:
                    data[key] = {}
        return data


class ScorerRunOutputForAgent(RootModel[list[Message]]):
    """What an agent run produced: its messages in order (tool calls, tool results, answer).

    Behaves like a list of `Message`.

    Example:
        >>> out = ScorerRunOutputForAgent.model_validate([{"role": "assistant", "content": "Paris."}])
        >>> (len(out), out[0].content, [m.role for m in out])
        (1, 'Paris.', ['assistant'])
        >>> ScorerRunOutputForAgent.model_validate("Paris.")[0].role
        'assistant'
    """

    root: list[Message] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        if isinstance(data, str):
            return [{"role": "assistant", "content": data}]
        if isinstance(data, dict) and "role" in data:
            return [data]
        return data

    def __iter__(self) -> Iterator[Message]:  # type: ignore[override]
        return iter(self.root)

    def __len__(self) -> int:
        return len(self.root)

    def __getitem__(self, index: int) -> Message:
        return self.root[index]
