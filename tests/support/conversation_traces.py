"""Conversations as an agent's OpenTelemetry SDK exports them: one trace per user turn, the
turns sharing a session id (SPEC §7). Each turn is an ``invoke_agent`` span over a ``chat``
span (GenAI semantic conventions) whose input repeats the history, as chat agents send it."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

SYSTEM = "You are a helpful support agent."
TURNS = (
    ("Hi, I am Ann and my order 123 has not arrived.", "Sorry Ann! Order 123 ships today."),
    ("Can you send it express instead?", "Done: order 123 now ships express."),
    ("Thanks, that is all.", "You are welcome, Ann!"),
)
"""A three-turn conversation: (user message, agent answer) per turn."""


def _parts(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def turn_body(session_id: str | None, index: int, **options: Any) -> tuple[bytes, str, str]:
    """Turn ``index`` as an OTLP request body (`emit_turn`'s options); the body, the trace id
    and the agent span id."""
    memory = InMemorySpanExporter()
    trace_id, span_id = emit_turn(memory, session_id, index, **options)
    return encode_spans(memory.get_finished_spans()).SerializeToString(), trace_id, span_id


def emit_turn(exporter: SpanExporter, session_id: str | None, index: int, *, turns: Sequence[tuple[str, str]] = TURNS,
              service: str = "support-bot", end: bool = False, key: str = "session.id",
              on_root: bool = False, wrapped: bool = False, remote_parent: bool = False) -> tuple[str, str]:
    """Send turn ``index`` of ``turns`` with the SDK through ``exporter`` (blocking): its input is
    the history so far and the new user message, its output the answer. ``key``: the session
    attribute (on the agent span, or a parent root span with ``on_root``; ``wrapped``: under such
    a root span, the attribute still on the agent span); ``end``: the turn
    carries ``tracescore.session.end = true``; ``remote_parent``: the turn's top span is a child
    of a span in another service (a propagated context). Returns the trace id and the agent span id."""
    provider = TracerProvider(resource=Resource({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test-conversation")
    history = [_parts(role, text) for question, answer in turns[:index]
               for role, text in (("user", question), ("assistant", answer))]
    question, answer = turns[index]
    messages = json.dumps([*history, _parts("user", question)])
    output = json.dumps([{**_parts("assistant", answer), "finish_reason": "stop"}])
    session_attrs: dict[str, Any] = {key: session_id} if session_id is not None else {}
    if end:
        session_attrs["tracescore.session.end"] = True
    agent_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
                   "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
                   "gen_ai.input.messages": messages, "gen_ai.output.messages": output}
    parent = None
    if remote_parent:
        caller = SpanContext(trace_id=random.getrandbits(128), span_id=random.getrandbits(64), is_remote=True,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED))
        parent = trace.set_span_in_context(NonRecordingSpan(caller))
    if on_root or wrapped:
        root_attrs, agent_attrs = (session_attrs, agent_attrs) if on_root else ({}, {**agent_attrs, **session_attrs})
        with tracer.start_as_current_span("POST /chat", context=parent, attributes=root_attrs):
            with tracer.start_as_current_span("invoke_agent support", attributes=agent_attrs) as agent:
                ctx = agent.get_span_context()
    else:
        with tracer.start_as_current_span("invoke_agent support", context=parent,
                                          attributes={**agent_attrs, **session_attrs}) as agent:
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.input.messages": messages, "gen_ai.output.messages": output}):
                pass
            ctx = agent.get_span_context()
    provider.force_flush()
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def without_root(body: bytes) -> bytes:
    """``body`` without its root span (a trace whose root never arrived)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            kept = [span for span in ss.spans if span.parent_span_id]
            del ss.spans[:]
            ss.spans.extend(kept)
    return request.SerializeToString()
