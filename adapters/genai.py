"""OpenTelemetry GenAI semantic conventions, current and earlier, span by span.

Owned by the adapters. Current (semconv >= 1.37): ``gen_ai.operation.name``
(``invoke_agent`` / ``chat`` / ``execute_tool``...), ``gen_ai.input.messages``,
``gen_ai.output.messages``, ``gen_ai.system_instructions`` as JSON strings or structured
values. Earlier: indexed ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes,
per-message events (``gen_ai.system.message``, ``gen_ai.user.message``,
``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``) as span events
or OTLP log records, ``gen_ai.content.prompt`` / ``.completion`` span events, and the
``gen_ai.client.inference.operation.details`` log event with structured messages. An
``execute_tool`` span gives its call: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``.arguments`` and ``.result`` (Semantic Kernel's spans carry the tool calls only there when
its log records are not sent).

A traced function (OpenLIT's ``@openlit.trace``: no operation, ``gen_ai.output.messages``
holding the function's return value as plain text, ``function.args`` / ``function.kwargs``
the Python ``str()`` of its arguments) is no model call: `traced_function_io` gives what it
recorded, for the CHAIN-root rule of `adapters._chain`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from adapters._messages import Msg, json_or_text, loads, parse_messages
from adapters._trace import TraceLog, TraceSpan
from adapters._view import Report, SpanView, common_context, str_attr, system_texts, usage_from
from scorers._var_block import VarBlock

__all__ = ["AGENT_OPERATIONS", "LLM_OPERATIONS", "indexed", "indexed_messages", "messages_attr", "messages_read_once",
           "traced_function_io", "view_span"]

AGENT_OPERATIONS = frozenset({"invoke_agent", "invoke_workflow"})
LLM_OPERATIONS = frozenset(
    {"chat", "text_completion", "generate_content", "completion", "responses", "generate"}
)
_NOT_LLM = frozenset({"embeddings", "embedding", "create_agent", "retrieval", "rerank"})
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_CURRENT_KEYS = frozenset({"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"})
_INDEX = re.compile(r"^(\d+)\.(.+)$")
_FUNCTION_KEYS = ("function.args", "function.kwargs")
_LLM_KEYS = frozenset({"gen_ai.input.messages", "gen_ai.system_instructions", "gen_ai.request.model", "gen_ai.system",
                       "gen_ai.provider.name"})
_OBJECT_REPR = re.compile(r"<[^<>'\"]* at 0x[0-9a-fA-F]+>")  # <app.Agent object at 0x7f...>, <function f at 0x...>


def messages_attr(value: Any, report: Report) -> list[Msg]:
    """Messages from a ``gen_ai.*.messages``-style value (JSON string or structured list).

    Example:
        >>> msgs = messages_attr('[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]', print)
        >>> [(m.role, m.content) for m in msgs]
        [('user', 'Hi')]
    """
    if value is None:
        return []
    memo = _TRACE_MESSAGES.get()
    if memo is None or type(value) is not str:
        return _messages(value, report)
    read = memo.get(value)
    if read is None:
        reasons: list[str] = []
        read = memo[value] = (tuple(_messages(value, reasons.append)), tuple(reasons))
    for reason in read[1]:
        report(reason)
    return list(read[0])


def _messages(value: Any, report: Report) -> list[Msg]:
    parsed = loads(value, report)
    if parsed is None:
        return []
    if not isinstance(parsed, (list, dict)):
        report("bad_attribute")
        return []
    return parse_messages(parsed)


_TRACE_MESSAGES: ContextVar[dict[str, tuple[tuple[Msg, ...], tuple[str, ...]]] | None] = ContextVar(
    "tracescore_trace_messages", default=None)


def messages_read_once() -> VarBlock[dict[str, tuple[tuple[Msg, ...], tuple[str, ...]]] | None]:
    """Within this block, `messages_attr` reads each distinct text once (the spans of one trace
    often carry the same messages: an agent span and its last model call, the system
    instructions of every call) and gives every later span with that text the same messages
    (a list of its own) and the same reports.

    Example:
        >>> text = '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]'
        >>> with messages_read_once():
        ...     first, again = messages_attr(text, print), messages_attr(text, print)
        >>> first == again, first is again, first[0] is again[0]
        (True, False, True)
    """
    return VarBlock(_TRACE_MESSAGES, {})


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Group flattened ``<prefix><N>.<rest>`` attributes into one dict per N, sorted by integer N.

    Example:
        >>> indexed({"p.10.role": "user", "p.2.role": "system", "p.2.content": "x"}, "p.")
        [{'role': 'system', 'content': 'x'}, {'role': 'user'}]
    """
    groups: dict[int, dict[str, Any]] = {}
    plen = len(prefix)
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        match = _INDEX.match(key[plen:])
        if match is None:
            continue
        groups.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [groups[i] for i in sorted(groups)]


