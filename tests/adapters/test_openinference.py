"""OpenInference spans: flattened messages, tool loops, GenAI-semconv duplicates,
the OpenAI Agents SDK span shape, streaming."""

from __future__ import annotations

import json
from typing import Any

from adapters_support import brief, extract, gen_msgs, request, sid, span

SYSTEM = "You are a terse assistant."
SCOPE = "openinference.instrumentation.openai"


def oi_msgs(prefix: str, msgs: list[dict[str, Any]]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for i, m in enumerate(msgs):
        base = f"{prefix}.{i}.message"
        attrs[f"{base}.role"] = m["role"]
        if m.get("content") is not None:
            attrs[f"{base}.content"] = m["content"]
        if m.get("tool_call_id"):
            attrs[f"{base}.tool_call_id"] = m["tool_call_id"]
        for j, (cid, name, args) in enumerate(m.get("calls", [])):
            attrs[f"{base}.tool_calls.{j}.tool_call.id"] = cid
            attrs[f"{base}.tool_calls.{j}.tool_call.function.name"] = name
            attrs[f"{base}.tool_calls.{j}.tool_call.function.arguments"] = args
    return attrs


def llm(n: int, parent: int | None, inp: list[dict[str, Any]], out: list[dict[str, Any]], name: str = "ChatCompletion", **extra: Any):
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.system": "openai",
             "llm.token_count.prompt": 7, "llm.token_count.completion": 3,
             **oi_msgs("llm.input_messages", inp), **oi_msgs("llm.output_messages", out), **extra}
    return span(n, name, parent, attrs)


USER = {"role": "user", "content": "Weather in Paris?"}
SYS = {"role": "system", "content": SYSTEM}
TOOLCALL = {"role": "assistant", "calls": [("call_1", "get_weather", '{"city": "Paris"}')]}
TOOLRES = {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
FINAL = {"role": "assistant", "content": "It is sunny."}
EXPECTED_OUTPUT = [
    ["assistant", "", [["call_1", "get_weather", {"city": "Paris"}]]],
    ["tool", "call_1", "sunny"],
    ["assistant", "It is sunny.", []],
]


def test_tool_loop_grouped_on_parent() -> None:
    spans = [span(1, "weather_turn"), llm(2, 1, [SYS, USER], [TOOLCALL]),
             llm(3, 1, [SYS, USER, TOOLCALL, TOOLRES], [FINAL])]
    runs = extract(request((SCOPE, spans))).runs
    assert len(runs) == 1 and runs[0].span_id == sid(1)
    assert brief(runs[0]) == {"system": [SYSTEM], "remembered": [], "input": [["user", "Weather in Paris?", []]],
                              "output": EXPECTED_OUTPUT}
    assert runs[0].request_context["usage"] == {"input_tokens": 14, "output_tokens": 6}
    assert runs[0].convention == "openinference"


def test_genai_semconv_copy_on_the_same_span_is_not_counted_twice() -> None:
    both = llm(1, None, [SYS, USER], [{"role": "assistant", "content": "Sunny."}], **{
        "gen_ai.input.messages": gen_msgs(("system", SYSTEM), ("user", "Weather in Paris?")),
        "gen_ai.output.messages": gen_msgs(("assistant", "Sunny.")),
        "gen_ai.usage.input_tokens": 7,
    })
    result = extract(request((SCOPE, [both])))
    assert len(result.runs) == 1
    assert brief(result.runs[0]) == {"system": [SYSTEM], "remembered": [],
                                     "input": [["user", "Weather in Paris?", []]],
                                     "output": [["assistant", "Sunny.", []]]}


def test_nested_llm_span_repeating_its_parent_is_dropped() -> None:
    outer = llm(1, None, [USER], [FINAL], name="ChatOpenAI")
    inner = llm(2, 1, [USER], [FINAL])
    result = extract(request((SCOPE, [outer, inner])))
    assert [r.span_id for r in result.runs] == [sid(1)]
    assert [(s.span_id, s.reason) for s in result.skipped] == [(sid(2), "duplicate_llm_call")]


def test_agents_sdk_two_agent_spans_and_turns() -> None:
    scope = "openinference.instrumentation.openai_agents"
    spans = [
        span(1, "Agent workflow", None, {"openinference.span.kind": "AGENT"}),
        span(2, "Agent workflow", 1, {"openinference.span.kind": "CHAIN"}),
        span(3, "terse_agent", 2, {"openinference.span.kind": "AGENT", "agent.name": "terse_agent",
                                   "graph.node.id": "terse_agent"}),
        span(4, "turn", 3, {"openinference.span.kind": "CHAIN"}),
        llm(5, 4, [SYS, USER], [TOOLCALL], name="response"),
        span(6, "get_weather", 4, {"openinference.span.kind": "TOOL", "tool.name": "get_weather",
                                   "input.value": '{"city": "Paris"}', "output.value": "sunny"}),
        span(7, "turn", 3, {"openinference.span.kind": "CHAIN"}),
        llm(8, 7, [SYS, USER, TOOLCALL, TOOLRES], [FINAL], name="response"),
    ]
    runs = extract(request((scope, spans))).runs
    assert [r.span_id for r in runs] == [sid(3)]
    assert runs[0].request_context["agent_name"] == "terse_agent"
    assert brief(runs[0])["output"] == EXPECTED_OUTPUT
    assert brief(runs[0])["system"] == [SYSTEM]


def test_agent_span_without_agent_name_is_the_run_when_alone() -> None:
    spans = [span(1, "Agent workflow", None, {"openinference.span.kind": "AGENT"}),
             llm(2, 1, [SYS, USER], [FINAL], name="response")]
    runs = extract(request(("x", spans))).runs
    assert [r.span_id for r in runs] == [sid(1)]


def test_tool_result_from_tool_span_when_not_replayed() -> None:
    spans = [
        span(1, "agent", None, {"openinference.span.kind": "AGENT", "agent.name": "a"}),
        llm(2, 1, [USER], [TOOLCALL]),
        span(3, "get_weather", 1, {"openinference.span.kind": "TOOL", "tool.name": "get_weather",
                                   "output.value": "sunny"}),
    ]
    assert brief(extract(request(("x", spans))).runs[0])["output"] == EXPECTED_OUTPUT[:2]


def test_streaming_output_from_output_value() -> None:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "One, two."}}]}
    s = llm(1, None, [SYS, {"role": "user", "content": "Count."}], [], **{
        "output.value": json.dumps(body), "output.mime_type": "application/json"})
    assert brief(extract(request((SCOPE, [s]))).runs[0])["output"] == [["assistant", "One, two.", []]]


