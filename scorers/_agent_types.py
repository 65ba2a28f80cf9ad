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
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    RootModel,
    Tag,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

Role = Literal["system", "user", "assistant", "tool"]

_MODEL_CONFIG = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


def parse_json_arguments(value: Any) -> Any:
    """Return ``value`` parsed as JSON when it is a string holding a JSON object or array.

    Example:
        >>> parse_json_arguments('{"city": "Paris"}')
        {'city': 'Paris'}
        >>> parse_json_arguments("not json")
        'not json'
    """
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value


class ToolCall(BaseModel):
    """One tool call made by an assistant message, with its result once known.

    Example:
        >>> ToolCall(id="c1", name="get_weather", arguments='{"city": "Paris"}').arguments
        {'city': 'Paris'}
        >>> ToolCall.model_validate({"toolCallId": "c1", "toolName": "t", "args": {}, "state": "result"}).state
        'result'
    """

    model_config = _MODEL_CONFIG

    id: str = ""
    name: str = ""
    arguments: Any = None
    result: Any = None
    state: str = "call"

    @model_validator(mode="before")
    @classmethod
    def _from_mastra(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "id" not in data and "toolCallId" in data:
                data["id"] = data.pop("toolCallId")
            if "name" not in data and "toolName" in data:
                data["name"] = data.pop("toolName")
            if "arguments" not in data and "args" in data:
                data["arguments"] = data.pop("args")
            if "id" in data and data["id"] is None:
                data["id"] = ""
            if "name" in data and data["name"] is None:
                data["name"] = ""
        return data

    @field_validator("arguments", mode="after")
    @classmethod
    def _parse_arguments(cls, value: Any) -> Any:
        return parse_json_arguments(value)


class TextPart(BaseModel):
    """A text part of a message.

    Example:
        >>> TextPart(text="hi").type
        'text'
    """

    model_config = _MODEL_CONFIG
    type: Literal["text"] = "text"
    text: str = ""


class ReasoningPart(BaseModel):
    """A reasoning (thinking) part of an assistant message.

    Example:
        >>> ReasoningPart(text="step by step").text
        'step by step'
    """

    model_config = _MODEL_CONFIG
    type: Literal["reasoning"] = "reasoning"
    text: str = ""


class ToolCallPart(BaseModel):
    """A tool call inside a message (Mastra's ``tool-invocation``), with its result when known.

    Example:
        >>> ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "x"}).type
        'tool-call'
    """

    model_config = _MODEL_CONFIG
    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str = ""
    tool_name: str = ""
    args: Any = None
    result: Any = None
    state: str = "call"

    @field_validator("args", mode="after")
    @classmethod
    def _parse_args(cls, value: Any) -> Any:
        return parse_json_arguments(value)


class ToolResultPart(BaseModel):
    """The result of a tool call, as sent back to the model (role ``tool`` messages).

    Example:
        >>> ToolResultPart(tool_call_id="c1", tool_name="search", result="ok").is_error
        False
    """

    model_config = _MODEL_CONFIG
    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str = ""
    tool_name: str = ""
    result: Any = None
    is_error: bool = False


class FilePart(BaseModel):
    """A reference to a file or image (by URL or inline data); the bytes are never kept here.

    Example:
        >>> FilePart(type="image", url="https://example.com/cat.png").type
        'image'
    """

    model_config = _MODEL_CONFIG
    type: Literal["file", "image"] = "file"
    url: str | None = None
    media_type: str | None = None
    filename: str | None = None
    data: str | None = None


class OtherPart(BaseModel):
    """Any other part type (``step-start``, ``source``, ``data-*``...), kept with its raw data.

    Example:
        >>> OtherPart(type="data-progress", data={"pct": 50}).type
        'data-progress'
    """

    model_config = _MODEL_CONFIG
    type: str
    data: Any = None


_KNOWN_PART_TAGS = {"text", "reasoning", "tool-call", "tool-result", "file", "image"}


def _part_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _KNOWN_PART_TAGS else "other"


Part = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ReasoningPart, Tag("reasoning")]
    | Annotated[ToolCallPart, Tag("tool-call")]
    | Annotated[ToolResultPart, Tag("tool-result")]
    | Annotated[FilePart, Tag("file")]
    | Annotated[FilePart, Tag("image")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_part_tag),
]


