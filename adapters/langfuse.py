"""Langfuse observations: the spans of the Langfuse SDKs (Python v3 and later, JS v4 and later), OpenTelemetry-native.

Owned by the adapters. Every span the Langfuse SDK makes (scope ``langfuse-sdk``) carries
``langfuse.observation.type`` and, with input/output capture on (the default),
``langfuse.observation.input`` / ``.output``: JSON text of the recorded value, or the text
itself when the value was a string. Read here:

* ``agent``: a run span. Its input is what the decorated function was called with,
  ``{"args": [...], "kwargs": {...}}`` (``@observe``), or whatever the user recorded; its
  output is the function's return value (the answer);
* ``generation``: one model request. The ``langfuse.openai`` drop-in records the chat
  request's ``messages`` (a list, or ``{"messages", "tools"}`` when tools are offered), the
  Responses API's ``input`` / ``instructions``, and the answer message (a list when several
  choices came back); ``langfuse.observation.model.name``; ``.usage_details`` (OpenAI's or
  Langfuse's usage keys);
* ``tool``: one tool call, named by the span (``@observe`` records no call id); its input
  the call's arguments, its output the result.

``span``, ``chain`` (and observations without a type) are not read here: `chain_io` gives
their recorded input and output to the CHAIN-root rule (`adapters._chain`), which makes such
a span the run when the trace has no agent (``@observe()`` alone makes ``span`` observations).
``embedding``, ``retriever``, ``evaluator``, ``guardrail`` and ``event`` are nothing of a
run's. A value that is not valid JSON, or JSON of no shape known here, is read as plain
text. Session and user: ``session.id`` / ``langfuse.session.id`` and ``user.id`` /
``langfuse.user.id`` (``propagate_attributes`` puts them on every span; 3.x's
``update_current_trace`` on the span current when it is called).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapters._agent_input import arguments_messages
from adapters._messages import Msg, loads, parse_messages
from adapters._trace import TraceLog, TraceSpan
from adapters._view import Report, SpanView, common_context, int_attr, str_attr, token_usage

__all__ = ["chain_io", "claims", "view_span"]

TYPE = "langfuse.observation.type"
INPUT = "langfuse.observation.input"
OUTPUT = "langfuse.observation.output"
_TRACE_IO = ("langfuse.trace.input", "langfuse.trace.output")
_CHAIN_TYPES = frozenset({"span", "chain"})
_ANSWER_FIELDS = ("answer", "output", "response", "result", "final_answer", "text", "content")


def _parsed(value: Any) -> Any:
    """A recorded value: JSON text parsed (a JSON string gives its text), anything else as it is."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "[", '"'):
        parsed = loads(value)
        return value if parsed is None else parsed
    return value


def _plain(value: Any) -> str:
    """A recorded value as plain text (JSON for what is not text)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _as_text(role: str, raw: Any, view: SpanView, what: str) -> list[Msg]:
    """The recorded value as one plain-text message (a shape not known here), noted on the view."""
    text = "" if raw is None else _plain(raw)
    if not text.strip():
        return []
    view.notes.append(f"{what} is not in a known message shape: read as plain text")
    return [Msg(role, text)]


def _is_call(value: Any) -> bool:
    """Whether a recorded input is ``@observe``'s record of a Python call: ``{"args": [...], "kwargs": {...}}``."""
    return isinstance(value, dict) and bool(value) and set(value) <= {"args", "kwargs"} and (
        isinstance(value.get("args", []), list) and isinstance(value.get("kwargs", {}), dict))


def _call_input(value: dict[str, Any], view: SpanView) -> list[Msg]:
    """The user's message in a recorded call: a message argument, the first text argument, else the arguments as text."""
    args: list[Any] = value.get("args", [])
    kwargs: dict[str, Any] = value.get("kwargs", {})
    msgs, name = arguments_messages(kwargs)
    if msgs:
        view.notes.append(f"input from the {name!r} argument of the function call")
        return msgs
    for i, arg in enumerate(args):
        if isinstance(arg, str) and arg.strip():
            view.notes.append(f"input from positional argument {i} of the function call")
            return [Msg("user", arg)]
    for i, arg in enumerate(args):
        msgs = []
        if isinstance(arg, list):
            msgs = parse_messages(arg)
        elif isinstance(arg, dict):
            msgs = parse_messages(arg) if "role" in arg else arguments_messages(arg)[0]
        if msgs:
            view.notes.append(f"input from positional argument {i} of the function call")
            return msgs
    values = [*args, *kwargs.values()]
    if not values:
        return []
    view.notes.append("no text or message among the function's arguments: the arguments as text")
    if len(values) == 1:
        return [Msg("user", _plain(values[0]))]
    return [Msg("user", _plain(args if not kwargs else kwargs if not args else value))]


def _input_messages(raw: Any, view: SpanView) -> list[Msg]:
    """An agent's input: text, a message list, a recorded call, or named arguments; else the value as text."""
    value = _parsed(raw)
    if isinstance(value, str):
        return [Msg("user", value)] if value.strip() else []
    if _is_call(value):
        return _call_input(value, view)
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            msgs = parse_messages(value["messages"])
        elif "role" in value:
            msgs = parse_messages(value)
        else:
            msgs, name = arguments_messages(value)
            if msgs:
                view.notes.append(f"input from its {name!r} field")
        if msgs:
            return msgs
    elif isinstance(value, list):
        msgs = parse_messages(value)
        if msgs:
            return msgs
    return _as_text("user", raw, view, "the input")


def _answer(msgs: list[Msg]) -> list[Msg]:
    return [m for m in msgs if m.role == "assistant"][-1:]


def _output_messages(raw: Any, view: SpanView, *, model: bool) -> list[Msg]:
    """An output: text, a message (or a model response), a message list, or an answer field; else the value as text.

    A model call's output keeps every message it holds (several choices, Responses items);
    an agent's only its last assistant message (a returned conversation ends with the answer).
    """
    value = _parsed(raw)
    if value is None:
        return []
    if isinstance(value, str):
        return [Msg("assistant", value)] if value.strip() else []
    msgs: list[Msg] = []
    if isinstance(value, dict):
        if "role" in value or "tool_calls" in value:
            msgs = parse_messages({"role": "assistant", **value} if value.get("role") is None else value)
        elif isinstance(value.get("choices"), list):
            msgs = parse_messages([{"role": "assistant", **c["message"]} for c in value["choices"]
                                   if isinstance(c, dict) and isinstance(c.get("message"), dict)])
        elif isinstance(value.get("messages"), list):
            msgs = parse_messages(value["messages"])
        elif isinstance(value.get("output"), list):
            msgs = parse_messages(value["output"])
        else:
            answer = next((value[k] for k in _ANSWER_FIELDS if isinstance(value.get(k), str) and value[k].strip()), None)
            msgs = [Msg("assistant", answer)] if answer is not None else []
    elif isinstance(value, list):
        msgs = parse_messages(value)
    msgs = msgs if model else _answer(msgs)
    return msgs or _as_text("assistant", raw, view, "the output")


def _request(raw: Any, view: SpanView) -> list[Msg]:
    """A model request: ``messages`` (with ``tools``), a message list, the Responses API's ``input`` and
    ``instructions``, or a prompt text; else the value as text."""
    value = _parsed(raw)
    if isinstance(value, str):
        return [Msg("user", value)] if value.strip() else []
    msgs: list[Msg] = []
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            msgs = parse_messages(value["messages"])
        elif "input" in value or "instructions" in value:
            inp = value.get("input")
            msgs = [Msg("user", inp)] if isinstance(inp, str) and inp.strip() else parse_messages(inp)
            if isinstance(value.get("instructions"), str) and value["instructions"].strip():
                msgs.insert(0, Msg("system", value["instructions"]))
        elif "role" in value:
            msgs = parse_messages(value)
    elif isinstance(value, list):
        msgs = parse_messages(value)
    return msgs or _as_text("user", raw, view, "the model request")


def _usage(raw: Any) -> dict[str, int]:
    """Token usage from ``usage_details`` JSON: Langfuse's ``input``/``output``/``total`` or OpenAI's names.

    Example:
        >>> _usage('{"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10, "prompt_tokens_details": null}')
        {'input_tokens': 3, 'output_tokens': 7, 'total_tokens': 10}
        >>> _usage('{"input": 5, "output": 2}'), _usage("oops")
        ({'input_tokens': 5, 'output_tokens': 2, 'total_tokens': 7}, {})
    """
    value = _parsed(raw)
    if not isinstance(value, dict):
        return {}
    return token_usage(int_attr(value, "input", "input_tokens", "prompt_tokens"),
                       int_attr(value, "output", "output_tokens", "completion_tokens"),
                       int_attr(value, "total", "total_tokens"))


def _tool_arguments(raw: Any) -> Any:
    """A tool's arguments from its recorded call: the keyword arguments, the only positional one, or as recorded."""
    value = _parsed(raw)
    if not _is_call(value):
        return value
    args, kwargs = value.get("args", []), value.get("kwargs", {})
    if kwargs or not args:
        return kwargs
    return args[0] if len(args) == 1 else args


def _context(attrs: Mapping[str, Any]) -> dict[str, Any]:
    ctx = common_context(attrs)
    for name, key in (("session_id", "langfuse.session.id"), ("user_id", "langfuse.user.id"),
                      ("model", "langfuse.observation.model.name")):
        value = str_attr(attrs, key)
        if value is not None:
            ctx.setdefault(name, value)
    return ctx


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:  # noqa: ARG001
    """Read a Langfuse agent, generation or tool observation into a `SpanView`, or None.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "OpenAI-generation", attributes={
        ...     "langfuse.observation.type": "generation", "langfuse.observation.model.name": "gpt-4o-mini",
        ...     "langfuse.observation.input": '{"messages": [{"role": "user", "content": "Hi"}], "tools": []}',
        ...     "langfuse.observation.output": '{"role": "assistant", "content": "Yo"}'})
        >>> view = view_span(span, (), print)
        >>> (view.kind, view.request[0].content, view.response[0].content, view.context["model"])
        ('llm', 'Hi', 'Yo', 'gpt-4o-mini')
        >>> agent = TraceSpan("a" * 32, "c" * 16, None, "weather_agent", attributes={
        ...     "langfuse.observation.type": "agent", "langfuse.observation.input": '{"args": [42], "kwargs": {}}'})
        >>> [(m.role, m.content) for m in view_span(agent, (), print).request]
        [('user', '42')]
    """
    attrs = span.attributes
    kind = attrs.get(TYPE)
    if not isinstance(kind, str) or kind not in ("agent", "generation", "tool"):
        return None
    if kind == "tool":
        view = SpanView(span=span, convention="langfuse", kind="tool", context=_context(attrs))
        view.notes.append("Langfuse tool observation (langfuse.observation.type=tool): named by the span, no call id")
        view.tool_name = span.name or None
        view.tool_arguments = _tool_arguments(attrs.get(INPUT))
        result = _parsed(attrs.get(OUTPUT))
        view.tool_result = result if isinstance(result, str) else attrs.get(OUTPUT)
        return view
    if kind == "agent":
        view = SpanView(span=span, convention="langfuse", kind="agent", context=_context(attrs))
        view.notes.append("Langfuse agent observation (langfuse.observation.type=agent): a run span")
        if span.name:
            view.context.setdefault("agent_name", span.name)
        view.request = _input_messages(attrs.get(INPUT), view)
        view.response = _output_messages(attrs.get(OUTPUT), view, model=False)
        return view
    view = SpanView(span=span, convention="langfuse", kind="llm", context=_context(attrs))
    view.notes.append("Langfuse generation (langfuse.observation.type=generation): request and answer from "
                      "langfuse.observation.input / output")
    view.usage = _usage(attrs.get("langfuse.observation.usage_details"))
    view.request = _request(attrs.get(INPUT), view)
    view.response = _output_messages(attrs.get(OUTPUT), view, model=True)
    view.fallback = not view.has_content
    return view


def chain_io(span: TraceSpan) -> tuple[Any, Any] | None:
    """The (input, output) a Langfuse ``span`` / ``chain`` observation records (or its trace's), or None.

    Example:
        >>> chain_io(TraceSpan("a" * 32, "b" * 16, None, "handle", attributes={
        ...     "langfuse.observation.type": "span", "langfuse.observation.input": '{"args": ["Hi"], "kwargs": {}}',
        ...     "langfuse.observation.output": "Hello"}))
        ('{"args": ["Hi"], "kwargs": {}}', 'Hello')
    """
    attrs = span.attributes
    kind = attrs.get(TYPE)
    if kind is None and not span.has_key_prefix("langfuse."):
        return None
    if kind is not None and kind not in _CHAIN_TYPES:
        return None
    for in_key, out_key in ((INPUT, OUTPUT), _TRACE_IO):
        if in_key in attrs and out_key in attrs:
            return attrs[in_key], attrs[out_key]
    return None


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like a Langfuse observation?

    Example:
        >>> claims(["langfuse.observation.type", "session.id"]), claims(["session.id"])
        (True, False)
    """
    return any(k == TYPE for k in attribute_keys)

