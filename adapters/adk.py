"""Google Agent Development Kit (ADK) spans (scope ``gcp.vertex.agent``).

Owned by the adapters. ADK's agent and tool spans follow the GenAI conventions
(``invoke_workflow`` / ``invoke_agent`` / ``execute_tool``). Model calls come in two
schemas: the legacy one (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`` and ADK < 2) records a
``call_llm`` span with ``gcp.vertex.agent.llm_request`` (JSON: ``config.system_instruction``
and Gemini ``contents``) and ``gcp.vertex.agent.llm_response`` (JSON: ``content``); the
semconv-aligned one puts GenAI messages on ``generate_content`` spans when content capture
is on. A ``generate_content`` span without messages (the default, or nested in a legacy
``call_llm``) is used only when nothing better is there, so usage is not counted twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from adapters import genai
from adapters._messages import loads, parse_messages
from adapters._trace import TraceLog, TraceSpan
from adapters._view import Report, SpanView, common_context, str_attr, system_texts, usage_from

__all__ = ["SCOPE", "claims", "view_span"]

SCOPE = "gcp.vertex.agent"
_REQUEST = "gcp.vertex.agent.llm_request"
_RESPONSE = "gcp.vertex.agent.llm_response"


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:
    """Read a Google ADK span into a `SpanView`, or None if it is not one.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "call_llm", scope_name="gcp.vertex.agent", attributes={
        ...     "gcp.vertex.agent.llm_request": '{"config": {"system_instruction": "Be terse."},'
        ...         ' "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}',
        ...     "gcp.vertex.agent.llm_response": '{"content": {"role": "model", "parts": [{"text": "Hello"}]}}'})
        >>> view = view_span(span, (), print)
        >>> (view.kind, view.system, view.request[0].content, view.response[0].role)
        ('llm', ['Be terse.'], 'Hi', 'assistant')
    """
    attrs = span.attributes
    if span.scope_name != SCOPE and _REQUEST not in attrs:
        return None
    raw_request = attrs.get(_REQUEST)
    if isinstance(raw_request, str) and raw_request.strip() not in ("", "{}"):
        request = loads(raw_request, report)
        response = loads(attrs.get(_RESPONSE), report) if isinstance(attrs.get(_RESPONSE), str) else None
        view = SpanView(span=span, convention="google-adk", kind="llm", context=common_context(attrs),
                        usage=usage_from(attrs))
        if isinstance(request, dict):
            config: dict[str, Any] = request["config"] if isinstance(request.get("config"), dict) else {}
            view.system = system_texts(config.get("system_instruction"), report)
            view.request = parse_messages(request.get("contents") or [])
        if isinstance(response, dict) and isinstance(response.get("content"), dict):
            view.response = parse_messages([response["content"]])
        session = str_attr(attrs, "gcp.vertex.agent.session_id")
        if session:
            view.context.setdefault("session_id", session)
        return view
    semconv = genai.view_span(span, logs, report)
    if semconv is None:
        return None
    semconv.convention = "google-adk"
    if semconv.kind == "llm" and not semconv.has_content:
        semconv.fallback = True
    if semconv.kind == "tool" and semconv.tool_result is None:
        result = attrs.get("gcp.vertex.agent.tool_response")
        semconv.tool_result = loads(result) if isinstance(result, str) and result[:1] in ("{", "[") else result
    return semconv


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like a legacy ADK model-call span?

    Example:
        >>> claims(["gcp.vertex.agent.llm_request"])
        True
    """
    return _REQUEST in attribute_keys