def _content_value(value: Any) -> Any:
    # OpenLLMetry writes multimodal content as a JSON list of parts inside the string.
    if isinstance(value, str) and value.startswith("[{"):
        parsed = loads(value)
        if isinstance(parsed, list) and parsed and all(isinstance(p, dict) and "type" in p for p in parsed):
            return parsed
    return value


def indexed_messages(attrs: Mapping[str, Any], prefix: str, default_role: str = "user") -> list[Msg]:
    """Messages from legacy indexed attributes (``gen_ai.prompt.N.role`` / ``.content`` / ``.tool_calls.M.*``).

    An entry without a role gets ``default_role``: "user" in a prompt, "assistant" in a completion.

    Example:
        >>> attrs = {"gen_ai.completion.0.role": "assistant",
        ...          "gen_ai.completion.0.tool_calls.0.id": "c1",
        ...          "gen_ai.completion.0.tool_calls.0.name": "get_weather",
        ...          "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}'}
        >>> [(m.role, m.tool_calls[0].name) for m in indexed_messages(attrs, "gen_ai.completion.")]
        [('assistant', 'get_weather')]
    """
    raws = []
    for entry in indexed(attrs, prefix):
        raw: dict[str, Any] = {
            "role": entry.get("role") or default_role,
            "content": _content_value(entry.get("content")),
        }
        if "tool_call_id" in entry:
            raw["tool_call_id"] = entry["tool_call_id"]
        if isinstance(entry.get("name"), str):
            raw["name"] = entry["name"]
        calls = indexed(entry, "tool_calls.")
        if calls:
            raw["tool_calls"] = calls
        if "function_call.name" in entry:
            raw["function_call"] = {
                "name": entry.get("function_call.name"),
                "arguments": entry.get("function_call.arguments"),
            }
        raws.append(raw)
    return parse_messages(raws)


def _blocks(value: Any) -> Any:
    # Strands writes message content as a JSON list of content blocks inside the string.
    if isinstance(value, str) and value.startswith("[{"):
        parsed = loads(value)
        keys = {"type", "text", "toolUse", "toolResult", "reasoningContent", "image", "document"}
        if isinstance(parsed, list) and parsed and all(isinstance(p, dict) and keys & set(p) for p in parsed):
            return parsed
    return value


def _event_payload(attributes: Mapping[str, Any], body: Any) -> dict[str, Any]:
    data: dict[str, Any] = dict(attributes)
    packed = data.pop("gen_ai.event.content", None)  # Azure AI Inference / Semantic Kernel
    if isinstance(packed, str) and packed.strip()[:1] == "{":
        unpacked = loads(packed)
        if isinstance(unpacked, dict):
            data.update(unpacked)
    if isinstance(body, dict):
        data.update(body)
    elif isinstance(body, str) and body.strip()[:1] == "{":
        parsed = loads(body)
        if isinstance(parsed, dict):
            data.update(parsed)
    for key in ("tool_calls", "message"):
        value = data.get(key)
        if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
            parsed = loads(value)
            data[key] = parsed if parsed is not None else value
    if "content" in data:
        data["content"] = _blocks(data["content"])
    return data


