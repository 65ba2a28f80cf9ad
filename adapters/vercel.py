"""Vercel AI SDK telemetry (``experimental_telemetry``): ``ai.*`` spans.

Owned by the adapters. ``ai.generateText`` / ``ai.streamText`` / ``ai.generateObject`` /
``ai.streamObject`` are run spans (``ai.prompt`` = JSON ``{system, prompt, messages}``,
``ai.response.text``, ``ai.response.toolCalls``); their ``.doGenerate`` / ``.doStream``
children are the model requests (``ai.prompt.messages`` = JSON messages in AI SDK format,
``ai.response.text``, ``ai.response.toolCalls`` = JSON ``[{toolCallId, toolName,
args|input}]``); ``ai.toolCall`` spans are tool executions (``ai.toolCall.name`` /
``.id`` / ``.args`` / ``.result``). The operation comes from ``ai.operationId`` (the span
name as a fallback). Usage: ``ai.usage.promptTokens`` / ``completionTokens`` (v4) or
``inputTokens`` / ``outputTokens`` (v5+).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapters import genai
from adapters._messages import Call, Msg, loads, parse_messages
from adapters._trace import TraceLog, TraceSpan
from adapters._view import (
    Report,
    SpanView,
    common_context,
    int_attr,
    str_attr,
    token_usage,
    usage_from,
)

__all__ = ["claims", "view_span"]

_RUN_OPS = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})
_LLM_OPS = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)


def _usage(attrs: Mapping[str, Any]) -> dict[str, int]:
    usage = token_usage(int_attr(attrs, "ai.usage.inputTokens", "ai.usage.promptTokens"),
                        int_attr(attrs, "ai.usage.outputTokens", "ai.usage.completionTokens"),
                        int_attr(attrs, "ai.usage.totalTokens"))
    return usage or usage_from(attrs)


def _response(attrs: Mapping[str, Any], report: Report) -> list[Msg]:
    text = attrs.get("ai.response.text")
    text = text if isinstance(text, str) else ""
    if not text and isinstance(attrs.get("ai.response.object"), str):
        text = attrs["ai.response.object"]
    calls = []
    raw_calls = loads(attrs.get("ai.response.toolCalls"), report)
    for raw in raw_calls if isinstance(raw_calls, list) else ():
        if isinstance(raw, dict):
            calls.append(
                Call(
                    str(raw.get("toolCallId") or raw.get("id") or ""),
                    str(raw.get("toolName") or raw.get("name") or ""),
                    raw.get("args", raw.get("input")),
                )
            )
    if not text and not calls:
        return []
    return [Msg("assistant", text, tuple(calls))]


def _prompt(attrs: Mapping[str, Any], report: Report) -> tuple[list[str], list[Msg]]:
    prompt = loads(attrs.get("ai.prompt"), report)
    if not isinstance(prompt, dict):
        return [], []
    system = [prompt["system"]] if isinstance(prompt.get("system"), str) and prompt["system"] else []
    msgs: list[Msg] = []
    if isinstance(prompt.get("messages"), list):
        msgs = parse_messages(prompt["messages"])
    elif isinstance(prompt.get("prompt"), str):
        msgs = [Msg("user", prompt["prompt"])]
    elif isinstance(prompt.get("prompt"), list):
        msgs = parse_messages(prompt["prompt"])
    return system, msgs


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:
    """Read a Vercel AI SDK span into a `SpanView`, or None if it is not one.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "ai.generateText.doGenerate", attributes={
        ...     "ai.operationId": "ai.generateText.doGenerate",
        ...     "ai.prompt.messages": '[{"role":"user","content":[{"type":"text","text":"Hi"}]}]',
        ...     "ai.response.text": "Hello"})
        >>> view = view_span(span, (), print)
        >>> (view.kind, view.request[0].content, view.response[0].content)
        ('llm', 'Hi', 'Hello')
    """
    attrs = span.attributes
    op = attrs.get("ai.operationId")
    if not isinstance(op, str) or not op.startswith("ai."):
        op = span.name if span.name.startswith("ai.") else ""
    if not op:
        return None
    ctx = common_context(attrs)
    model = str_attr(attrs, "ai.response.model", "ai.model.id")
    if model:
        ctx["model"] = model
    provider = str_attr(attrs, "ai.model.provider")
    if provider:
        ctx.setdefault("provider", provider)
    for key, name in (
        ("ai.telemetry.metadata.userId", "user_id"),
        ("ai.telemetry.metadata.sessionId", "session_id"),
        ("ai.telemetry.metadata.conversationId", "conversation_id"),
        ("ai.telemetry.metadata.threadId", "conversation_id"),
    ):
        value = str_attr(attrs, key)
        if value:
            ctx.setdefault(name, value)
    function_id = str_attr(attrs, "ai.telemetry.functionId", "resource.name")
    response_id = str_attr(attrs, "ai.response.id")
    if response_id:
        ctx["response_id"] = response_id
    view = SpanView(span=span, convention="vercel-ai", kind="other", context=ctx, usage=_usage(attrs))
    if op in _RUN_OPS:
        view.kind = "agent"
        if function_id:
            view.context.setdefault("agent_name", function_id)
        view.system, view.request = _prompt(attrs, report)
        view.response = _response(attrs, report)
    elif op in _LLM_OPS:
        view.kind = "llm"
        raw = loads(attrs.get("ai.prompt.messages"), report)
        view.request = parse_messages(raw) if isinstance(raw, list) else []
        if not view.request:
            view.request = genai.messages_attr(attrs.get("gen_ai.input.messages"), report)
        view.response = _response(attrs, report) or genai.messages_attr(
            attrs.get("gen_ai.output.messages"), report
        )
    elif op == "ai.toolCall":
        view.kind = "tool"
        view.tool_name = str_attr(attrs, "ai.toolCall.name")
        view.tool_call_id = str_attr(attrs, "ai.toolCall.id")
        result = attrs.get("ai.toolCall.result")
        view.tool_result = loads(result) if isinstance(result, str) and result[:1] in ("{", "[") else result
    return view


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like a Vercel AI SDK span?

    Example:
        >>> claims(["ai.operationId"])
        True
    """
    return any(k.startswith("ai.") for k in attribute_keys)
