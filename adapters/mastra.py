"""Mastra's own spans as exported by ``@mastra/otel-exporter``.

Owned by the adapters. Every Mastra span has ``mastra.span.type``: ``agent_run`` is the
run span (``mastra.agent_run.input`` / ``.output``, ``gen_ai.system_instructions`` as
plain text), ``model_step`` is one model request (``mastra.model_step.input`` = the
messages sent, ``.output`` = ``{text, toolCalls}``), ``model_generation`` covers a whole
multi-step generation (``gen_ai.input.messages`` / ``.output.messages`` in newer
exporters, ``mastra.model_generation.input`` / ``.output`` in older ones) and is used only
when a run has no step spans; ``tool_call`` / ``mcp_tool_call`` are tool spans. Other
Mastra spans (``model_inference``, ``model_chunk``, workflow spans...) are claimed and
ignored, so the GenAI module does not read their partial copies as model calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapters import genai
from adapters._messages import Call, Msg, json_or_text, loads, parse_messages, text_of
from adapters._trace import TraceLog, TraceSpan
from adapters._view import Report, SpanView, common_context, str_attr, system_texts, usage_from

__all__ = ["claims", "view_span"]

_CALL_PLACEHOLDER = re.compile(r"\[tool: ([^\]]+)\]")
_RESULT_PLACEHOLDER = re.compile(r"\[tool-result: ([^\]]+)\]")


def _json(attrs: Mapping[str, Any], key: str) -> Any:
    # Mastra writes strings as they are and everything else as JSON.
    return json_or_text(attrs.get(key))


def _placeholder(msg: Msg) -> Msg:
    # Step inputs replay tool calls and results as "[tool: name]" / "[tool-result: name]".
    if msg.role == "assistant" and not msg.tool_calls:
        names = _CALL_PLACEHOLDER.findall(msg.content)
        if names and _CALL_PLACEHOLDER.sub("", msg.content).strip() == "":
            return Msg("assistant", "", tuple(Call("", n.strip()) for n in names), placeholder=True)
    if msg.role == "tool" and not msg.tool_call_id:
        match = _RESULT_PLACEHOLDER.fullmatch(msg.content.strip())
        if match:
            return Msg("tool", "", name=match.group(1).strip(), placeholder=True)
    return msg


def _input_messages(value: Any) -> list[Msg]:
    if isinstance(value, str):
        return [Msg("user", value)] if value else []
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list):
        return [_placeholder(m) for m in parse_messages(value)]
    return []


def _output_messages(value: Any) -> list[Msg]:
    if isinstance(value, str):
        return [Msg("assistant", value)] if value else []
    if not isinstance(value, dict):
        return []
    text = value.get("text")
    text = text if isinstance(text, str) else ""
    if not text and value.get("object") is not None:
        text = text_of(value["object"])
    calls = []
    for raw in value.get("toolCalls") or ():
        if isinstance(raw, dict):
            payload: dict[str, Any] = raw["payload"] if isinstance(raw.get("payload"), dict) else raw
            call_id = payload.get("toolCallId") or payload.get("id") or ""
            name = payload.get("toolName") or payload.get("name") or ""
            args = payload.get("args", payload.get("input", payload.get("arguments")))
            calls.append(Call(str(call_id), str(name), args))
    if not text and not calls:
        return []
    return [Msg("assistant", text, tuple(calls))]


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:
    """Read a Mastra span into a `SpanView`, or None if it is not one.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "invoke_agent assistant", attributes={
        ...     "mastra.span.type": "agent_run", "gen_ai.agent.name": "assistant",
        ...     "mastra.agent_run.input": "Hi", "mastra.agent_run.output": '{"text": "Hello"}',
        ...     "gen_ai.system_instructions": "Be terse."})
        >>> view = view_span(span, (), print)
        >>> (view.kind, view.system, view.request[0].content, view.response[0].content)
        ('agent', ['Be terse.'], 'Hi', 'Hello')
    """
    attrs = span.attributes
    span_type = attrs.get("mastra.span.type")
    if not isinstance(span_type, str):
        return None
    span_type = span_type.lower()
    ctx = common_context(attrs)
    thread = str_attr(attrs, "mastra.metadata.threadId")
    if thread:
        ctx.setdefault("conversation_id", thread)
    user = str_attr(attrs, "mastra.metadata.resourceId", "mastra.metadata.userId")
    if user:
        ctx.setdefault("user_id", user)
    view = SpanView(span=span, convention="mastra", kind="other", context=ctx, usage=usage_from(attrs))
    if span_type == "agent_run":
        view.kind = "agent"
        view.system = system_texts(attrs.get("gen_ai.system_instructions"), report)
        view.request = _input_messages(_json(attrs, "mastra.agent_run.input"))
        view.response = _output_messages(_json(attrs, "mastra.agent_run.output"))
        name = str_attr(attrs, "gen_ai.agent.name", "gen_ai.agent.id")
        if name:
            view.context["agent_name"] = name
    elif span_type == "model_step":
        view.kind = "llm"
        meta = _json(attrs, "mastra.metadata.modelMetadata")
        if isinstance(meta, dict):
            if isinstance(meta.get("modelId"), str):
                view.context.setdefault("model", meta["modelId"])
            if isinstance(meta.get("modelProvider"), str):
                view.context.setdefault("provider", meta["modelProvider"])
        view.request = _input_messages(_json(attrs, "mastra.model_step.input"))
        view.response = _output_messages(_json(attrs, "mastra.model_step.output"))
    elif span_type == "model_generation":
        view.kind = "llm"
        view.fallback = True
        view.request = genai.messages_attr(attrs.get("gen_ai.input.messages"), report) or _input_messages(
            _json(attrs, "mastra.model_generation.input")
        )
        view.response = genai.messages_attr(attrs.get("gen_ai.output.messages"), report) or _output_messages(
            _json(attrs, "mastra.model_generation.output")
        )
    elif span_type in ("tool_call", "mcp_tool_call"):
        view.kind = "tool"
        view.tool_name = str_attr(attrs, "gen_ai.tool.name")
        view.tool_call_id = str_attr(attrs, "gen_ai.tool.call.id")
        result = attrs.get("gen_ai.tool.call.result", attrs.get("mastra.tool_call.output"))
        view.tool_result = loads(result) if isinstance(result, str) and result[:1] in ("{", "[") else result
    return view


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like a Mastra span?

    Example:
        >>> claims(["mastra.span.type"])
        True
    """
    return "mastra.span.type" in attribute_keys
