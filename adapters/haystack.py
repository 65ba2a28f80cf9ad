"""Haystack: its serialized ``ChatMessage`` objects, and the spans of Haystack's own OpenTelemetry tracer.

Owned by the adapters. Haystack writes a conversation as a list of ``ChatMessage``:

* ``ChatMessage.to_dict()`` (what its own tracer records with content tracing on):
  ``{"role", "content": [{"text"} | {"tool_call": {"id", "tool_name", "arguments"}} |
  {"tool_call_result": {"result", "origin": <tool_call>, "error"}} | {"reasoning": ...}],
  "name", "meta"}``; Haystack 2.9+ wrote ``_role`` / ``_content``, earlier releases a plain
  ``content`` string;
* the Python ``repr`` of the dataclass (what openinference-instrumentation-haystack records):
  ``ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text='...')], ...)``,
  read here without evaluating anything.

Haystack's own tracer (``haystack_integrations.tracing.opentelemetry``, in Haystack core before
3.0) emits untyped spans: ``haystack.agent.step.llm`` (one model request: input ``messages``,
output ``replies``), ``haystack.agent.step.tool`` (one tool call), ``haystack.component.run``
(a pipeline component; a ``*ChatGenerator`` component is a model request), ``haystack.agent.run``
and ``haystack.pipeline.run``. `view_span` reads the model and tool spans; `chain_io` gives the
input and output a component, agent or pipeline span carries (for `adapters._chain`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from adapters._messages import Msg, json_or_text, parse_messages
from adapters._trace import TraceLog, TraceSpan
from adapters._view import Report, SpanView, call_arguments, common_context

__all__ = ["chain_io", "chat_messages", "view_span"]

_ENUM = re.compile(r"<[\w.]+: ('[^']*'|\"[^\"]*\"|-?\d+)>")
_CHAIN_IO = (
    ("haystack.component.input", "haystack.component.output"),
    ("haystack.agent.input", "haystack.agent.output"),
    ("haystack.pipeline.input_data", "haystack.pipeline.output_data"),
)


def _literal(node: ast.AST) -> Any:
    """A literal of a dataclass repr: constants, containers, and calls as ``{"__class__": name, **kwargs}``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k) if k is not None else None: _literal(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and not node.args:
        name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        return {"__class__": name, **{k.arg: _literal(k.value) for k in node.keywords if k.arg}}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    raise ValueError(f"not a literal: {type(node).__name__}")


def _from_repr(text: str) -> dict[str, Any] | None:
    """A ``ChatMessage(...)`` repr as a dict of its fields, or None when it is not one.

    Example:
        >>> _from_repr("ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text='Hi')])")["_role"]
        'user'
    """
    if not text.startswith("ChatMessage("):
        return None
    try:
        value = _literal(ast.parse(_ENUM.sub(r"\1", text), mode="eval").body)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return value if isinstance(value, dict) else None


def _call(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("tool_name"), str):
        return None
    return {"id": raw.get("id") or "", "type": "function",
            "function": {"name": raw["tool_name"], "arguments": raw.get("arguments")}}


def _to_chat(message: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """One serialized ChatMessage as OpenAI-style chat dicts (a tool result becomes a role ``tool`` message)."""
    role = message.get("role", message.get("_role"))
    content = message.get("content", message.get("_content"))
    if not isinstance(role, str) or not isinstance(content, (list, str)):
        return None
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("__class__")
        if kind == "ToolCall" or isinstance(part.get("tool_call"), dict):
            call = _call(part if kind == "ToolCall" else part["tool_call"])
            if call is not None:
                calls.append(call)
        elif kind == "ToolCallResult" or isinstance(part.get("tool_call_result"), dict):
            result = part if kind == "ToolCallResult" else part["tool_call_result"]
            origin = _call(result.get("origin")) or {"id": "", "function": {"name": None}}
            results.append({"role": "tool", "tool_call_id": origin["id"] or None, "name": origin["function"]["name"],
                            "content": result.get("result")})
        elif isinstance(part.get("text"), str) and kind in (None, "TextContent"):
            texts.append(part["text"])
    if results:
        return results
    chat: dict[str, Any] = {"role": role, "content": "\n".join(texts)}
    if calls:
        chat["tool_calls"] = calls
    name = message.get("name", message.get("_name"))
    if isinstance(name, str):
        chat["name"] = name
    return [chat]


def chat_messages(items: Any) -> list[Msg] | None:
    """Haystack ChatMessages (dicts or reprs) as messages; None when ``items`` is not a list of them.

    Example:
        >>> msgs = chat_messages([
        ...     {"role": "assistant", "content": [{"tool_call": {"id": "c1", "tool_name": "w", "arguments": {}}}]},
        ...     "ChatMessage(_role=<ChatRole.TOOL: 'tool'>, _content=[ToolCallResult(result='sunny', "
        ...     "origin=ToolCall(tool_name='w', arguments={}, id='c1', extra=None), error=False)], _meta={})"])
        >>> [(m.role, m.content, m.tool_call_id, [c.name for c in m.tool_calls]) for m in msgs]
        [('assistant', '', None, ['w']), ('tool', 'sunny', 'c1', [])]
    """
    if not isinstance(items, list) or not items:
        return None
    raws: list[dict[str, Any]] = []
    for item in items:
        message = _from_repr(item) if isinstance(item, str) else item
        chat = _to_chat(message) if isinstance(message, dict) else None
        if chat is None:
            return None
        raws += chat
    return parse_messages(raws)


def _json(attrs: Mapping[str, Any], key: str) -> Any:
    return json_or_text(attrs.get(key))


def _listed(value: Any, key: str) -> list[Msg]:
    """The ChatMessages under ``key`` of a recorded input/output object."""
    items = value.get(key) if isinstance(value, dict) else None
    return chat_messages(items) or []


def chain_io(span: TraceSpan) -> tuple[Any, Any] | None:
    """The (input, output) a Haystack component, agent or pipeline span records (content tracing on), or None.

    Example:
        >>> chain_io(TraceSpan("a" * 32, "b" * 16, None, "haystack.agent.run", attributes={
        ...     "haystack.agent.input": '{"messages": []}', "haystack.agent.output": '{"messages": []}'}))
        ({'messages': []}, {'messages': []})
    """
    for in_key, out_key in _CHAIN_IO:
        if in_key in span.attributes and out_key in span.attributes:
            return _json(span.attributes, in_key), _json(span.attributes, out_key)
    return None


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:  # noqa: ARG001
    """Read a model-request or tool span of Haystack's own tracer into a `SpanView`, or None.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "haystack.agent.step.llm", attributes={
        ...     "haystack.agent.step.llm.input": '{"messages": [{"role": "user", "content": [{"text": "Hi"}]}]}',
        ...     "haystack.agent.step.llm.output": '{"replies": [{"role": "assistant", "content": [{"text": "Yo"}]}]}'})
        >>> view = view_span(span, (), print)
        >>> (view.kind, view.request[0].content, view.response[0].content)
        ('llm', 'Hi', 'Yo')
    """
    attrs = span.attributes
    if not span.has_key_prefix("haystack."):
        return None
    ctx = common_context(attrs)
    if span.name == "haystack.agent.step.tool" or "haystack.agent.step.tool.input" in attrs:
        view = SpanView(span=span, convention="haystack", kind="tool", context=ctx)
        name = attrs.get("haystack.tool.name")
        view.tool_name = name if isinstance(name, str) else None
        view.tool_arguments = call_arguments(attrs.get("haystack.agent.step.tool.input"))
        view.tool_result = attrs.get("haystack.agent.step.tool.output")
        return view
    if span.name == "haystack.agent.step.llm" or "haystack.agent.step.llm.input" in attrs:
        keys = ("haystack.agent.step.llm.input", "haystack.agent.step.llm.output")
    elif str(attrs.get("haystack.component.type", "")).endswith("ChatGenerator"):
        keys = ("haystack.component.input", "haystack.component.output")
    else:
        return None
    view = SpanView(span=span, convention="haystack", kind="llm", context=ctx)
    view.request = _listed(_json(attrs, keys[0]), "messages")
    view.response = _listed(_json(attrs, keys[1]), "replies")
    view.fallback = not view.has_content
    return view
