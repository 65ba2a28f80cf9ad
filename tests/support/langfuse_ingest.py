"""What Langfuse makes of OTLP spans it ingests (``POST /api/public/otel/v1/traces``), for the
test server: a trace per trace id and an observation per span, shaped as its public API returns
them (``GET /api/public/traces``, ``GET /api/public/v2/observations``).

Follows Langfuse's ``OtelIngestionProcessor``: ids in hex; the observation's ``metadata`` holds
``attributes`` (the span's attributes without every known message attribute, non-text values as
their JSON text), ``resourceAttributes`` and ``scope`` {name, version, attributes}; the first
convention with message attributes, in Langfuse's order, gives ``input``/``output`` (the subset
of its conventions the tests send: Vercel, Traceloop entities, ``input.value``, pydantic-ai,
indexed ``gen_ai.prompt.*`` and ``llm.*_messages`` nested, GenAI messages and tool calls),
returned by the v2 API as raw text; level ERROR for an error status; times in milliseconds.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from adapters import TraceSpan, spans_from_resource_spans

IO_KEYS = frozenset({
    "langfuse.observation.input", "langfuse.observation.output", "ai.prompt.messages", "ai.prompt",
    "ai.response.text", "ai.response.toolCalls", "mlflow.spanInputs", "mlflow.spanOutputs",
    "traceloop.entity.input", "traceloop.entity.output", "input.value", "output.value", "input", "output",
    "pydantic_ai.all_messages", "final_result", "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "prompt", "all_messages_events", "events",
})
IO_PREFIXES = ("gen_ai.prompt", "gen_ai.completion", "llm.input_messages", "llm.output_messages")


def iso_ms(ns: int) -> str:
    """Unix nanoseconds as Langfuse's API writes a time (milliseconds, ``Z``)."""
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _nested(attributes: dict[str, Any], prefix: str) -> Any:
    """Langfuse's ``convertKeyPathToNestedObject`` for indexed keys (a list of the messages)."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if key.startswith(prefix + "."):
            index, _, rest = key[len(prefix) + 1:].partition(".")
            node = out.setdefault(int(index), {})
            *path, last = rest.split(".")
            for part in path:
                node = node.setdefault(part, {})
            node[last] = value
    return [out[i] for i in sorted(out)]


def input_output(attributes: dict[str, Any], scope: str) -> tuple[Any, Any]:
    """The observation's input and output: the first convention, in Langfuse's order, that has some."""
    pairs = [("langfuse.observation.input", "langfuse.observation.output")]
    if scope == "ai":
        pairs.append(("ai.prompt.messages", "ai.response.text"))
    pairs += [("prompt", "all_messages_events"), ("mlflow.spanInputs", "mlflow.spanOutputs"),
              ("traceloop.entity.input", "traceloop.entity.output"), ("input.value", "output.value"),
              ("input", "output")]
    if scope == "pydantic-ai":
        pairs.append(("pydantic_ai.all_messages", "final_result"))
    pairs.append(("tool_arguments", "tool_response"))
    for key_in, key_out in pairs:
        if attributes.get(key_in) or attributes.get(key_out):
            return attributes.get(key_in), attributes.get(key_out)
    for prefix_in, prefix_out in (("gen_ai.prompt", "gen_ai.completion"), ("llm.input_messages", "llm.output_messages")):
        if any(k.startswith(prefix_in) or k.startswith(prefix_out) for k in attributes):
            return _nested(attributes, prefix_in), _nested(attributes, prefix_out)
    for key_in, key_out in (("gen_ai.input.messages", "gen_ai.output.messages"),
                            ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")):
        if attributes.get(key_in) or attributes.get(key_out):
            return attributes.get(key_in), attributes.get(key_out)
    return None, None


def raw(value: Any) -> str | None:
    """A value as the v2 API returns input and output: raw text."""
    return None if value is None else value if isinstance(value, str) else json.dumps(value)


def observation(span: TraceSpan, scope_attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``ObservationV2`` (fields core, basic, io, metadata) Langfuse makes of one span."""
    attributes = dict(span.attributes)
    value_in, value_out = input_output(attributes, span.scope_name)
    kept = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in attributes.items()
            if k not in IO_KEYS and not k.startswith(IO_PREFIXES)}
    return {
        "id": span.span_id, "traceId": span.trace_id, "parentObservationId": span.parent_span_id,
        "projectId": "test-project", "type": "SPAN", "name": span.name,
        "startTime": iso_ms(span.start_ns), "endTime": iso_ms(span.end_ns),
        "level": "ERROR" if span.status_code == 2 else "DEFAULT", "statusMessage": None,
        "environment": "default", "isRootObservation": span.parent_span_id is None,
        "input": raw(value_in), "output": raw(value_out),
        "metadata": {"attributes": kept, "resourceAttributes": dict(span.resource),
                     "scope": {"name": span.scope_name, "version": span.scope_version,
                               "attributes": scope_attributes or {}}},
    }


def trace_row(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``TraceWithDetails`` of one trace's observations (the list's row)."""
    root = next((o for o in spans if o["parentObservationId"] is None), spans[0])
    session = next((o["metadata"]["attributes"].get("session.id") for o in spans
                    if o["metadata"]["attributes"].get("session.id")), None)
    return {
        "id": root["traceId"], "timestamp": min(o["startTime"] for o in spans), "name": root["name"],
        "input": root["input"], "output": root["output"], "sessionId": session, "release": None,
        "version": None, "userId": None, "metadata": {}, "tags": [], "public": False,
        "environment": "default", "htmlPath": f"/project/test-project/traces/{root['traceId']}",
        "latency": 0.0, "totalCost": 0.0, "observations": [o["id"] for o in spans], "scores": [],
    }


def ingest(body: bytes) -> list[dict[str, Any]]:
    """The observations of one OTLP/HTTP protobuf request."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return [observation(span) for span in spans_from_resource_spans(request.resource_spans)]
