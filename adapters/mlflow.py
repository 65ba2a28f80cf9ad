"""MLflow Tracing in its native format: the ``mlflow.*`` span attributes MLflow exports over OTLP.

Owned by the adapters. MLflow (``@mlflow.trace``, ``mlflow.start_span``, the
``mlflow.<flavor>.autolog()`` integrations) writes on every span:

* ``mlflow.spanType``: ``AGENT``, ``CHAT_MODEL``, ``LLM``, ``TOOL``, ``CHAIN``, ``RETRIEVER``,
  ``EMBEDDING``... (`SPAN_KINDS`: the ones read; the others are neither an agent, a model call
  nor a tool);
* ``mlflow.spanInputs`` / ``mlflow.spanOutputs``: for a model call the request's keyword
  arguments (``messages``; the Responses API's ``input`` and ``instructions``; Anthropic's and
  Bedrock's ``system``) and the provider's answer (a chat completion's ``choices``, Responses
  ``output`` items, an Anthropic or Bedrock Converse message); for a traced function its bound
  arguments as a JSON object and its return value;
* ``mlflow.chat.tools`` (the tool definitions offered), ``mlflow.message.format`` (the flavor
  that wrote the messages, ``openai``...), ``mlflow.llm.model`` / ``mlflow.llm.provider``,
  ``mlflow.chat.tokenUsage`` and ``mlflow.spanFunctionName``.

Every value is JSON text, strings included (``mlflow.spanType`` = ``"AGENT"`` with the quotes;
a ``session.id`` set through MLflow's span API too: `decoded`). A value that is not valid JSON,
or JSON of a shape not listed here, is read as plain text: the user's or the assistant's words.
Values already structured (read back from MLflow's server) are taken as they are.

MLflow keeps a trace's session in its metadata (``mlflow.trace.session``), which its OTLP
export leaves out: what reaches tracescore is a ``session.id`` set on a span, or a trace tag,
exported on the root span as ``mlflow.traceTag.<key>`` (`adapters._session`). MLflow's
GenAI-semconv export (``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true``) replaces the ``mlflow.*``
attributes with ``gen_ai.*`` ones, which `adapters.genai` reads; so does it a span that carries
the GenAI convention's ``gen_ai.operation.name`` beside MLflow's attributes (an OpenTelemetry
library under an MLflow autolog).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapters._agent_input import arguments_messages
from adapters._messages import Msg, parse_json, parse_messages
from adapters._trace import TraceLog, TraceSpan
from adapters._view import Report, SpanView, call_arguments, common_context, system_texts

__all__ = ["SPAN_KINDS", "SPAN_TYPE", "answer_messages", "claims", "decoded", "is_mlflow", "request_messages",
           "session_text", "view_span"]

SPAN_TYPE = "mlflow.spanType"
INPUTS = "mlflow.spanInputs"
OUTPUTS = "mlflow.spanOutputs"
#: The MLflow span types read, and the view kind each becomes.
SPAN_KINDS: dict[str, str] = {"AGENT": "agent", "CHAT_MODEL": "llm", "LLM": "llm", "TOOL": "tool"}


def decoded(value: Any) -> Any:
    """An MLflow attribute value: the JSON its text holds, else the text as it is (structured values pass).

    Example:
        >>> decoded('"AGENT"'), decoded('{"city": "Paris"}'), decoded("not JSON"), decoded(["a"])
        ('AGENT', {'city': 'Paris'}, 'not JSON', ['a'])
    """
    if not isinstance(value, str) or not value.strip():
        return value
    try:
        return parse_json(value)
    except (ValueError, RecursionError):
        return value


def is_mlflow(span: TraceSpan) -> bool:
    """Whether MLflow made the span: its native format, or its GenAI-semconv export (MLflow's resource).

    Example:
        >>> is_mlflow(TraceSpan("a" * 32, "b" * 16, None, "x", resource={"telemetry.sdk.name": "mlflow"}))
        True
    """
    return SPAN_TYPE in span.attributes or span.resource.get("telemetry.sdk.name") == "mlflow"


def session_text(span: TraceSpan, value: str) -> str:
    """The session a span's session attribute names: on MLflow's spans a JSON string is the text it
    encodes (MLflow JSON-encodes every value set through it, and its server reads them so); else the value.

    Example:
        >>> agent = TraceSpan("a" * 32, "b" * 16, None, "agent", attributes={"mlflow.spanType": '"AGENT"'})
        >>> session_text(agent, '"chat-7"'), session_text(TraceSpan("a" * 32, "b" * 16, None, "x"), '"chat-7"')
        ('chat-7', '"chat-7"')
    """
    if value[:1] != '"' or not is_mlflow(span):
        return value
    text = decoded(value)
    return text if isinstance(text, str) and text.strip() else value


def _plain(value: Any) -> str:
    """A recorded value as the plain text a message holds (JSON for structured values)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _recorded(attrs: Mapping[str, Any], key: str, view: SpanView) -> Any:
    """The decoded value of ``mlflow.spanInputs`` / ``spanOutputs`` (None when absent); a note when not JSON."""
    raw = attrs.get(key)
    value = decoded(raw)
    if isinstance(raw, str) and value is raw and raw.strip():
        view.notes.append(f"{key} is not JSON: read as plain text")
    return value


def _choice_messages(choices: list[Any]) -> list[Msg]:
    raws = []
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message") or choice.get("delta")
        if isinstance(message, dict):
            raws.append({"role": "assistant", **{k: v for k, v in message.items() if v is not None}})
        elif isinstance(choice.get("text"), str):  # legacy completions
            raws.append({"role": "assistant", "content": choice["text"]})
    return parse_messages(raws)


def answer_messages(outputs: Any) -> list[Msg]:
    """The messages of a model's recorded answer (or a function's return value); [] for an unknown shape.

    Example:
        >>> [m.content for m in answer_messages({"choices": [{"message": {"role": "assistant", "content": "Hi"}}]})]
        ['Hi']
        >>> [m.content for m in answer_messages("Sunny.")], answer_messages({"rows": 3})
        (['Sunny.'], [])
    """
    if isinstance(outputs, str):
        return [Msg("assistant", outputs)] if outputs.strip() else []
    if isinstance(outputs, list):
        return parse_messages(outputs)
    if not isinstance(outputs, dict):
        return []
    if isinstance(outputs.get("choices"), list):
        return _choice_messages(outputs["choices"])
    output = outputs.get("output")
    if isinstance(output, list):  # Responses API items
        return parse_messages(output)
    if isinstance(output, dict) and isinstance(output.get("message"), dict):  # Bedrock Converse
        return parse_messages([{"role": "assistant", **output["message"]}])
    if "role" in outputs:  # one message (Anthropic)
        return parse_messages([outputs])
    if isinstance(outputs.get("messages"), list):
        return parse_messages(outputs["messages"])
    return []


def request_messages(inputs: Any) -> tuple[list[Msg], list[str]]:
    """``(messages, system texts)`` of a model call's recorded keyword arguments; nothing for an unknown shape.

    Example:
        >>> msgs, system = request_messages({"model": "m", "system": "Be terse.",
        ...                                  "messages": [{"role": "user", "content": "Hi"}]})
        >>> [(m.role, m.content) for m in msgs], system
        ([('user', 'Hi')], ['Be terse.'])
        >>> request_messages({"input": "Hi", "instructions": "Be terse."})[1]
        ['Be terse.']
    """
    if isinstance(inputs, str):
        return ([Msg("user", inputs)] if inputs.strip() else []), []
    if isinstance(inputs, list):
        return parse_messages(inputs), []
    if not isinstance(inputs, dict):
        return [], []
    system = system_texts(inputs.get("system")) + system_texts(inputs.get("instructions"))
    items = inputs.get("messages", inputs.get("input"))
    if isinstance(items, str):
        msgs = [Msg("user", items)] if items.strip() else []
    elif isinstance(items, (list, dict)):
        msgs = parse_messages(items)
    else:
        msgs, _ = arguments_messages(inputs)  # a function traced as a model call: its prompt argument
    return msgs, system


def _agent_input(inputs: Any, view: SpanView) -> list[Msg]:
    """The user's message(s) in an agent function's bound arguments (or a message list, or text)."""
    if not isinstance(inputs, dict):
        msgs, _ = request_messages(inputs)
        return msgs
    if isinstance(inputs.get("messages"), list):
        return parse_messages(inputs["messages"])
    msgs, name = arguments_messages(inputs)
    if name is not None:
        view.notes.append(f"input from the {name!r} argument of the agent function (mlflow.spanInputs)")
    return msgs


def _context(span: TraceSpan, inputs: Any, outputs: Any) -> dict[str, Any]:
    """Run context from the span's attributes, their JSON-encoded strings decoded (``session.id`` included)."""
    attrs = span.attributes
    ctx = common_context({k: decoded(v) if isinstance(v, str) and v[:1] == '"' else v for k, v in attrs.items()})
    model = decoded(attrs.get("mlflow.llm.model"))
    for source in (outputs, inputs):
        if not isinstance(model, str) and isinstance(source, dict):
            model = source.get("model")
    if isinstance(model, str) and model:
        ctx["model"] = model
    provider = decoded(attrs.get("mlflow.llm.provider"))
    if isinstance(provider, str) and provider:
        ctx["provider"] = provider
    return ctx


def _usage(attrs: Mapping[str, Any]) -> dict[str, int]:
    """``mlflow.chat.tokenUsage`` (``{input_tokens, output_tokens, total_tokens}``) as run usage."""
    usage = decoded(attrs.get("mlflow.chat.tokenUsage"))
    if not isinstance(usage, dict):
        return {}
    return {k: v for k in ("input_tokens", "output_tokens", "total_tokens")
            if isinstance(v := usage.get(k), int) and not isinstance(v, bool)}


def _text_fallback(view: SpanView, key: str, role: str, value: Any) -> list[Msg]:
    """A recorded value no shape here fits, as one message of its text as recorded (null and blanks: nothing)."""
    raw = view.span.attributes.get(key)
    if value is None or raw is None or not _plain(raw).strip():
        return []
    view.notes.append(f"{key} holds no known message shape: read as plain text")
    return [Msg(role, _plain(raw))]


def view_span(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:  # noqa: ARG001
    """Read an MLflow agent, model-call or tool span into a `SpanView`, or None if it is none of those.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "Completions", attributes={
        ...     "mlflow.spanType": '"CHAT_MODEL"', "mlflow.message.format": '"openai"',
        ...     "mlflow.spanInputs": '{"messages": [{"role": "user", "content": "Hi"}]}',
        ...     "mlflow.spanOutputs": '{"choices": [{"message": {"role": "assistant", "content": "Yo"}}]}'})
        >>> view = view_span(span, (), print)
        >>> (view.convention, view.kind, view.request[0].content, view.response[0].content)
        ('mlflow', 'llm', 'Hi', 'Yo')
    """
    attrs = span.attributes
    if SPAN_TYPE not in attrs or "gen_ai.operation.name" in attrs:
        return None
    span_type = decoded(attrs[SPAN_TYPE])
    kind = SPAN_KINDS.get(span_type.upper()) if isinstance(span_type, str) else None
    if kind is None:
        return None
    view = SpanView(span=span, convention="mlflow", kind=kind, usage=_usage(attrs),
                    notes=[f"MLflow {span_type.upper()} span (mlflow.spanType)"])
    inputs, outputs = _recorded(attrs, INPUTS, view), _recorded(attrs, OUTPUTS, view)
    view.context = _context(span, inputs, outputs)
    if kind == "tool":
        name = decoded(attrs.get("mlflow.spanFunctionName"))
        view.tool_name = name if isinstance(name, str) and name else span.name or None
        view.tool_arguments = call_arguments(inputs)
        view.tool_result = outputs
        return view
    if kind == "agent":
        view.context.setdefault("agent_name", span.name)
        view.request = _agent_input(inputs, view)
    else:
        view.request, view.system = request_messages(inputs)
        form = decoded(attrs.get("mlflow.message.format"))
        tools = decoded(attrs.get("mlflow.chat.tools"))
        view.notes.append(f"messages from mlflow.spanInputs / spanOutputs (mlflow.message.format {form!r}"
                          + (f", {len(tools)} tool definition(s) in mlflow.chat.tools)" if isinstance(tools, list) else ")"))
    if not view.request and not view.system:
        view.request = _text_fallback(view, INPUTS, "user", inputs)
    view.response = answer_messages(outputs) or _text_fallback(view, OUTPUTS, "assistant", outputs)
    view.fallback = kind == "llm" and not view.has_content
    return view


def claims(attribute_keys: Iterable[str]) -> bool:
    """Cheap check: do these attribute keys look like a span in MLflow's native format?

    Example:
        >>> claims(["mlflow.spanType", "mlflow.spanInputs"]), claims(["mlflow.traceTag.session_id"])
        (True, False)
    """
    return any(k == SPAN_TYPE for k in attribute_keys)
