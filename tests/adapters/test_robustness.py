"""Bad data never escapes as an exception: random attribute soups, broken span trees,
invalid JSON, mistyped attributes. Skips are counted with reasons from SKIP_REASONS."""

from __future__ import annotations

import json
from typing import Any

from adapters_support import extract, request, sid, span
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters import SKIP_REASONS, AssembledTrace, TraceLog, TraceSpan, extract_runs

TRACE = "ab" * 16
KEYS = [
    "gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
    "gen_ai.prompt.0.role", "gen_ai.prompt.0.content", "gen_ai.prompt.1.tool_calls.0.name",
    "gen_ai.completion.0.content", "gen_ai.completion.0.tool_calls.0.arguments", "gen_ai.tool.call.result",
    "gen_ai.usage.input_tokens", "gen_ai.agent.name", "openinference.span.kind",
    "llm.input_messages.0.message.role", "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", "input.value", "output.value",
    "input.mime_type", "traceloop.span.kind", "traceloop.entity.input", "llm.request.type", "ai.operationId",
    "ai.prompt", "ai.prompt.messages", "ai.response.toolCalls", "ai.response.text", "mastra.span.type",
    "mastra.agent_run.input", "mastra.model_step.input", "mastra.model_step.output", "pydantic_ai.all_messages",
    "all_messages_events", "gen_ai.tool.call.id", "agent.name", "final_result",
]
ENUMS = ["chat", "invoke_agent", "execute_tool", "LLM", "AGENT", "TOOL", "agent", "workflow", "agent_run",
         "model_step", "model_generation", "tool_call", "ai.generateText", "ai.generateText.doGenerate",
         "ai.toolCall", "user", "assistant", "tool", "system", "application/json"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8)
    | st.sampled_from(ENUMS),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["role", "content", "parts", "type", "id", "name", "arguments", "tool_calls", "text",
                         "messages", "toolCalls", "function", "response", "result", "message"]), inner, max_size=5),
    max_leaves=12,
)
attr_values = (
    json_values
    | json_values.map(lambda v: json.dumps(v))
    | st.text(max_size=12)
    | st.sampled_from(["[", "{\"role\":", "[{\"role\": \"user\", \"parts\": 3}]", "null", "[]"])
)
soups = st.dictionaries(st.sampled_from(KEYS), attr_values, max_size=8)
ids = st.integers(min_value=1, max_value=6)


@st.composite
def traces(draw: Any) -> AssembledTrace:
    spans = []
    for _ in range(draw(st.integers(min_value=0, max_value=7))):
        parent = draw(st.none() | ids | st.just(99))
        spans.append(TraceSpan(
            trace_id=TRACE, span_id=sid(draw(ids)), parent_span_id=None if parent is None else sid(parent),
            name=draw(st.sampled_from(["chat x", "invoke_agent a", "ai.generateText", "turn", ""])),
            start_ns=draw(st.integers(min_value=0, max_value=50)), end_ns=draw(st.integers(min_value=0, max_value=60)),
            attributes=draw(soups),
            scope_name=draw(st.sampled_from(["pydantic-ai", "opentelemetry.instrumentation.openai.v1", "x"])),
        ))
    logs = [TraceLog(trace_id=TRACE, span_id=sid(draw(ids)), event_name=draw(st.sampled_from(
        ["gen_ai.choice", "gen_ai.user.message", "gen_ai.client.inference.operation.details"])),
        body=draw(json_values), attributes=draw(soups)) for _ in range(draw(st.integers(0, 3)))]
    return AssembledTrace(trace_id=TRACE, spans=tuple(spans), logs=tuple(logs))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_random_traces_never_raise(trace: AssembledTrace) -> None:
    result = extract_runs(trace)
    assert {s.reason for s in result.skipped} <= SKIP_REASONS
    for run in result.runs:
        assert run.trace_id == TRACE
        json.dumps(run.request_context)
        run.input.model_dump_json()
        run.output.model_dump_json()


def test_cycle_is_broken_and_counted() -> None:
    a = span(1, "chat a", 2, {"gen_ai.operation.name": "chat"})
    b = span(2, "chat b", 1, {"gen_ai.operation.name": "chat"})
    result = extract(request(("x", [a, b])))
    assert "parent_cycle" in {s.reason for s in result.skipped}
    assert len(result.runs) >= 1


def test_self_parent_and_dangling_parent() -> None:
    own = span(1, "chat", 1, {"gen_ai.operation.name": "chat"})
    dangling = span(2, "chat", 77, {"gen_ai.operation.name": "chat"})
    result = extract(request(("x", [own, dangling])))
    assert [s.reason for s in result.skipped] == ["parent_cycle"]
    assert {r.span_id for r in result.runs} == {sid(1), sid(2)}


def test_duplicate_span_ids_keep_the_first() -> None:
    first = span(1, "chat", None, {"gen_ai.operation.name": "chat",
                                   "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"A"}]}]'})
    second = span(1, "chat", None, {"gen_ai.operation.name": "chat"})
    result = extract(request(("x", [first, second])))
    assert [s.reason for s in result.skipped] == ["duplicate_span_id"]
    assert [m.content for m in result.runs[0].input.input_messages] == ["A"]


def test_invalid_json_and_mistyped_attributes_degrade() -> None:
    s = span(1, "chat", None, {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[{oops",
                               "gen_ai.output.messages": 42, "gen_ai.usage.input_tokens": "many",
                               "gen_ai.system_instructions": 3.5})
    result = extract(request(("x", [s])))
    assert {(x.span_id, x.reason) for x in result.skipped} == {(sid(1), "invalid_json"), (sid(1), "bad_attribute")}
    assert len(result.runs) == 1 and "usage" not in result.runs[0].request_context


def test_spans_sharing_a_message_text_read_it_alike_and_each_reports_it_invalid() -> None:
    messages = '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]'
    agent = span(1, "invoke_agent bot", None, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot",
                                               "gen_ai.input.messages": messages, "gen_ai.output.messages": "[{oops"})
    call = span(2, "chat", 1, {"gen_ai.operation.name": "chat", "gen_ai.input.messages": messages,
                               "gen_ai.output.messages": "[{oops"})
    result = extract(request(("x", [agent, call])))
    assert {(x.span_id, x.reason) for x in result.skipped} == {(sid(1), "invalid_json"), (sid(2), "invalid_json")}
    assert [m.content for m in result.runs[0].input.input_messages] == ["Hi"]


def test_unknown_spans_are_not_runs() -> None:
    assert extract(request(("x", [span(1, "GET /", None, {"http.method": "GET"})]))).runs == []
