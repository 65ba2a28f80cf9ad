"""Normalised chat messages (`Msg`, `Call`) and parsers for every message shape the conventions use.

Owned by the adapters. Shapes understood by `parse_messages`: OTel GenAI parts
(``{role, parts:[{type: text|tool_call|tool_call_response|reasoning|blob|uri|file}]}``),
OpenAI chat (``content`` string or parts, ``tool_calls[].function``), Vercel AI SDK / Mastra
(``tool-call`` / ``tool-result`` parts, ``args``/``input``, ``result``/``output``), Anthropic
(``tool_use`` / ``tool_result``), Bedrock Converse content blocks as Strands records them
(``{"text"}``, ``{"toolUse"}``, ``{"toolResult"}``) and OpenAI Responses items
(``function_call`` / ``function_call_output``). Tool results always become role ``tool`` messages, whatever role
carried them (pydantic-ai v5 sends them as ``user``). Framework roles map onto these:
smolagents' ``tool-call`` is an assistant message and ``tool-response`` a tool result (their
text is read by `adapters._dialect`). Invariant: `Msg.role` is one of system / user /
assistant / tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from scorers._agent_types import Message, ToolCall

__all__ = ["Call", "Msg", "link_tool_results", "loads", "msg_key", "parse_messages", "text_of", "to_message"]

_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
    # framework roles (smolagents): the replayed tool calls, and the tool results
    "tool-call": "assistant",
    "tool_call": "assistant",
    "tool-response": "tool",
    "tool_response": "tool",
}
_TEXT_TYPES = frozenset({"text", "input_text", "output_text", "refusal"})
_REASONING_TYPES = frozenset({"reasoning", "thinking", "redacted_thinking"})
_CALL_TYPES = frozenset({"tool_call", "tool-call", "tool_use", "function_call", "function"})
_GEMINI_CALL = ("function_call", "functionCall")
_GEMINI_RESULT = ("function_response", "functionResponse")
_RESULT_TYPES = frozenset(
    {"tool_call_response", "tool-result", "tool_result", "function_call_output", "function_response"}
)
_FILE_TYPES = frozenset(
    {"image", "image_url", "input_image", "file", "input_file", "blob", "uri", "audio", "input_audio"}
)


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call: id, name and arguments (raw; parsed to JSON when building `Message`).

    Example:
        >>> Call("c1", "get_weather", '{"city": "Paris"}').name
        'get_weather'
    """

    id: str
    name: str
    arguments: Any = None