class _EventMessages:
    """Accumulates request/response/system from per-message events and details records."""

    def __init__(self, report: Report) -> None:
        self.request: list[Msg] = []
        self.response: list[Msg] = []
        self.system: list[str] = []
        self.report = report
        self.seen = False
        self.legacy = False  # per-message events (semconv <= 1.36) rather than the details event

    def add(self, name: str, attributes: Mapping[str, Any], body: Any) -> None:
        if name in _MESSAGE_EVENTS:
            data = _event_payload(attributes, body)
            data["role"] = _MESSAGE_EVENTS[name]
            self.request.extend(parse_messages([data]))
            self.seen = self.legacy = True
        elif name == "gen_ai.choice":
            data = _event_payload(attributes, body)
            message = data.get("message")
            if isinstance(message, (str, list)):  # Strands: the reply text or its content blocks
                message = {"content": _blocks(message)}
            if not isinstance(message, dict):
                message = {k: data[k] for k in ("content", "tool_calls") if k in data}
            elif "tool_calls" not in message and isinstance(data.get("tool_calls"), list):
                message = {**message, "tool_calls": data["tool_calls"]}  # OpenLLMetry puts them beside it
            message = {"role": "assistant", **message}
            self.response.extend(parse_messages([message]))
            self.seen = self.legacy = True
        elif name == _DETAILS_EVENT:
            data = dict(attributes)
            if isinstance(body, dict):
                data.update(body)
            self.request.extend(messages_attr(data.get("gen_ai.input.messages"), self.report))
            self.response.extend(messages_attr(data.get("gen_ai.output.messages"), self.report))
            self.system.extend(system_texts(data.get("gen_ai.system_instructions"), self.report))
            self.seen = True
        elif name == "gen_ai.content.prompt":
            self.request.extend(messages_attr(attributes.get("gen_ai.prompt"), self.report))
            self.seen = self.legacy = True
        elif name == "gen_ai.content.completion":
            self.response.extend(messages_attr(attributes.get("gen_ai.completion"), self.report))
            self.seen = self.legacy = True


def _has_legacy(span: TraceSpan) -> bool:
    return span.has_key_prefix("gen_ai.prompt.", "gen_ai.completion.")


def _plain_output(attrs: Mapping[str, Any]) -> str | None:
    """``gen_ai.output.messages`` when it holds plain text (a function's return value), not messages."""
    value = attrs.get("gen_ai.output.messages")
    if not isinstance(value, str) or isinstance(json_or_text(value), (list, dict)):
        return None
    return value


def _only_plain_output(attrs: Mapping[str, Any]) -> bool:
    """Whether plain-text ``gen_ai.output.messages`` is all the GenAI a span says (no request, model or provider)."""
    return _LLM_KEYS.isdisjoint(attrs) and _plain_output(attrs) is not None


def _python_literal(text: Any) -> Any:
    """The value a Python ``str()`` of literals stands for (objects' default reprs read as None), else None."""
    if not isinstance(text, str):
        return None
    for source in (text, _OBJECT_REPR.sub("None", text)):
        try:
            return ast.literal_eval(source)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    return None