def _coerce_part(raw: Any) -> Any:
    """Map one Mastra / AI SDK / OpenAI-style part dict onto our part shapes."""
    if not isinstance(raw, dict):
        return {"type": "text", "text": str(raw)} if isinstance(raw, str) else raw
    kind = raw.get("type")
    if kind == "text":
        return {"type": "text", "text": raw.get("text") or raw.get("content") or ""}
    if kind == "reasoning":
        text = raw.get("text") or raw.get("reasoning") or ""
        details = raw.get("details")
        if not text and isinstance(details, list):
            text = "".join(
                d.get("text", "") for d in details if isinstance(d, dict) and d.get("type") == "text"
            )
        return {"type": "reasoning", "text": text}
    if kind == "tool-invocation":
        inv = raw.get("toolInvocation") or {}
        return {
            "type": "tool-call",
            "tool_call_id": inv.get("toolCallId") or "",
            "tool_name": inv.get("toolName") or "",
            "args": inv.get("args"),
            "result": inv.get("result"),
            "state": inv.get("state") or "call",
        }
    if kind == "tool-call":
        return {
            "type": "tool-call",
            "tool_call_id": raw.get("toolCallId") or raw.get("tool_call_id") or raw.get("id") or "",
            "tool_name": raw.get("toolName") or raw.get("tool_name") or raw.get("name") or "",
            "args": raw.get("args", raw.get("input", raw.get("arguments"))),
            "result": raw.get("result"),
            "state": raw.get("state") or "call",
        }
    if kind == "tool-result":
        return {
            "type": "tool-result",
            "tool_call_id": raw.get("toolCallId") or raw.get("tool_call_id") or raw.get("id") or "",
            "tool_name": raw.get("toolName") or raw.get("tool_name") or raw.get("name") or "",
            "result": raw.get("result", raw.get("output")),
            "is_error": bool(raw.get("isError") or raw.get("is_error")),
        }
    if kind in ("file", "image"):
        url = raw.get("url") or (raw.get("image") if isinstance(raw.get("image"), str) else None)
        return {
            "type": kind,
            "url": url,
            "media_type": raw.get("mediaType") or raw.get("media_type") or raw.get("mimeType"),
            "filename": raw.get("filename"),
        }
    if isinstance(kind, str):
        if kind in ("text", "reasoning", "tool-call", "tool-result", "file", "image"):
            return raw
        return {"type": kind, "data": {k: v for k, v in raw.items() if k != "type"}}
    return raw


def _tool_call_from_part(part: ToolCallPart) -> ToolCall:
    return ToolCall(
        id=part.tool_call_id,
        name=part.tool_name,
        arguments=part.args,
        result=part.result,
        state=part.state,
    )


def _part_from_tool_call(call: ToolCall) -> ToolCallPart:
    return ToolCallPart(
        tool_call_id=call.id,
        tool_name=call.name,
        args=call.arguments,
        result=call.result,
        state=call.state,
    )


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

    model_config = _MODEL_CONFIG

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
        elif isinstance(content, list):
            parts_in = content if parts_in is None else parts_in
            data["content"] = None
        elif content is not None and not isinstance(content, str):
            data["content"] = json.dumps(content, default=str)
        parts = [_coerce_part(p) for p in (parts_in or [])]
        if legacy_invocations and not any(
            isinstance(p, dict) and p.get("type") == "tool-call" for p in parts
        ):
            parts.extend(
                _coerce_part({"type": "tool-invocation", "toolInvocation": inv})
                for inv in legacy_invocations
                if isinstance(inv, dict)
            )
        data["parts"] = parts
        if data.get("content") is None:
            texts = [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
            data["content"] = "\n".join(t for t in texts if t)
        for key in ("toolCalls", "tool_calls"):
            if data.get(key) is None and key in data:
                data[key] = []
        return data

    @model_validator(mode="after")
    def _sync_parts(self) -> Message:
        has_text_part = any(isinstance(p, TextPart) for p in self.parts)
        if self.content and not has_text_part:
            self.parts.insert(0, TextPart(text=self.content))
        call_parts = [p for p in self.parts if isinstance(p, ToolCallPart)]
        if self.tool_calls and not call_parts:
            self.parts.extend(_part_from_tool_call(c) for c in self.tool_calls)
        elif call_parts and not self.tool_calls:
            self.tool_calls = [_tool_call_from_part(p) for p in call_parts]
        return self


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

    model_config = _MODEL_CONFIG

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
