"""pydantic-ai / Logfire agent runs (instrumentation data formats v1 to v6).

Owned by the adapters. The agent span (``invoke_agent <name>``, older ``agent run``)
carries the whole conversation in ``pydantic_ai.all_messages`` (GenAI parts JSON; v1:
``all_messages_events``, a JSON list of GenAI events) and the system prompt in
``gen_ai.system_instructions`` (with ``instructions=``) or as a leading ``role: system``
message (with ``system_prompt=``). Tool results come as role ``user`` (v5) or ``tool``
(v6); both become role ``tool``. Usage on the agent span is ``gen_ai.aggregated_usage.*``.
Model and tool spans are read by the GenAI module and labelled ``pydantic-ai``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from adapters import genai
from adapters._messages import Msg, loads, parse_messages
from adapters._trace import TraceLog, TraceSpan
from adapters._view import Report, SpanView, common_context, str_attr, system_texts, usage_from

__all__ = ["claims", "view_span"]

_AGENT_KEYS = ("pydantic_ai.all_messages", "all_messages_events")


def _events_to_messages(events: Any) -> list[Msg]:
    raws = []
    for event in events if isinstance(events, list) else ():
        if not isinstance(event, dict):
            continue
        name = event.get("event.name", "")
        if name == "gen_ai.choice" and isinstance(event.get("message"), dict):
            raws.append({"role": "assistant", **event["message"]})
        elif "role" in event:
            raws.append(event)
        elif isinstance(name, str) and name.startswith("gen_ai.") and name.endswith(".message"):
            raws.append({**event, "role": name[len("gen_ai.") : -len(".message")]})
    return parse_messages(raws)


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:
    """Read a pydantic-ai span into a `SpanView`, or None if it is not one.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "invoke_agent bot", scope_name="pydantic-ai",
        ...     attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot",
        ...                 "pydantic_ai.all_messages": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]},'
        ...                 '{"role":"assistant","parts":[{"type":"text","content":"Yo"}]}]'})
        >>> view = view_span(span, (), print)
        >>> (view.kind, [m.content for m in view.conversation])
        ('agent', ['Hi', 'Yo'])
    """
    attrs = span.attributes
    is_agent = any(k in attrs for k in _AGENT_KEYS)
    if not is_agent and span.scope_name != "pydantic-ai":
        return None
    if not is_agent:
        view = genai.view_span(span, logs, report)
        if view is not None:
            view.convention = "pydantic-ai"
            if not view.request and not view.response and "events" in attrs:
                # data format v1 (event_mode="attributes"): the GenAI events as one JSON list
                events = loads(attrs["events"], report)
                choices = [e for e in events if isinstance(e, dict) and e.get("event.name") == "gen_ai.choice"] \
                    if isinstance(events, list) else []
                view.request = _events_to_messages([e for e in events or () if e not in choices])
                view.response = _events_to_messages(choices)
        return view
    view = SpanView(span=span, convention="pydantic-ai", kind="agent", context=common_context(attrs))
    name = str_attr(attrs, "gen_ai.agent.name", "agent_name")
    if name:
        view.context["agent_name"] = name
    view.system = system_texts(attrs.get("gen_ai.system_instructions"), report)
    if "pydantic_ai.all_messages" in attrs:
        parsed = loads(attrs["pydantic_ai.all_messages"], report)
        view.conversation = parse_messages(parsed) if isinstance(parsed, list) else []
    else:
        view.conversation = _events_to_messages(loads(attrs["all_messages_events"], report))
    if not view.conversation:
        final = attrs.get("final_result")
        if isinstance(final, str) and final:
            view.response = [Msg("assistant", final)]
    view.usage = usage_from(attrs, "gen_ai.aggregated_usage.") or usage_from(attrs)
    return view


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like a pydantic-ai agent span?

    Example:
        >>> claims(["pydantic_ai.all_messages"])
        True
    """
    return any(k in _AGENT_KEYS for k in attribute_keys)
