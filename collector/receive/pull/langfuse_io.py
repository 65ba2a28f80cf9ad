"""Langfuse observations -> the span attributes they were ingested from.

Langfuse's OTLP ingestion (``OtelIngestionProcessor``) keeps a span's attributes in the
observation's ``metadata.attributes`` (non-text values as their JSON text), its resource in
``metadata.resourceAttributes`` and its scope in ``metadata.scope``, but takes the message
attributes out: the first convention that has some becomes the observation's ``input`` and
``output`` (the value as sent, or for indexed keys a nested object), and every known message
key is removed from ``metadata.attributes``. `restore_io` puts them back where the span's other
attributes say they came from, so the adapters read the span as they did live. (What Langfuse
dropped cannot come back: of a span with two conventions' messages it keeps the first, as an
OpenInference span's ``input.value`` over its ``llm.input_messages.*``; the adapters then read
what is left.)

- scope ``ai`` (Vercel AI SDK): ``ai.prompt.messages`` / ``ai.response.text`` (and
  ``ai.response.toolCalls``);
- ``openinference.span.kind``: ``llm.input_messages.*`` / ``llm.output_messages.*`` when
  the input is a list of ``{"message": ...}``, else ``input.value`` / ``output.value``;
- ``traceloop.span.kind``: ``traceloop.entity.input`` / ``traceloop.entity.output``;
  ``llm.request.type`` (OpenLLMetry model calls): ``gen_ai.prompt.*`` / ``gen_ai.completion.*``;
- scope ``pydantic-ai``, but its ``chat`` spans: ``pydantic_ai.all_messages`` / ``final_result``;
- any other span with ``gen_ai.*`` attributes: ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` (``gen_ai.tool.call.arguments`` / ``.result`` for a tool call).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def parsed(value: Any) -> Any:
    """A raw ``input``/``output`` as a value: JSON text parsed, anything else as it is.

    Example:
        >>> parsed('[{"role": "user"}]'), parsed("plain"), parsed(None)
        ([{'role': 'user'}], 'plain', None)
    """
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def text(value: Any) -> str:
    """A value as attribute text: strings as they are, anything else as JSON.

    Example:
        >>> text("hi"), text([{"role": "user"}])
        ('hi', '[{"role": "user"}]')
    """
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def flatten(prefix: str, value: Any) -> dict[str, Any]:
    """A nested value as indexed dotted attributes (how Langfuse nested them, undone).

    Example:
        >>> flatten("llm.input_messages", [{"message": {"role": "user", "content": "Hi"}}])
        {'llm.input_messages.0.message.role': 'user', 'llm.input_messages.0.message.content': 'Hi'}
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(f"{prefix}.{key}", item))
        return out
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(f"{prefix}.{index}", item))
        return out
    return {prefix: value}


def _pair(attributes: Mapping[str, Any], scope: str, value_in: Any) -> tuple[str, str, bool]:
    """Where a span's input and output came from: the two keys, and whether they are indexed."""
    if scope == "ai":
        return ("ai.prompt.messages" if isinstance(value_in, list) else "ai.prompt"), "ai.response.text", False
    if "openinference.span.kind" in attributes:
        if isinstance(value_in, list) and value_in and all(isinstance(m, Mapping) and "message" in m
                                                              for m in value_in):
            return "llm.input_messages", "llm.output_messages", True
        return "input.value", "output.value", False
    if "llm.request.type" in attributes:
        return "gen_ai.prompt", "gen_ai.completion", True
    if "traceloop.span.kind" in attributes:
        return "traceloop.entity.input", "traceloop.entity.output", False
    if scope == "pydantic-ai" and attributes.get("gen_ai.operation.name") != "chat":  # its agent run span
        return "pydantic_ai.all_messages", "final_result", False
    if attributes.get("gen_ai.operation.name") == "execute_tool":
        return "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", False
    return "gen_ai.input.messages", "gen_ai.output.messages", False


def restore_io(attributes: Mapping[str, Any], raw_input: Any, raw_output: Any, scope: str = "") -> dict[str, Any]:
    """The span's attributes with the message attributes Langfuse took out put back.

    Example:
        >>> a = restore_io({"gen_ai.operation.name": "chat"}, '[{"role": "user", "parts": []}]', None)
        >>> a["gen_ai.input.messages"], "gen_ai.output.messages" in a
        ('[{"role": "user", "parts": []}]', False)
        >>> oi = restore_io({"openinference.span.kind": "LLM"},
        ...                 [{"message": {"role": "user", "content": "Hi"}}], [{"message": {"role": "assistant"}}])
        >>> sorted(oi)
        ['llm.input_messages.0.message.content', 'llm.input_messages.0.message.role', 'llm.output_messages.0.message.role', 'openinference.span.kind']
        >>> restore_io({"http.route": "/"}, None, None)
        {'http.route': '/'}
    """
    out = dict(attributes)
    value_in, value_out = parsed(raw_input), parsed(raw_output)
    if value_in is None and value_out is None:
        return out
    key_in, key_out, indexed = _pair(attributes, scope, value_in)
    for key, raw, value in ((key_in, raw_input, value_in), (key_out, raw_output, value_out)):
        if value is None or key in out:
            continue
        if indexed:
            for flat_key, flat_value in flatten(key, value).items():
                out.setdefault(flat_key, flat_value)
        elif key == "ai.response.text" and isinstance(value, Mapping) and "tool_calls" in value:
            out.setdefault("ai.response.text", value.get("content") or "")
            out.setdefault("ai.response.toolCalls", text(value["tool_calls"]))
        else:
            out[key] = raw if isinstance(raw, str) else text(value)
    return out
