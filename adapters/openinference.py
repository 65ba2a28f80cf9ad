"""OpenInference (Arize Phoenix) spans, including its GenAI-semconv mode and the OpenAI Agents SDK.

Owned by the adapters. Reads ``openinference.span.kind`` (LLM / AGENT / TOOL), the
flattened ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*``
attributes (``.content`` or ``.contents.K.message_content.*``, ``.tool_calls.M.tool_call.*``,
``.tool_call_id``), and ``input.value`` / ``output.value``. With
``OPENINFERENCE_ENABLE_GENAI_SEMCONV`` the same messages are also in ``gen_ai.*``
attributes: only one copy is read. An AGENT span without ``agent.name`` (the Agents SDK
trace root) is a weak agent claim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapters import genai
from adapters._agent_input import USER_ARGUMENTS, arguments_messages
from adapters._messages import Msg, loads, parse_messages, text_of
from adapters._trace import TraceLog, TraceSpan
from adapters._view import (
    Report,
    SpanView,
    call_arguments,
    common_context,
    int_attr,
    str_attr,
    usage_from,
)

__all__ = ["claims", "oi_messages", "view_span"]

_FUNCTION_RESULT = re.compile(r"function\.\d+$")


def oi_messages(attrs: Mapping[str, Any], prefix: str, default_role: str = "user") -> list[Msg]:
    """Messages from flattened OpenInference attributes under ``prefix`` (sorted by integer index).

    An entry without a role gets ``default_role``: "user" among inputs, "assistant" among outputs.

    Example:
        >>> attrs = {"llm.output_messages.0.message.role": "assistant",
        ...          "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
        ...          "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "w",
        ...          "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{}"}
        >>> [(m.role, m.tool_calls[0].id) for m in oi_messages(attrs, "llm.output_messages.")]
        [('assistant', 'c1')]
    """
    raws = []
    for entry in genai.indexed(attrs, prefix):
        content: Any = entry.get("message.content")
        if content is None:
            parts = []
            for part in genai.indexed(entry, "message.contents."):
                ptype = part.get("message_content.type", "text")
                if ptype == "text":
                    parts.append({"type": "text", "text": part.get("message_content.text") or ""})
                elif ptype == "image":
                    parts.append({"type": "image", "url": part.get("message_content.image.image.url")})
            content = parts or None
        raw: dict[str, Any] = {"role": entry.get("message.role") or default_role, "content": content}
        calls = [
            {
                "id": c.get("tool_call.id"),
                "name": c.get("tool_call.function.name"),
                # the instrumentations leave out arguments that are "{}"
                "arguments": c.get("tool_call.function.arguments", {}),
            }
            for c in genai.indexed(entry, "message.tool_calls.")
        ]
        if calls:
            raw["tool_calls"] = calls
        if entry.get("message.function_call_name"):
            raw["function_call"] = {
                "name": entry["message.function_call_name"],
                "arguments": entry.get("message.function_call_arguments_json"),
            }
        keys = sorted((k for k in entry if _FUNCTION_RESULT.match(k)), key=lambda k: int(k.rsplit(".", 1)[1]))
        results = [loads(entry[k]) for k in keys]
        if results and content is None:
            # AutoGen AgentChat: role "function", each result a JSON FunctionExecutionResult
            raw["content"] = [{"type": "tool_result", **r} for r in results if isinstance(r, dict)]
        if entry.get("message.tool_call_id") is not None:
            raw["tool_call_id"] = entry["message.tool_call_id"]
        if isinstance(entry.get("message.name"), str):
            raw["name"] = entry["message.name"]
        raws.append(raw)
    return parse_messages(raws)


def _value(attrs: Mapping[str, Any], key: str, report: Report) -> Any:
    value = attrs.get(key)
    mime = attrs.get(key.replace(".value", ".mime_type"))
    if isinstance(value, str) and (mime == "application/json" or value.strip()[:1] in ("{", "[")):
        parsed = loads(value)
        if parsed is not None:
            return parsed
        if mime == "application/json":
            report("invalid_json")
    return value


def _body_messages(body: Any, key: str) -> list[Msg]:
    if isinstance(body, dict):
        if isinstance(body.get(key), list):
            return parse_messages(body[key])
        choices = body.get("choices")
        if isinstance(choices, list):
            raws: list[dict[str, Any]] = []
            for choice in choices:
                message = choice.get("message") or choice.get("delta") if isinstance(choice, dict) else None
                if isinstance(message, dict):
                    raws.append({"role": "assistant", **message})
            return parse_messages(raws)
        output = body.get("output")
        if isinstance(output, list):
            return parse_messages(output)
    if isinstance(body, list):
        # a message list, or (Agents SDK streaming) a list of whole Response objects
        return parse_messages(body) or [
            m for item in body if isinstance(item, dict) for m in _body_messages(item, key)
        ]
    return []


def _usage(attrs: Mapping[str, Any]) -> dict[str, int]:
    usage: dict[str, int] = {}
    for name, key in (
        ("input_tokens", "llm.token_count.prompt"),
        ("output_tokens", "llm.token_count.completion"),
        ("total_tokens", "llm.token_count.total"),
    ):
        value = int_attr(attrs, key)
        if value is not None:
            usage[name] = value
    return usage or usage_from(attrs)


def _text_message(role: str, value: Any) -> list[Msg]:
    if value is None or value == "":
        return []
    if isinstance(value, (list, dict)):
        msgs = _body_messages(value, "messages")
        if msgs:
            return msgs if role == "user" else [m for m in msgs if m.role == "assistant"][-1:]
        return [Msg(role, text_of(value))]
    return [Msg(role, str(value))]


def _agent_input(value: Any, view: SpanView) -> list[Msg]:
    """The agent's input messages: text, a message list, or the user's argument of the agent call."""
    if not isinstance(value, dict):
        return _text_message("user", value)
    msgs = _body_messages(value, "messages")
    if msgs:
        return msgs
    text = value.get("content", value.get("text"))
    if isinstance(text, str):
        return [Msg("user", text)]
    msgs, name = arguments_messages(value)
    if name is not None:
        view.notes.append(f"input from the {name!r} argument of the agent call (input.value)")
    else:
        view.notes.append(
            "input.value is a JSON object with no argument holding messages in a known shape "
            f"(looked for {', '.join(USER_ARGUMENTS)}): no input messages from it"
        )
    return msgs


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:
    """Read an OpenInference span into a `SpanView`, or None if it is not one.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "ChatCompletion", attributes={
        ...     "openinference.span.kind": "LLM",
        ...     "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "Hi",
        ...     "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Yo"})
        >>> view = view_span(span, (), print)
        >>> (view.kind, view.request[0].content, view.response[0].content)
        ('llm', 'Hi', 'Yo')
    """
    attrs = span.attributes
    kind_attr = attrs.get("openinference.span.kind")
    kind_attr = kind_attr.upper() if isinstance(kind_attr, str) else ""
    has_messages = span.has_key_prefix("llm.input_messages.", "llm.output_messages.")
    if not kind_attr and not has_messages:
        return None
    ctx = common_context(attrs)
    if kind_attr == "AGENT":
        name = str_attr(attrs, "agent.name", "graph.node.id")
        view = SpanView(span=span, convention="openinference", kind="agent", context=ctx, usage=_usage(attrs))
        view.weak = not str_attr(attrs, "agent.name")
        if name:
            view.context["agent_name"] = name
        view.request = _agent_input(_value(attrs, "input.value", report), view)
        view.response = _text_message("assistant", _value(attrs, "output.value", report))
        return view
    if kind_attr == "TOOL":
        view = SpanView(span=span, convention="openinference", kind="tool", context=ctx)
        view.tool_name = str_attr(attrs, "tool.name")
        if view.tool_name is None and span.name:
            # no tool.name (DSPy): the span is named after the callable, ``<tool>.__call__``
            view.tool_name = span.name.removesuffix(".__call__")
            view.notes.append("tool name from the span name (no tool.name attribute)")
        view.tool_call_id = str_attr(attrs, "tool_call.id", "tool.id")
        view.tool_result = attrs.get("output.value")
        if attrs.get("output.mime_type") == "application/json" and isinstance(loads(view.tool_result), str):
            view.tool_result = loads(view.tool_result)  # a JSON string (DSPy): the text it encodes
        view.tool_arguments = call_arguments(
            attrs.get("tool_call.function.arguments", attrs.get("input.value"))
        )
        return view
    if kind_attr not in ("LLM", ""):
        # CHAIN / RETRIEVER / ... spans: LangChain copies the graph state's messages onto
        # them, but they are not model calls
        return None
    view = SpanView(span=span, convention="openinference", kind="llm", context=ctx, usage=_usage(attrs))
    view.request = oi_messages(attrs, "llm.input_messages.")
    view.response = oi_messages(attrs, "llm.output_messages.", default_role="assistant")
    if not view.request and not view.response:
        gen = genai.view_span(span, logs, report)
        if gen is not None and gen.has_content:
            view.request, view.response, view.system = gen.request, gen.response, gen.system
    if not view.request:
        view.request = _body_messages(_value(attrs, "input.value", report), "messages")
    if not any(m.role != "system" for m in view.request):
        raw_input = attrs.get("input.value")
        if (
            isinstance(raw_input, str)
            and raw_input.strip()[:1] not in ("", "{", "[")
            and attrs.get("input.mime_type") != "application/json"
        ):
            view.request.append(Msg("user", raw_input))  # a plain-text request (Agents SDK str input)
    if not view.response:
        view.response = _body_messages(_value(attrs, "output.value", report), "messages")
    # an LLM span without messages (LlamaIndex's _prepare_chat_with_tools, hidden inputs)
    # counts only when the trace has no better model call
    view.fallback = not view.has_content
    return view


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like an OpenInference span?

    Example:
        >>> claims(["openinference.span.kind"])
        True
    """
    return any(k == "openinference.span.kind" or k.startswith("llm.input_messages.") for k in attribute_keys)
