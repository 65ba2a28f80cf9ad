"""OpenLLMetry / Traceloop spans: decorator spans and the OpenLLMetry LLM instrumentations.

Owned by the adapters. Decorator spans carry ``traceloop.span.kind`` (``workflow`` /
``agent`` are run spans, ``tool`` a tool span, ``task`` nothing of its own) and
``traceloop.entity.input`` / ``.output`` (JSON of the Python call's arguments and return
value, read only as a fallback). LLM spans (scope ``opentelemetry.instrumentation.*``
with ``llm.request.type``, ``llm.is_streaming`` / ``gen_ai.is_streaming`` or
``traceloop.*`` attributes) use GenAI JSON messages (>= 0.55) or the legacy indexed
``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes; the GenAI module reads both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapters import genai
from adapters._messages import Msg, loads, parse_messages, text_of
from adapters._trace import TraceLog, TraceSpan
from adapters._view import Report, SpanView, common_context, str_attr

__all__ = ["claims", "view_span"]

_LLM_MARKERS = ("llm.request.type", "llm.is_streaming", "gen_ai.is_streaming", "llm.headers")


def _find_messages(value: Any, depth: int = 0) -> list[Msg]:
    # entity input is {"args": [...], "kwargs": {...}}: look for a list of chat messages in it
    if depth > 3:
        return []
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and "role" in v for v in value):
            return parse_messages(value)
        for item in value:
            found = _find_messages(item, depth + 1)
            if found:
                return found
    elif isinstance(value, dict):
        for key in ("messages", "kwargs", "args", "inputs", "input"):
            if key in value:
                found = _find_messages(value[key], depth + 1)
                if found:
                    return found
    return []


def _entity(attrs: Mapping[str, Any], key: str, report: Report) -> Any:
    # JSON of a Python value; a string that is not JSON is taken as it is
    value = attrs.get(key)
    if isinstance(value, str):
        parsed = loads(value)
        return value if parsed is None else parsed
    return value


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:
    """Read a Traceloop / OpenLLMetry span into a `SpanView`, or None if it is not one.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "weather_agent.agent", attributes={
        ...     "traceloop.span.kind": "agent", "traceloop.entity.name": "weather_agent"})
        >>> view = view_span(span, (), print)
        >>> (view.kind, view.context["agent_name"])
        ('agent', 'weather_agent')
    """
    attrs = span.attributes
    span_kind = attrs.get("traceloop.span.kind")
    if isinstance(span_kind, str):
        ctx = common_context(attrs)
        if span_kind in ("agent", "workflow"):
            view = SpanView(span=span, convention="traceloop", kind="agent", context=ctx)
            name = str_attr(attrs, "traceloop.entity.name", "traceloop.workflow.name")
            if name:
                view.context.setdefault("agent_name", name)
            view.request = _find_messages(_entity(attrs, "traceloop.entity.input", report))
            output = _entity(attrs, "traceloop.entity.output", report)
            if isinstance(output, str) and output:
                view.response = [Msg("assistant", output)]
            elif isinstance(output, dict) and isinstance(output.get("content"), str):
                view.response = [Msg("assistant", text_of(output))]
            return view
        if span_kind == "tool":
            view = SpanView(span=span, convention="traceloop", kind="tool", context=ctx)
            view.tool_name = str_attr(attrs, "traceloop.entity.name")
            view.tool_result = _entity(attrs, "traceloop.entity.output", report)
            return view
        return None
    is_openllmetry = span.scope_name.startswith("opentelemetry.instrumentation.") and (
        any(k in attrs for k in _LLM_MARKERS) or span.has_key_prefix("traceloop.")
    )
    if not is_openllmetry:
        return None
    llm_view = genai.view_span(span, logs, report)
    if llm_view is not None:
        llm_view.convention = "traceloop"
    return llm_view


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like a Traceloop span?

    Example:
        >>> claims(["traceloop.span.kind"])
        True
    """
    return any(k.startswith("traceloop.") or k in _LLM_MARKERS for k in attribute_keys)
