"""Agent runs across conventions (issue 14): one agent run is one run, the user's message from the
agent call's arguments, tool calls from tool spans, framework roles and prefixes."""

from __future__ import annotations

import json
from typing import Any

from adapters_support import brief, extract, request, sid, span

SMOL = "openinference.instrumentation.smolagents"


OUT = "llm.output_messages.0.message."
TOOL_CALL = OUT + "tool_calls.0.tool_call."


def oi_llm(n: int, parent: int | None, msgs: list[tuple[str, str]], answer: str | None = None,
           **output: Any) -> Any:
    """An OpenInference LLM span: request messages, and a text answer or the given output attributes."""
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", OUT + "role": "assistant", **output}
    for i, (role, content) in enumerate(msgs):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.content"] = content
    if answer is not None:
        attrs[OUT + "content"] = answer
    return span(n, "llm", parent, attrs)


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """The output attributes of a model answer that calls one tool."""
    return {TOOL_CALL + "id": call_id, TOOL_CALL + "function.name": name, TOOL_CALL + "function.arguments": arguments}


def oi_agent(n: int, parent: int | None, input_value: str, output: str = "", **extra: Any) -> Any:
    return span(n, "agent.run", parent, {"openinference.span.kind": "AGENT", "input.value": input_value,
                                         "output.value": output, **extra})


def test_unrelated_model_calls_inside_a_nameless_agent_are_one_run() -> None:
    spans = [
        oi_agent(1, None, json.dumps({"task": "Plan a trip."}), "Done."),
        span(2, "Step 1", 1, {"openinference.span.kind": "CHAIN"}),
        oi_llm(3, 2, [("user", "Plan a trip.")], "Where to?"),
        span(4, "Step 2", 1, {"openinference.span.kind": "CHAIN"}),
        oi_llm(5, 4, [("user", "Summarise: Paris")], "Paris."),  # continues nothing
    ]
    runs = extract(request(("oi", spans))).runs
    assert [r.span_id for r in runs] == [sid(1)]
    assert brief(runs[0])["input"] == [["user", "Plan a trip.", []]]


def test_unrelated_model_calls_under_a_plain_span_stay_separate_runs() -> None:
    spans = [
        span(1, "GET /chat", None, {"http.route": "/chat"}),
        oi_llm(2, 1, [("user", "Hi")], "Hello"),
        oi_llm(3, 1, [("user", "Translate: chat")], "cat"),
    ]
    assert len(extract(request(("oi", spans))).runs) == 2


def test_agent_input_arguments_of_several_frameworks() -> None:
    cases = {
        json.dumps({"task": "A?", "stream": False, "reset": True}): [["user", "A?", []]],  # smolagents
        json.dumps({"message": "B?", "sender": "user_proxy", "recipient": "assistant"}): [["user", "B?", []]],  # AG2
        json.dumps({"input": "C?", "chat_history": []}): [["user", "C?", []]],  # LangChain AgentExecutor
        json.dumps({"args": [], "kwargs": {"query": "D?"}}): [["user", "D?", []]],  # a bound Python call
        json.dumps({"cancellation_token": "<token>", "stream": False}): [],  # nothing holds it: never the raw JSON
        "E?": [["user", "E?", []]],  # plain text (Agno, BeeAI)
    }
    for value, expected in cases.items():
        run = extract(request(("oi", [oi_agent(1, None, value, "ok")]))).runs[0]
        assert brief(run)["input"] == expected, value


def test_tool_calls_recovered_from_tool_spans_in_order_with_stable_ids() -> None:
    spans = [
        oi_agent(1, None, json.dumps({"task": "Weather?"}), "Sunny, 21."),
        span(2, "get_weather", 1, {"openinference.span.kind": "TOOL", "tool.name": "get_weather",
                                   "input.value": json.dumps({"kwargs": {"city": "Paris"}}),
                                   "output.value": "sunny"}),
        span(3, "get_temp", 1, {"openinference.span.kind": "TOOL", "tool.name": "get_temp",
                                "tool_call.id": "call_7", "input.value": '{"city": "Paris"}',
                                "output.value": "21"}),
    ]
    expected = [
        ["assistant", "", [[f"call_{sid(2)}", "get_weather", {"city": "Paris"}]]],
        ["tool", f"call_{sid(2)}", "sunny"],
        ["assistant", "", [["call_7", "get_temp", {"city": "Paris"}]]],
        ["tool", "call_7", 21],
        ["assistant", "Sunny, 21.", []],
    ]
    assert brief(extract(request(("oi", spans))).runs[0])["output"] == expected
    assert brief(extract(request(("oi", spans))).runs[0])["output"] == expected  # same ids on every read


