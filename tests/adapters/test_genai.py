"""OpenTelemetry GenAI semantic conventions: current JSON messages, legacy indexed
attributes, per-message span events and log records, run detection."""

from __future__ import annotations

import json

from adapters_support import brief, extract, gen_msgs, log_request, request, sid, span

SYSTEM = "You are a terse assistant."
CALL = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}
RESULT = {"type": "tool_call_response", "id": "call_1", "response": "sunny"}


def chat(n: int, parent: int | None, inp: str, out: str, **extra: object):
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.provider.name": "openai",
        "gen_ai.input.messages": inp,
        "gen_ai.output.messages": out,
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.response.id": f"chatcmpl-{n}",
        **extra,
    }
    return span(n, "chat gpt-4o-mini", parent, attrs, kind=3)


def test_history_turn_splits_remembered_and_input() -> None:
    req = request(("opentelemetry.util.genai.handler", [chat(
        1, None,
        gen_msgs(("system", SYSTEM), ("user", "My name is Ada."), ("assistant", "Nice to meet you, Ada."),
                 ("user", "What is my name?")),
        gen_msgs(("assistant", "Your name is Ada.")),
    )]))
    result = extract(req)
    assert [brief(r) for r in result.runs] == [{
        "system": [SYSTEM],
        "remembered": [["user", "My name is Ada.", []], ["assistant", "Nice to meet you, Ada.", []]],
        "input": [["user", "What is my name?", []]],
        "output": [["assistant", "Your name is Ada.", []]],
    }]
    run = result.runs[0]
    assert run.request_context["response_id"] == "chatcmpl-1"
    assert run.request_context["usage"] == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    assert run.request_context["service"] == "svc"
    assert result.skipped == []


def tool_loop_spans(parent: int | None):
    first = chat(2, parent, gen_msgs(("system", SYSTEM), ("user", "Weather in Paris?")),
                 gen_msgs(("assistant", [CALL])))
    second = chat(3, parent,
                  gen_msgs(("system", SYSTEM), ("user", "Weather in Paris?"), ("assistant", [CALL]),
                           ("tool", [RESULT])),
                  gen_msgs(("assistant", "It is sunny.")))
    return first, second


def test_tool_loop_is_one_run_on_the_lowest_common_ancestor() -> None:
    root = span(1, "weather_turn")
    req = request(("app", [root, *tool_loop_spans(1)]))
    runs = extract(req).runs
    assert len(runs) == 1
    assert runs[0].span_id == sid(1) and runs[0].span_name == "weather_turn"
    assert brief(runs[0])["output"] == [
        ["assistant", "", [["call_1", "get_weather", {"city": "Paris"}]]],
        ["tool", "call_1", "sunny"],
        ["assistant", "It is sunny.", []],
    ]
    assert "response_id" not in runs[0].request_context  # the anchor span has none of its own
    assert runs[0].request_context["usage"]["input_tokens"] == 20


def test_unrelated_llm_calls_are_separate_runs() -> None:
    root = span(1, "batch")
    a = chat(2, 1, gen_msgs(("user", "Hi")), gen_msgs(("assistant", "Hello")))
    b = chat(3, 1, gen_msgs(("user", "Translate cat")), gen_msgs(("assistant", "chat")))
    runs = extract(request(("app", [root, a, b]))).runs
    assert [r.span_id for r in runs] == [sid(2), sid(3)]


def test_two_conversations_under_one_parent_do_not_share_an_anchor() -> None:
    root = span(1, "batch")
    first, second = tool_loop_spans(1)
    other_a = chat(4, 1, gen_msgs(("user", "A?")), gen_msgs(("assistant", "B.")))
    other_b = chat(5, 1, gen_msgs(("user", "A?"), ("assistant", "B."), ("user", "C?")),
                   gen_msgs(("assistant", "D.")))
    runs = extract(request(("app", [root, first, second, other_a, other_b]))).runs
    assert len(runs) == 2
    assert len({r.span_id for r in runs}) == 2


