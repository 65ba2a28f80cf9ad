"""Typed message parts (text, reasoning, tool call, tool result, file, other) and tool calls.

`Message` (in `scorers._agent_types`) holds a list of these parts. `coerce_part` maps the
part shapes of Mastra's stored messages (``tool-invocation``), the AI SDK and OpenAI-style
chat messages onto them.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Tag, field_validator, model_validator
from pydantic.alias_generators import to_camel

MODEL_CONFIG = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
"""Shared config of the agent-type models: camelCase aliases accepted beside snake_case."""


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

    model_config = MODEL_CONFIG

    id: str = ""
    name: str = ""
    arguments: Any = None
    result: Any = None
    state: str = "call"
    is_error: bool = False

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

    model_config = MODEL_CONFIG
    type: Literal["text"] = "text"
    text: str = ""


class ReasoningPart(BaseModel):
    """A reasoning (thinking) part of an assistant message.

    Example:
        >>> ReasoningPart(text="step by step").text
        'step by step'
    """

    model_config = MODEL_CONFIG
    type: Literal["reasoning"] = "reasoning"
    text: str = ""


class ToolCallPart(BaseModel):
    """A tool call inside a message (Mastra's ``tool-invocation``), with its result when known.

    Example:
        >>> ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "x"}).type
        'tool-call'
    """

    model_config = MODEL_CONFIG
    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str = ""
    tool_name: str = ""
    args: Any = None
    result: Any = None
    state: str = "call"
    is_error: bool = False

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

    model_config = MODEL_CONFIG
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

    model_config = MODEL_CONFIG
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

    model_config = MODEL_CONFIG
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


def coerce_part(raw: Any) -> Any:
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
            "result": inv.get("result", inv.get("errorText")),
            "state": inv.get("state") or "call",
            "is_error": bool(inv.get("isError")) or inv.get("state") == "output-error",
        }
    if kind == "tool-call":
        return {
            "type": "tool-call",
            "tool_call_id": raw.get("toolCallId") or raw.get("tool_call_id") or raw.get("id") or "",
            "tool_name": raw.get("toolName") or raw.get("tool_name") or raw.get("name") or "",
            "args": raw.get("args", raw.get("input", raw.get("arguments"))),
            "result": raw.get("result"),
            "state": raw.get("state") or "call",
            "is_error": bool(raw.get("isError") or raw.get("is_error")),
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
    if isinstance(kind, str):  # every known kind returned above: keep the rest's raw data
        return {"type": kind, "data": {k: v for k, v in raw.items() if k != "type"}}
    return raw


def tool_call_from_part(part: ToolCallPart) -> ToolCall:
    return ToolCall(
        id=part.tool_call_id,
        name=part.tool_name,
        arguments=part.args,
        result=part.result,
        state=part.state,
        is_error=part.is_error,
    )


def part_from_tool_call(call: ToolCall) -> ToolCallPart:
    return ToolCallPart(
        tool_call_id=call.id,
        tool_name=call.name,
        args=call.arguments,
        result=call.result,
        state=call.state,
        is_error=call.is_error,
    )