def test_tool_spans_add_nothing_when_model_calls_carry_the_tool_calls() -> None:
    spans = [
        oi_agent(1, None, "Weather?", "Sunny.", **{"agent.name": "bot"}),
        oi_llm(2, 1, [("user", "Weather?")], **tool_call("c1", "get_weather", '{"city": "Paris"}')),
        span(3, "get_weather", 1, {"openinference.span.kind": "TOOL", "tool.name": "get_weather",
                                   "output.value": "sunny"}),
    ]
    out = brief(extract(request(("oi", spans))).runs[0])["output"]
    assert out == [["assistant", "", [["c1", "get_weather", {"city": "Paris"}]]], ["tool", "c1", "sunny"],
                   ["assistant", "Sunny.", []]]


def smol_tool_loop(scope: str) -> Any:
    """smolagents' two model calls of a tool round trip, as its instrumentation records them."""
    replay = ("Calling tools:\n[{'id': 'c1', 'type': 'function', "
              "'function': {'name': 'get_weather', 'arguments': {'city': 'Paris'}}}]")
    first = [("system", "You are an expert assistant."), ("user", "New task:\nWeather?")]
    one = oi_llm(2, 1, first, **tool_call("c1", "get_weather", '{"city": "Paris"}'))
    two = oi_llm(3, 1, [*first, ("tool-call", replay), ("tool-response", "Observation:\nsunny")], "Sunny.")
    return extract(request((scope, [span(1, "turn", None, {}), one, two])))


def test_smolagents_roles_and_prefixes_where_recognised() -> None:
    runs = smol_tool_loop(SMOL).runs
    assert len(runs) == 1 and brief(runs[0]) == {
        "system": ["You are an expert assistant."], "remembered": [], "input": [["user", "Weather?", []]],
        "output": [["assistant", "", [["c1", "get_weather", {"city": "Paris"}]]], ["tool", "c1", "sunny"],
                   ["assistant", "Sunny.", []]],
    }


def test_framework_prefixes_stay_where_the_framework_is_not_recognised() -> None:
    got = brief(smol_tool_loop("some.other.instrumentation").runs[0])
    assert got["input"] == [["user", "New task:\nWeather?", []]]  # not stripped: not known to be smolagents
    assert [m[0] for m in got["output"]] == ["assistant", "tool", "assistant"]  # the roles still map


def test_smolagents_final_answer_call_is_the_answer() -> None:
    spans = [oi_llm(1, None, [("user", "New task:\nCapital?")], **tool_call("c9", "final_answer", '{"answer": "Paris."}'))]
    assert brief(extract(request((SMOL, spans))).runs[0])["output"] == [["assistant", "Paris.", []]]


def test_half_instrumented_framework_spans_never_break_the_run() -> None:
    bad_replays = [("tool-call", "Calling tools:\n[{'id': 'c1', 'function': <object>}]"),  # not a literal
                   ("tool-response", "Call id: \n"), ("tool-call", "Calling tools:\n{'not': 'a list'}")]
    spans = [
        oi_agent(1, None, '{"task": ', "ok"),  # truncated JSON
        oi_llm(2, 1, [("user", "New task:\nHi"), *bad_replays], "Hello"),
        span(3, "tool", 1, {"openinference.span.kind": "TOOL", "input.value": '{"kwargs": 5}'}),  # no tool.name
        span(4, "final", 1, {"openinference.span.kind": "TOOL", "tool.name": "final_answer"}),  # no result
    ]
    for scope in (SMOL, "other"):
        result = extract(request((scope, spans)))
        assert len(result.runs) == 1 and result.runs[0].span_id == sid(1)
        assert not [s for s in result.skipped if s.reason in ("adapter_error", "run_error")]