def test_invoke_agent_span_is_the_run_and_tool_results_come_from_tool_spans() -> None:
    agent = span(1, "invoke_agent weather", None, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather",
        "gen_ai.conversation.id": "conv-1", "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
    })
    first = chat(2, 1, gen_msgs(("user", "Weather in Paris?")), gen_msgs(("assistant", [CALL])))
    tool = span(3, "execute_tool get_weather", 1, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.result": "sunny"})
    runs = extract(request(("app", [agent, first, tool]))).runs
    assert len(runs) == 1
    run = runs[0]
    assert (run.span_id, run.convention) == (sid(1), "genai")
    assert brief(run)["system"] == [SYSTEM]
    assert brief(run)["output"] == [
        ["assistant", "", [["call_1", "get_weather", {"city": "Paris"}]]],
        ["tool", "call_1", "sunny"],
    ]
    assert run.request_context["agent_name"] == "weather"
    assert run.request_context["conversation_id"] == "conv-1"


def test_agent_span_with_its_own_messages_and_no_children() -> None:
    agent = span(1, "invoke_agent helper", None, {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.input.messages": gen_msgs(("user", "Hi")),
        "gen_ai.output.messages": gen_msgs(("assistant", "Hello")),
    })
    run = extract(request(("app", [agent]))).runs[0]
    assert brief(run)["input"] == [["user", "Hi", []]]
    assert brief(run)["output"] == [["assistant", "Hello", []]]


def test_nested_agents_yield_one_run_on_the_top_most() -> None:
    outer = span(1, "invoke_agent planner", None, {"gen_ai.operation.name": "invoke_agent"})
    inner = span(2, "invoke_agent worker", 1, {"gen_ai.operation.name": "invoke_agent"})
    call = chat(3, 2, gen_msgs(("user", "Do it")), gen_msgs(("assistant", "Done")))
    runs = extract(request(("app", [outer, inner, call]))).runs
    assert [r.span_id for r in runs] == [sid(1)]
    assert brief(runs[0])["output"] == [["assistant", "Done", []]]


def test_legacy_indexed_attributes_tool_loop() -> None:
    def legacy(n: int, prompt: dict[str, object], completion: dict[str, object]):
        attrs = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini"}
        attrs.update({f"gen_ai.prompt.{k}": v for k, v in prompt.items()})
        attrs.update({f"gen_ai.completion.{k}": v for k, v in completion.items()})
        return span(n, "openai.chat", 1, attrs, kind=3)

    base = {"0.role": "system", "0.content": SYSTEM, "1.role": "user", "1.content": "Weather?"}
    first = legacy(2, base, {"0.role": "assistant", "0.finish_reason": "tool_calls",
                              "0.tool_calls.0.id": "call_1", "0.tool_calls.0.name": "get_weather",
                              "0.tool_calls.0.arguments": '{"city": "Paris"}'})
    second = legacy(3, {**base, "2.role": "assistant", "2.tool_calls.0.id": "call_1",
                        "2.tool_calls.0.name": "get_weather", "2.tool_calls.0.arguments": '{"city": "Paris"}',
                        "3.role": "tool", "3.content": "sunny", "3.tool_call_id": "call_1"},
                    {"0.role": "assistant", "0.content": "It is sunny."})
    agent = span(1, "weather_agent.agent", None, {"traceloop.span.kind": "agent",
                                                   "traceloop.entity.name": "weather_agent"})
    runs = extract(request(("traceloop.tracer", [agent]), ("opentelemetry.instrumentation.openai.v1", [first, second]))).runs
    assert len(runs) == 1
    assert runs[0].convention == "traceloop"
    assert brief(runs[0]) == {
        "system": [SYSTEM],
        "remembered": [],
        "input": [["user", "Weather?", []]],
        "output": [
            ["assistant", "", [["call_1", "get_weather", {"city": "Paris"}]]],
            ["tool", "call_1", "sunny"],
            ["assistant", "It is sunny.", []],
        ],
    }


def test_indexed_attributes_sort_numerically() -> None:
    attrs: dict[str, object] = {"gen_ai.system": "openai"}
    for i in range(11):  # m0..m10, user on even indexes: m10 is the new input
        attrs[f"gen_ai.prompt.{i}.role"] = "user" if i % 2 == 0 else "assistant"
        attrs[f"gen_ai.prompt.{i}.content"] = f"m{i}"
    attrs["gen_ai.completion.0.role"] = "assistant"
    attrs["gen_ai.completion.0.content"] = "end"
    run = extract(request(("x", [span(1, "llm", None, attrs)]))).runs[0]
    assert [m[1] for m in brief(run)["remembered"]] == [f"m{i}" for i in range(10)]
    assert brief(run)["input"] == [["user", "m10", []]]


def test_legacy_span_events_carry_messages() -> None:
    events = [
        ("gen_ai.system.message", {"content": SYSTEM}),
        ("gen_ai.user.message", {"content": "Weather?"}),
        ("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                           "message": json.dumps({"role": "assistant", "content": "Sunny."})}),
    ]
    s = span(1, "chat gpt-4o-mini", None, {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"},
             events=events)
    run = extract(request(("x", [s]))).runs[0]
    assert brief(run) == {"system": [SYSTEM], "remembered": [], "input": [["user", "Weather?", []]],
                          "output": [["assistant", "Sunny.", []]]}
    assert run.convention == "genai-legacy"


def test_packed_event_content_attribute() -> None:
    events = [("gen_ai.user.message", {"gen_ai.event.content": json.dumps({"role": "user", "content": "Hi"})}),
              ("gen_ai.choice", {"gen_ai.event.content": json.dumps(
                  {"message": {"content": "Hello"}, "finish_reason": "stop", "index": 0})})]
    s = span(1, "chat", None, {"gen_ai.operation.name": "chat"}, events=events)
    assert brief(extract(request(("x", [s]))).runs[0])["output"] == [["assistant", "Hello", []]]


def test_log_records_carry_per_message_events() -> None:
    s = span(1, "chat gpt-4o-mini", None, {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"})
    logs = log_request(
        (1, "gen_ai.system.message", {"gen_ai.system": "openai"}, {"content": SYSTEM}),
        (1, "gen_ai.user.message", {}, {"content": "Weather?"}),
        (1, "gen_ai.assistant.message", {}, {"tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]}),
        (1, "gen_ai.tool.message", {}, {"id": "call_0", "content": "rainy"}),
        (1, "", {"event.name": "gen_ai.choice"}, {"index": 0, "finish_reason": "stop",
                                                  "message": {"content": "Rainy in Rome."}}),
    )
    run = extract(request(("x", [s])), logs).runs[0]
    assert brief(run)["input"] == []
    assert brief(run)["remembered"] == [
        ["user", "Weather?", []],
        ["assistant", "", [["call_0", "get_weather", {"city": "Rome"}]]],
        ["tool", "call_0", "rainy"],
    ]
    assert brief(run)["output"] == [["assistant", "Rainy in Rome.", []]]


def test_operation_details_log_with_structured_messages() -> None:
    s = span(1, "chat gpt-4o-mini", None, {"gen_ai.operation.name": "chat"})
    structured_in = [{"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
                     {"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]
    structured_out = [{"role": "assistant", "parts": [{"type": "text", "content": "Hello"}], "finish_reason": "stop"}]
    logs = log_request((1, "gen_ai.client.inference.operation.details",
                        {"gen_ai.input.messages": structured_in, "gen_ai.output.messages": structured_out}, None))
    assert brief(extract(request(("x", [s])), logs).runs[0]) == {
        "system": [SYSTEM], "remembered": [], "input": [["user", "Hi", []]], "output": [["assistant", "Hello", []]]}
    # without the logs the same trace gives empty messages, and no failure
    empty = extract(request(("x", [s]))).runs[0]
    assert brief(empty) == {"system": [], "remembered": [], "input": [], "output": []}


def test_no_content_tool_loop_gives_empty_runs_without_skips() -> None:
    root = span(1, "weather_turn")
    a = span(2, "chat gpt-4o-mini", 1, {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 3}, kind=3)
    b = span(3, "chat gpt-4o-mini", 1, {"gen_ai.operation.name": "chat"}, kind=3)
    result = extract(request(("x", [root, a, b])))
    assert result.skipped == []
    assert result.runs and all(not r.input.input_messages and not r.output.root for r in result.runs)


def test_system_instructions_as_plain_text_and_structured_list() -> None:
    plain = chat(1, None, gen_msgs(("user", "Hi")), gen_msgs(("assistant", "Yo")),
                 **{"gen_ai.system_instructions": "Be brief."})
    assert brief(extract(request(("x", [plain]))).runs[0])["system"] == ["Be brief."]


def test_embeddings_are_not_runs() -> None:
    s = span(1, "embeddings text-embedding-3-small", None, {"gen_ai.operation.name": "embeddings"})
    assert extract(request(("x", [s]))).runs == []


def test_tool_results_without_ids_answer_calls_in_order() -> None:
    s = span(1, "openai.chat", None, {"gen_ai.operation.name": "chat"})
    logs = log_request(
        (1, "gen_ai.user.message", {}, {"content": "Weather?"}),
        (1, "gen_ai.assistant.message", {}, {"tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}),
        (1, "gen_ai.tool.message", {}, {"content": "sunny"}),
        (1, "gen_ai.tool.message", {}, {"content": "noon"}),
        (1, "gen_ai.choice", {}, {"index": 0, "message": {"content": None}, "finish_reason": "tool_calls",
                                  "tool_calls": [{"id": "c3", "type": "function",
                                                  "function": {"name": "get_date", "arguments": "{}"}}]}),
    )
    run = extract(request(("x", [s])), logs).runs[0]
    assert [m[1] for m in brief(run)["remembered"] if m[0] == "tool"] == ["c1", "c2"]
    assert brief(run)["output"] == [["assistant", "", [["c3", "get_date", {}]]]]


def test_streaming_chunk_events_are_not_messages() -> None:
    chunks = [("gen_ai.content.completion.chunk", {}), ("llm.content.completion.chunk", {}),
              ("First Token Stream Event", {})]
    current = chat(1, None, gen_msgs(("system", SYSTEM), ("user", "Count from one to five.")),
                   gen_msgs(("assistant", "One, two, three, four, five.")), **{"gen_ai.is_streaming": True})
    current.events.extend(span(9, "x", events=chunks).events)
    legacy = span(2, "openai.chat", None, {
        "llm.request.type": "chat", "llm.is_streaming": True, "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "Count from one to five.", "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "One, two, three, four, five."}, events=chunks, trace_id="cd" * 16)
    for s in (current, legacy):
        run = extract(request(("opentelemetry.instrumentation.openai.v1", [s]))).runs[0]
        assert brief(run)["output"] == [["assistant", "One, two, three, four, five.", []]]
        assert brief(run)["input"] == [["user", "Count from one to five.", []]]


def test_strands_content_blocks_and_loop_cycle_spans() -> None:
    call = json.dumps([{"toolUse": {"toolUseId": "c1", "name": "get_weather", "input": {"city": "Paris"}}}])
    result = json.dumps([{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "sunny"}]}}])
    user = json.dumps([{"text": "Weather?"}])
    spans = [
        span(1, "invoke_agent bot", None, {"gen_ai.operation.name": "invoke_agent"}, events=[
            ("gen_ai.user.message", {"content": user}), ("gen_ai.choice", {"message": "It is sunny.\n"})]),
        span(2, "execute_event_loop_cycle", 1, {"gen_ai.operation.name": "execute_event_loop_cycle"},
             events=[("gen_ai.user.message", {"content": user}), ("gen_ai.choice", {"message": call})]),
        span(3, "chat", 2, {"gen_ai.operation.name": "chat"}, events=[
            ("gen_ai.system.message", {"content": json.dumps([{"text": SYSTEM}])}),
            ("gen_ai.user.message", {"content": user}), ("gen_ai.choice", {"message": call})]),
        span(4, "chat", 2, {"gen_ai.operation.name": "chat"}, events=[
            ("gen_ai.user.message", {"content": user}), ("gen_ai.assistant.message", {"content": call}),
            ("gen_ai.tool.message", {"content": result}),
            ("gen_ai.choice", {"message": json.dumps([{"text": "It is sunny."}])})]),
    ]
    runs = extract(request(("strands.telemetry.tracer", spans))).runs
    assert len(runs) == 1 and runs[0].span_id == sid(1)
    assert brief(runs[0]) == {"system": [SYSTEM], "remembered": [], "input": [["user", "Weather?", []]], "output": [
        ["assistant", "", [["c1", "get_weather", {"city": "Paris"}]]], ["tool", "c1", "sunny"],
        ["assistant", "It is sunny.", []]]}


def test_nameless_agent_wrapper_yields_to_the_named_agent() -> None:
    spans = [
        span(1, "Agent workflow", None, {"gen_ai.operation.name": "invoke_agent"}),
        span(2, "invoke_agent terse_agent", 1, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "terse_agent",
            "gen_ai.input.messages": gen_msgs(("user", "Hi")), "gen_ai.output.messages": gen_msgs(("assistant", "Yo"))}),
        chat(3, 2, gen_msgs(("user", "Hi")), gen_msgs(("assistant", "Yo"))),
    ]
    runs = extract(request(("x", spans))).runs
    assert [(r.span_id, r.request_context["agent_name"]) for r in runs] == [(sid(2), "terse_agent")]


def test_a_legacy_completion_without_a_role_is_the_assistant_s() -> None:
    attrs: dict[str, object] = {"gen_ai.system": "openai", "gen_ai.prompt.0.role": "user",
                                "gen_ai.prompt.0.content": "Weather?",
                                "gen_ai.completion.0.tool_calls.0.id": "c1",
                                "gen_ai.completion.0.tool_calls.0.name": "get_weather",
                                "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}'}
    (run,) = extract(request(("x", [span(1, "llm", None, attrs)]))).runs
    assert brief(run)["output"] == [["assistant", "", [["c1", "get_weather", {"city": "Paris"}]]]]