def traced_function_io(span: TraceSpan) -> tuple[dict[str, Any], str] | None:
    """A traced function span's recorded call and return value: ``({"args", "kwargs"}, text)``, else None.

    OpenLIT's ``@openlit.trace`` writes the return value into ``gen_ai.output.messages`` as
    plain text and the call's arguments as the Python ``str()`` of ``args`` and ``kwargs``.
    Objects (a method's ``self``) are left out of ``args``; arguments that are not Python
    literals leave nothing.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "weather_agent", attributes={
        ...     "gen_ai.output.messages": "Sunny.", "function.args": "(<app.Agent object at 0x7f01>, 'Weather?')",
        ...     "function.kwargs": "{'city': 'Paris'}"})
        >>> traced_function_io(span)
        ({'args': ['Weather?'], 'kwargs': {'city': 'Paris'}}, 'Sunny.')
        >>> traced_function_io(TraceSpan("a" * 32, "b" * 16, None, "chat", attributes={
        ...     "gen_ai.operation.name": "chat", "gen_ai.output.messages": "Sunny.", "function.args": "()"})) is None
        True
    """
    attrs = span.attributes
    if attrs.keys().isdisjoint(_FUNCTION_KEYS) or "gen_ai.operation.name" in attrs:
        return None
    output = _plain_output(attrs)
    if output is None:
        return None
    args = _python_literal(attrs.get("function.args"))
    kwargs = _python_literal(attrs.get("function.kwargs"))
    return {"args": [a for a in args if a is not None] if isinstance(args, (tuple, list)) else [],
            "kwargs": kwargs if isinstance(kwargs, dict) else {}}, output


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:
    """Read a GenAI-convention span (with its log records) into a `SpanView`, or None if it is not one.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat gpt-4o-mini", attributes={
        ...     "gen_ai.operation.name": "chat",
        ...     "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]',
        ...     "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"Hello"}]}]'})
        >>> view = view_span(span, (), print)
        >>> (view.kind, view.request[0].content, view.response[0].content)
        ('llm', 'Hi', 'Hello')
    """
    attrs = span.attributes
    op = attrs.get("gen_ai.operation.name")
    op = op if isinstance(op, str) else ""
    if op in _NOT_LLM:
        return None
    events: _EventMessages | None = None  # most spans have no events and no log records
    if span.events or logs:
        events = _EventMessages(report)
        for event in span.events:
            events.add(event.name, event.attributes, None)
        for log in logs:
            events.add(log.event_name, log.attributes, log.body)
    current = not attrs.keys().isdisjoint(_CURRENT_KEYS)
    legacy = _has_legacy(span)
    if op in AGENT_OPERATIONS:
        kind = "agent"
    elif op == "execute_tool":
        kind = "tool"
    elif op and op not in LLM_OPERATIONS and not (current or legacy):
        return None  # a named step that is not a model call (Strands' execute_event_loop_cycle...)
    elif not (op or legacy or (events is not None and events.seen)) and _only_plain_output(attrs):
        return None  # a traced function's return value (`traced_function_io`), not a model's messages
    elif op in LLM_OPERATIONS or current or legacy or (events is not None and events.seen):
        kind = "llm"
    elif "gen_ai.request.model" in attrs or "gen_ai.system" in attrs or "gen_ai.provider.name" in attrs:
        kind = "llm"
    else:
        return None
    view = SpanView(
        span=span,
        convention="genai" if current or not (legacy or (events is not None and events.legacy)) else "genai-legacy",
        kind=kind,
        context=common_context(attrs),
        usage=usage_from(attrs),
    )
    view.system = system_texts(attrs.get("gen_ai.system_instructions"), report)
    view.request = messages_attr(attrs.get("gen_ai.input.messages"), report)
    view.response = messages_attr(attrs.get("gen_ai.output.messages"), report)
    if not view.request and legacy:
        view.request = indexed_messages(attrs, "gen_ai.prompt.")
    if not view.response and legacy:
        view.response = indexed_messages(attrs, "gen_ai.completion.", default_role="assistant")
    if events is not None:
        if not view.request:
            view.request = events.request
        if not view.response:
            view.response = events.response
        if not view.system:
            view.system = events.system
    if kind == "agent" and not view.has_content and not str_attr(attrs, "gen_ai.agent.name"):
        view.weak = True  # a nameless wrapper (the Agents SDK trace, an ADK workflow): yields to agents below
    if kind == "tool":
        view.tool_name = str_attr(attrs, "gen_ai.tool.name")
        view.tool_call_id = str_attr(attrs, "gen_ai.tool.call.id")
        view.tool_result = attrs.get("gen_ai.tool.call.result")
        view.tool_arguments = json_or_text(attrs.get("gen_ai.tool.call.arguments"))
    return view


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like a GenAI-convention span?

    Example:
        >>> claims(["gen_ai.operation.name"])
        True
    """
    return any(k.startswith("gen_ai.") for k in attribute_keys)
