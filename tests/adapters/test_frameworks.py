"""Framework instrumentations: pydantic-ai (v5, v6, system prompt), Vercel AI SDK, Mastra, Traceloop decorators."""

from __future__ import annotations

import json
from typing import Any

from adapters_support import FIXTURES, brief, extract, gen_msgs, request, sid, span

SYSTEM = "You are a terse assistant."
OUTPUT = [
    ["assistant", "", [["call_1", "get_weather", {"city": "Paris"}]]],
    ["tool", "call_1", "sunny"],
    ["assistant", "It is sunny.", []],
]


def pyd_call(role_of_result: str) -> list[tuple[str, Any]]:
    call = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
    result = {"type": "tool_call_response", "id": "call_1", "name": "get_weather", "result": "sunny"}
    return [("user", "Weather?"), ("assistant", [call]), (role_of_result, [result])]


def pydantic_trace(role_of_result: str, system_prompt: bool = False) -> Any:
    convo = pyd_call(role_of_result)
    head = [("system", SYSTEM)] if system_prompt else []
    agent_attrs = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "terse_agent", "agent_name": "terse_agent",
        "pydantic_ai.all_messages": gen_msgs(*head, *convo, ("assistant", "It is sunny.")),
        "gen_ai.aggregated_usage.input_tokens": 40, "gen_ai.aggregated_usage.output_tokens": 12,
        "final_result": "It is sunny.",
    }
    chat_attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
    if not system_prompt:
        instructions = json.dumps([{"type": "text", "content": SYSTEM}])
        agent_attrs["gen_ai.system_instructions"] = instructions
        chat_attrs["gen_ai.system_instructions"] = instructions
    spans = [
        span(1, "invoke_agent terse_agent", None, agent_attrs),
        span(2, "chat gpt-4o-mini", 1, {**chat_attrs, "gen_ai.input.messages": gen_msgs(*head, convo[0]),
                                         "gen_ai.output.messages": gen_msgs(convo[1])}, kind=3),
        span(3, "execute_tool get_weather", 1, {"gen_ai.operation.name": "execute_tool",
                                                "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "call_1"}),
        span(4, "chat gpt-4o-mini", 1, {**chat_attrs, "gen_ai.input.messages": gen_msgs(*head, *convo),
                                         "gen_ai.output.messages": gen_msgs(("assistant", "It is sunny."))}, kind=3),
    ]
    return extract(request(("pydantic-ai", spans)))


def test_pydantic_ai_v5_tool_results_in_role_user() -> None:
    runs = pydantic_trace("user").runs
    assert len(runs) == 1 and runs[0].span_id == sid(1) and runs[0].convention == "pydantic-ai"
    assert brief(runs[0]) == {"system": [SYSTEM], "remembered": [], "input": [["user", "Weather?", []]],
                              "output": OUTPUT}
    assert runs[0].request_context["usage"] == {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52}
    assert runs[0].request_context["agent_name"] == "terse_agent"


def test_pydantic_ai_v6_tool_results_in_role_tool() -> None:
    assert brief(pydantic_trace("tool").runs[0])["output"] == OUTPUT


def test_pydantic_ai_system_prompt_as_message() -> None:
    run = pydantic_trace("user", system_prompt=True).runs[0]
    assert brief(run)["system"] == [SYSTEM]
    assert brief(run)["input"] == [["user", "Weather?", []]]


def test_pydantic_ai_history_turn() -> None:
    convo = [("user", "My name is Ada."), ("assistant", "Nice to meet you, Ada."), ("user", "What is my name?")]
    spans = [
        span(1, "invoke_agent a", None, {"gen_ai.operation.name": "invoke_agent",
                                          "pydantic_ai.all_messages": gen_msgs(*convo, ("assistant", "Ada."))}),
        span(2, "chat m", 1, {"gen_ai.operation.name": "chat", "gen_ai.input.messages": gen_msgs(*convo),
                               "gen_ai.output.messages": gen_msgs(("assistant", "Ada."))}),
    ]
    run = extract(request(("pydantic-ai", spans))).runs[0]
    assert [m[1] for m in brief(run)["remembered"]] == ["My name is Ada.", "Nice to meet you, Ada."]
    assert brief(run)["output"] == [["assistant", "Ada.", []]]


def vercel_spans() -> list[Any]:
    step1 = [{"role": "system", "content": SYSTEM},
             {"role": "user", "content": [{"type": "text", "text": "Weather?"}]}]
    call = {"type": "tool-call", "toolCallId": "call_1", "toolName": "get_weather", "input": {"city": "Paris"}}
    result = {"type": "tool-result", "toolCallId": "call_1", "toolName": "get_weather",
              "output": {"type": "text", "value": "sunny"}}
    step2 = [*step1, {"role": "assistant", "content": [call]}, {"role": "tool", "content": [result]}]
    return [
        span(1, "ai.generateText", None, {
            "ai.operationId": "ai.generateText", "ai.model.id": "gpt-4o-mini", "ai.model.provider": "openai.chat",
            "ai.telemetry.functionId": "weather-bot", "ai.telemetry.metadata.userId": "u-7",
            "ai.prompt": json.dumps({"system": SYSTEM, "prompt": "Weather?"}),
            "ai.response.text": "It is sunny.", "ai.usage.promptTokens": 30, "ai.usage.completionTokens": 9}),
        span(2, "ai.generateText.doGenerate", 1, {
            "ai.operationId": "ai.generateText.doGenerate", "ai.prompt.messages": json.dumps(step1),
            "ai.response.toolCalls": json.dumps([{"toolCallType": "function", "toolCallId": "call_1",
                                                  "toolName": "get_weather", "args": '{"city":"Paris"}'}]),
            "gen_ai.system": "openai.chat", "gen_ai.request.model": "gpt-4o-mini"}),
        span(3, "ai.toolCall", 1, {"ai.operationId": "ai.toolCall", "ai.toolCall.name": "get_weather",
                                   "ai.toolCall.id": "call_1", "ai.toolCall.args": '{"city":"Paris"}',
                                   "ai.toolCall.result": '"sunny"'}),
        span(4, "ai.generateText.doGenerate", 1, {
            "ai.operationId": "ai.generateText.doGenerate", "ai.prompt.messages": json.dumps(step2),
            "ai.response.text": "It is sunny."}),
    ]


def test_vercel_generate_text_with_tool_loop() -> None:
    runs = extract(request(("ai", vercel_spans()))).runs
    assert len(runs) == 1 and runs[0].span_id == sid(1) and runs[0].convention == "vercel-ai"
    assert brief(runs[0]) == {"system": [SYSTEM], "remembered": [], "input": [["user", "Weather?", []]],
                              "output": OUTPUT}
    ctx = runs[0].request_context
    assert (ctx["agent_name"], ctx["user_id"], ctx["model"]) == ("weather-bot", "u-7", "gpt-4o-mini")
    assert ctx["usage"] == {"input_tokens": 30, "output_tokens": 9, "total_tokens": 39}


def test_vercel_outer_span_alone() -> None:
    run = extract(request(("ai", vercel_spans()[:1]))).runs[0]
    assert brief(run) == {"system": [SYSTEM], "remembered": [], "input": [["user", "Weather?", []]],
                          "output": [["assistant", "It is sunny.", []]]}


def mastra_spans() -> list[Any]:
    step0_in = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Weather?"}]
    call = {"type": "tool-call", "toolCallId": "call_1", "toolName": "get_weather", "args": {"city": "Paris"}}
    return [
        span(1, "invoke_agent assistant", None, {
            "gen_ai.operation.name": "invoke_agent", "mastra.span.type": "agent_run",
            "mastra.agent_run.input": "Weather?", "mastra.agent_run.output": json.dumps({"text": "It is sunny."}),
            "gen_ai.agent.name": "assistant", "gen_ai.system_instructions": SYSTEM}),
        span(2, "model_generation m", 1, {
            "mastra.span.type": "model_generation",
            "mastra.model_generation.input": json.dumps({"messages": step0_in}),
            "mastra.model_generation.output": json.dumps({"text": "It is sunny."})}),
        span(3, "agent_step assistant", 2, {
            "mastra.span.type": "model_step", "mastra.model_step.input": json.dumps(step0_in),
            "mastra.model_step.output": json.dumps({"text": "", "toolCalls": [call]})}),
        span(4, "chat m", 3, {"gen_ai.operation.name": "chat", "mastra.span.type": "model_inference",
                              "gen_ai.output.messages": gen_msgs(("assistant", [{"type": "tool_call", "id": "call_1",
                                                                                 "name": "get_weather"}]))}),
        span(5, "execute_tool get_weather", 1, {
            "gen_ai.operation.name": "execute_tool", "mastra.span.type": "tool_call",
            "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": '{"city":"Paris"}', "gen_ai.tool.call.result": "sunny"}),
        span(6, "agent_step assistant", 2, {
            "mastra.span.type": "model_step",
            "mastra.model_step.input": json.dumps([*step0_in, {"role": "assistant", "content": [call]},
                                                   {"role": "tool", "content": [{"type": "tool-result",
                                                    "toolCallId": "call_1", "toolName": "get_weather",
                                                    "result": "sunny"}]}]),
            "mastra.model_step.output": json.dumps({"text": "It is sunny.", "toolCalls": []})}),
    ]


def test_mastra_agent_run_with_steps_and_tool() -> None:
    runs = extract(request(("@mastra/otel-exporter", mastra_spans()))).runs
    assert len(runs) == 1 and runs[0].span_id == sid(1) and runs[0].convention == "mastra"
    assert brief(runs[0]) == {"system": [SYSTEM], "remembered": [], "input": [["user", "Weather?", []]],
                              "output": OUTPUT}


def test_mastra_without_step_replay_uses_tool_span_and_agent_output() -> None:
    spans = mastra_spans()[:5]  # no second step: result from the tool span, answer from the agent span
    assert brief(extract(request(("@mastra/otel-exporter", spans))).runs[0])["output"] == OUTPUT


def test_mastra_fixture_matches_mastra_scorer_view() -> None:
    from adapters_support import runs_from_files

    view = json.loads((FIXTURES / "mastra" / "s1_single_turn.mastra_scorer_view.json").read_text())
    received = view["trace_scoring"]["received"]
    run = runs_from_files(FIXTURES / "mastra" / "s1_single_turn.pb")[0]
    assert run.span_id == received["extra_fields"]["targetSpanId"]
    assert [m.content for m in run.input.input_messages] == [
        m["content"]["content"] for m in received["input"]["inputMessages"]]
    assert [m.content for m in run.input.system_messages] == [
        m["content"] for m in received["input"]["systemMessages"]]
    assert [m.content for m in run.output] == [m["content"]["content"] for m in received["output"]]


def test_traceloop_decorated_agent_with_entity_fallback() -> None:
    entity_input = json.dumps({"args": ["OpenAI", [{"role": "system", "content": SYSTEM},
                                                   {"role": "user", "content": "Weather?"}]], "kwargs": {}})
    s = span(1, "weather_agent.agent", None, {"traceloop.span.kind": "agent", "traceloop.entity.name": "weather_agent",
                                              "traceloop.entity.input": entity_input,
                                              "traceloop.entity.output": json.dumps("It is sunny."),
                                              "traceloop.association.properties.user_id": "u-1"})
    run = extract(request(("traceloop.tracer", [s]))).runs[0]
    assert brief(run) == {"system": [SYSTEM], "remembered": [], "input": [["user", "Weather?", []]],
                          "output": [["assistant", "It is sunny.", []]]}
    assert run.request_context["user_id"] == "u-1"


def test_mastra_step_replay_placeholders_are_restored() -> None:
    spans = mastra_spans()
    step0_in = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Weather?"}]
    placeholder_input = [*step0_in, {"role": "assistant", "content": "[tool: get_weather]"},
                         {"role": "tool", "content": "[tool-result: get_weather]"}]
    spans[5] = span(6, "agent_step assistant", 2, {
        "mastra.span.type": "model_step", "mastra.model_step.input": json.dumps(placeholder_input),
        "mastra.model_step.output": json.dumps({"text": "It is sunny.", "toolCalls": []})})
    assert brief(extract(request(("@mastra/otel-exporter", spans))).runs[0])["output"] == OUTPUT