@dataclass(frozen=True, slots=True)
class Msg:
    """One normalised message; ``parts`` holds extra typed parts (reasoning, files, tool results).

    ``placeholder`` marks a replayed message that only names what it stood for (Mastra
    replays tool calls and results as ``[tool: name]`` / ``[tool-result: name]``).

    Example:
        >>> Msg("user", "Hi").content
        'Hi'
    """

    role: str
    content: str = ""
    tool_calls: tuple[Call, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    parts: tuple[dict[str, Any], ...] = ()
    placeholder: bool = False


def json_or_text(value: Any) -> Any:
    """A value that may be JSON text: parsed when it starts like JSON and is valid, else as it is
    (text that merely starts like JSON, ``"{name} said..."``, stays text).

    Example:
        >>> json_or_text('{"a": 1}'), json_or_text("{name} said hi"), json_or_text(3)
        ({'a': 1}, '{name} said hi', 3)
    """
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        parsed = loads(value)
        return value if parsed is None else parsed
    return value


def loads(value: Any, on_error: Callable[[str], None] | None = None) -> Any:
    """Parse a JSON string attribute; non-strings pass through; None (and a report) when invalid.

    Example:
        >>> loads('[{"role": "user"}]')
        [{'role': 'user'}]
        >>> errors = []
        >>> loads("[oops", errors.append), errors
        (None, ['invalid_json'])
    """
    if not isinstance(value, str):
        return value
    try:
        return parse_json(value)
    except ValueError:
        if on_error is not None:
            on_error("invalid_json")
        return None


_WIDE_NUMBER = re.compile(r"\d{19}")  # an int this long may not fit in 64 bits


def parse_json(text: str) -> Any:
    """``json.loads(text)``, read by orjson (three to five times faster) wherever it gives the same.

    orjson reads an int past 64 bits as a float and refuses NaN, Infinity and lone surrogate
    escapes, which json reads: text with a run of 19 digits, and text orjson refuses, is
    read by json (which raises ValueError for what is not JSON).

    Example:
        >>> parse_json('[{"role": "user", "n": 1.5}]'), parse_json("[12345678901234567890123]")
        ([{'role': 'user', 'n': 1.5}], [12345678901234567890123])
        >>> parse_json('{"x": NaN}')
        {'x': nan}
    """
    if _WIDE_NUMBER.search(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def _str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _first(d: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = d.get(key)
        if value is not None:
            return value
    return None


def text_of(content: Any) -> str:
    """The text of a message content: a string, a list of text parts (joined by newlines), or JSON.

    Example:
        >>> text_of([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "content": "b"}])
        'a\\nb'
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and (part.get("type") in _TEXT_TYPES or "type" not in part):
                text = _first(part, "content", "text")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(t for t in texts if t)
    if isinstance(content, dict):
        text = _first(content, "text", "content")
        if isinstance(text, str):
            return text
    return _str(content)


def _unwrap_result(value: Any) -> Any:
    # Vercel AI SDK v5 tool outputs: {"type": "text" | "json" | "error-text" | ..., "value": ...}
    if isinstance(value, dict) and set(value) <= {"type", "value"} and "value" in value:
        return value["value"]
    return value


def _call_from(raw: Any) -> Call | None:
    if not isinstance(raw, dict):
        return None
    fn = raw.get("function")
    if isinstance(fn, dict):
        name = fn.get("name")
        args = fn.get("arguments")
    else:
        name = _first(raw, "name", "toolName", "tool_name")
        args = _first(raw, "arguments", "args", "input")
    call_id = _first(raw, "id", "toolCallId", "tool_call_id", "call_id", "toolUseId")
    if call_id is None and name is None:
        return None
    return Call(id=_str(call_id), name=_str(name), arguments=args)


def _result_msg(raw: dict[str, Any]) -> Msg:
    call_id = _str(_first(raw, "id", "toolCallId", "tool_call_id", "tool_use_id", "call_id", "toolUseId"))
    name = _first(raw, "name", "toolName", "tool_name")
    result = _unwrap_result(_first(raw, "response", "result", "output", "content"))
    if isinstance(result, list) and all(
        isinstance(p, dict) and (p.get("type") in _TEXT_TYPES or ("type" not in p and "text" in p)) for p in result
    ):
        result = text_of(result)
    part = {"type": "tool-result", "tool_call_id": call_id, "tool_name": _str(name), "result": result}
    return Msg(
        role="tool",
        content=_str(result),
        tool_call_id=call_id or None,
        name=name if isinstance(name, str) else None,
        parts=(part,),
    )


def _file_part(raw: dict[str, Any]) -> dict[str, Any]:
    url = _first(raw, "uri", "url", "image_url", "image")
    if isinstance(url, dict):
        url = url.get("url")
    return {
        "type": "image" if raw.get("modality") == "image" or "image" in str(raw.get("type")) else "file",
        "url": url if isinstance(url, str) and not url.startswith("data:") else None,
        "media_type": _first(raw, "mime_type", "mediaType", "media_type", "mimeType"),
        "filename": raw.get("filename"),
    }


def _typed_part(part: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """An untyped content part (Gemini / Google ADK parts, Bedrock Converse blocks) as the part
    and type it stands for; others come back with type None.

    Example:
        >>> _typed_part({"functionCall": {"name": "w", "args": {"city": "Paris"}}})
        ({'name': 'w', 'args': {'city': 'Paris'}, 'arguments': {'city': 'Paris'}}, 'tool_call')
        >>> _typed_part({"text": "plain"})
        ({'text': 'plain'}, None)
    """
    gemini_call = next((part[k] for k in _GEMINI_CALL if isinstance(part.get(k), dict)), None)
    if gemini_call is not None:
        return {**gemini_call, "arguments": gemini_call.get("args")}, "tool_call"
    gemini_result = next((part[k] for k in _GEMINI_RESULT if isinstance(part.get(k), dict)), None)
    if gemini_result is not None:
        return gemini_result, "tool_result"
    if part.get("thought") is True and isinstance(part.get("text"), str):
        return {"text": part["text"]}, "reasoning"
    if isinstance(part.get("toolUse"), dict):
        return {**part["toolUse"], "arguments": part["toolUse"].get("input")}, "tool_call"
    if isinstance(part.get("toolResult"), dict):
        return part["toolResult"], "tool_result"
    if isinstance(part.get("reasoningContent"), dict):
        reasoning = part["reasoningContent"].get("reasoningText")
        return {"text": reasoning.get("text") if isinstance(reasoning, dict) else ""}, "reasoning"
    return part, None


def _parse_one(raw: Any, out: list[Msg]) -> None:
    if not isinstance(raw, dict):
        return
    kind = raw.get("type")
    if "role" not in raw and kind in _CALL_TYPES:  # OpenAI Responses item
        call = _call_from(raw)
        if call is not None:
            out.append(Msg(role="assistant", tool_calls=(call,)))
        return
    if "role" not in raw and kind in _RESULT_TYPES:
        out.append(_result_msg(raw))
        return
    role = _ROLES.get(str(raw.get("role", "")).lower())
    if role is None:
        return
    content = raw.get("parts")
    if content is None:
        content = raw.get("content")
    texts: list[str] = []
    calls: list[Call] = []
    extra: list[dict[str, Any]] = []
    results: list[Msg] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                texts.append(part)
                continue
            if not isinstance(part, dict):
                continue
            ptype = part.get("type")
            if ptype is None:  # untyped parts: Gemini / Google ADK, Bedrock Converse blocks
                part, ptype = _typed_part(part)
            if ptype in _CALL_TYPES:
                call = _call_from(part)
                if call is not None:
                    calls.append(call)
            elif ptype in _RESULT_TYPES:
                results.append(_result_msg(part))
            elif ptype in _REASONING_TYPES:
                extra.append({"type": "reasoning", "text": _str(_first(part, "content", "text", "thinking"))})
            elif ptype in _FILE_TYPES:
                extra.append(_file_part(part))
            else:
                text = _first(part, "content", "text")
                if isinstance(text, str):
                    texts.append(text)
    elif content is not None:
        texts.append(text_of(content))
    for raw_call in raw.get("tool_calls") or raw.get("toolCalls") or ():
        call = _call_from(raw_call)
        if call is not None:
            calls.append(call)
    legacy_fn = raw.get("function_call")
    if isinstance(legacy_fn, dict):
        calls.append(Call(id="", name=_str(legacy_fn.get("name")), arguments=legacy_fn.get("arguments")))
    text = "\n".join(t for t in texts if t)
    name = raw.get("name")
    name = name if isinstance(name, str) else None
    if role == "tool":
        if results and not text:
            out.extend(results)
            return
        call_id = _first(raw, "tool_call_id", "toolCallId", "id", "call_id")
        out.append(
            Msg(role="tool", content=text, tool_call_id=_str(call_id) or None, name=name, parts=tuple(extra))
        )
        out.extend(results)
        return
    out.extend(results)
    if text or calls or extra or not results:
        out.append(Msg(role=role, content=text, tool_calls=tuple(calls), name=name, parts=tuple(extra)))


def parse_messages(items: Any) -> list[Msg]:
    """Normalise a list of messages in any supported shape; unknown entries are dropped.

    Example:
        >>> msgs = parse_messages([
        ...     {"role": "user", "parts": [{"type": "text", "content": "Weather?"}]},
        ...     {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "w",
        ...                                      "arguments": {"city": "Paris"}}]},
        ...     {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1", "result": "sunny"}]}])
        >>> [(m.role, m.content) for m in msgs]
        [('user', 'Weather?'), ('assistant', ''), ('tool', 'sunny')]
    """
    out: list[Msg] = []
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        return out
    for raw in items:
        _parse_one(raw, out)
    return out


def link_tool_results(msgs: list[Msg]) -> list[Msg]:
    """Give tool results without a call id the id of the call they answer (calls are answered in order).

    Example:
        >>> msgs = link_tool_results([Msg("assistant", "", (Call("c1", "w"),)), Msg("tool", "sunny")])
        >>> (msgs[1].tool_call_id, msgs[1].name)
        ('c1', 'w')
    """
    out: list[Msg] = []
    pending: list[Call] = []
    for msg in msgs:
        if msg.role == "assistant" and msg.tool_calls:
            pending = [c for c in msg.tool_calls if c.id]
        elif msg.role == "tool" and msg.tool_call_id:
            pending = [c for c in pending if c.id != msg.tool_call_id]
        elif msg.role == "tool" and pending and not msg.placeholder:
            call = next((c for c in pending if msg.name and c.name == msg.name), pending[0])
            pending.remove(call)
            msg = replace(msg, tool_call_id=call.id, name=msg.name or call.name or None)
        out.append(msg)
    return out


def msg_key(msg: Msg) -> tuple[Any, ...]:
    """Identity of a message when matching a replayed conversation (ignores argument encoding).

    Example:
        >>> msg_key(Msg("assistant", " Hi ")) == msg_key(Msg("assistant", "Hi"))
        True
    """
    return (msg.role, msg.content.strip(), tuple(c.name for c in msg.tool_calls))


def to_message(msg: Msg) -> Message:
    """Build the scorer-facing `Message` (tool-call arguments parsed when they are JSON).

    Example:
        >>> m = to_message(Msg("assistant", "", (Call("c1", "w", '{"city": "Paris"}'),)))
        >>> (m.tool_calls[0].arguments, m.parts[0].type)
        ({'city': 'Paris'}, 'tool-call')
    """
    parts: list[dict[str, Any]] = []
    if msg.content:
        parts.append({"type": "text", "text": msg.content})
    parts.extend(msg.parts)
    return Message.model_validate(
        {
            "role": msg.role,
            "content": msg.content,
            "parts": parts,
            "tool_calls": [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in msg.tool_calls],
            "tool_call_id": msg.tool_call_id,
            "name": msg.name,
        }
    )