def test_contents_list_is_read_when_content_is_absent() -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "Describe",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": "https://x/cat.png",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "A cat.",
    }
    run = extract(request(("x", [span(1, "LLM", None, attrs)]))).runs[0]
    assert run.input.input_messages[0].content == "Describe"
    assert [p.type for p in run.input.input_messages[0].parts] == ["text", "image"]


def test_agent_with_only_input_and_output_values() -> None:
    s = span(1, "crew", None, {"openinference.span.kind": "AGENT", "agent.name": "crew",
                               "input.value": "Plan a trip", "output.value": "Go to Rome.",
                               "session.id": "s-1", "user.id": "u-1"})
    run = extract(request(("x", [s]))).runs[0]
    assert brief(run)["input"] == [["user", "Plan a trip", []]]
    assert brief(run)["output"] == [["assistant", "Go to Rome.", []]]
    assert (run.request_context["session_id"], run.request_context["user_id"]) == ("s-1", "u-1")


def test_langgraph_chain_spans_with_state_messages_and_agent_nodes() -> None:
    state = oi_msgs("llm.input_messages", [USER])
    spans = [
        span(1, "LangGraph", None, {"openinference.span.kind": "CHAIN", **state}),
        span(2, "agent", 1, {"openinference.span.kind": "AGENT", **state}),
        span(3, "call_model", 2, {"openinference.span.kind": "CHAIN", **state}),
        llm(4, 3, [SYS, USER], [TOOLCALL], name="ChatOpenAI"),
        span(5, "tools", 1, {"openinference.span.kind": "CHAIN"}),
        span(6, "get_weather", 5, {"openinference.span.kind": "TOOL", "tool.name": "get_weather",
                                   "output.value": "sunny"}),
        span(7, "agent", 1, {"openinference.span.kind": "AGENT", **state}),
        llm(8, 7, [SYS, USER, TOOLCALL, TOOLRES], [FINAL], name="ChatOpenAI"),
    ]
    runs = extract(request(("openinference.instrumentation.langchain", spans))).runs
    assert [r.span_id for r in runs] == [sid(1)]
    assert brief(runs[0])["output"] == EXPECTED_OUTPUT


def test_an_output_message_without_a_role_is_the_assistant_s() -> None:
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
             **oi_msgs("llm.input_messages", [SYS, USER]),
             "llm.output_messages.0.message.content": "It is sunny.",
             "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
             "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather"}
    (run,) = extract(request((SCOPE, [span(1, "ChatCompletion", None, attrs)]))).runs
    assert brief(run)["output"] == [["assistant", "It is sunny.", [["call_1", "get_weather", {}]]]]
