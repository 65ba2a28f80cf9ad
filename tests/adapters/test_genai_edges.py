"""GenAI-convention edge cases of issue 38: OpenLIT's ``@openlit.trace`` spans and its replays without the
tool-call message, Semantic Kernel's tool spans without log records, and the Agent Framework's Responses API
calls chained by ``previous_response_id``. The captures' exact messages are checked against their ground truth
in test_captures.py; here: which span is the run and why (``inspect --explain``), and the bad inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters_support import brief, extract, gen_msgs, request, runs_from_files, sid, span

from adapters import assemble, explain_trace, read_trace_file, spans_from_resource_spans

CAPTURES = Path(__file__).resolve().parent / "captures"
QUESTION = "What is the weather in Paris?"
ANSWER = "The weather in Paris is sunny and 21 degrees Celsius."
CALL_ID = "call_68e4854238118622674403a6"
CALL = {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}
RESULT = {"type": "tool_call_response", "id": "c1", "response": "sunny"}


def _explained(variant: str, scenario: str = "S3") -> Any:
    (trace,) = assemble(spans_from_resource_spans(read_trace_file(CAPTURES / variant / f"{scenario}.pb").resource_spans))
    return explain_trace(trace)


def _chat(n: int, parent: int | None, inp: str, out: str, **extra: Any) -> Any:
    return span(n, "chat gpt-4o-mini", parent, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                                                "gen_ai.input.messages": inp, "gen_ai.output.messages": out, **extra},
                kind=3)


def _traced(n: int, name: str, parent: int | None, output: str, args: str, kwargs: str = "{}") -> Any:
    """A span as OpenLIT's ``@openlit.trace`` writes it."""
    return span(n, name, parent, {"gen_ai.output.messages": output, "function.args": args, "function.kwargs": kwargs},
                kind=3)


def test_openlit_agent_is_one_run_on_its_traced_function_span() -> None:
    ex = _explained("openlit")
    (run,) = ex.runs
    assert run.span_name == "weather_agent" and run.convention == "genai"
    assert run.reason.startswith("no agent span") and "traced function span" in run.reason
    assert "above 2 model call(s)" in run.reason
    assert any("without the tool-call message" in n for n in run.notes)
    rows = {s.name: s for s in ex.spans}
    assert (rows["weather_agent"].status, rows["weather_agent"].kind) == ("run", "chain")
    assert rows["get_weather"].status == "not_read" and "traced function span" in rows["get_weather"].reason
    calls = [s for s in ex.spans if s.kind == "llm"]
    assert len(calls) == 2 and all(s.status == "in_run" and s.run_span_id == run.span_id for s in calls)
    (second,) = runs_from_files(CAPTURES / "openlit" / "S2.pb")
    assert brief(second)["remembered"] == [["user", "My name is Ada.", []], ["assistant", "Nice to meet you, Ada.", []]]
    # openlit.inject_additional_attributes puts session.id on the model-call spans, below the run span only
    assert second.request_context["session_id"] == "ada-1" and second.session_id is None


def test_traced_function_spans_with_unreadable_or_method_arguments() -> None:
    first = _chat(2, 1, gen_msgs(("user", "Weather?")), gen_msgs(("assistant", [CALL])))
    second = _chat(3, 1, gen_msgs(("user", "Weather?"), ("tool", [RESULT])), gen_msgs(("assistant", "Sunny.")))
    # a method: its self is an object repr, its text argument the user's message
    method = _traced(1, "Agent.ask", None, "Sunny.", "(<app.Agent object at 0x7f3a>, 'Weather?')")
    (run,) = extract(request(("openlit", [method, first, second]))).runs
    assert run.span_name == "Agent.ask" and brief(run)["output"] == [
        ["assistant", "", [["c1", "get_weather", {"city": "Paris"}]]], ["tool", "c1", "sunny"],
        ["assistant", "Sunny.", []]]
    # arguments that are no Python literal: the span carries no input, the calls still make one run on it
    broken = _traced(1, "weather_agent", None, "Sunny.", "(((", "{'q': ")
    ex = explain_trace(assemble(spans_from_resource_spans(request(("openlit", [broken, first, second])).resource_spans))[0])
    (run_ex,) = ex.runs
    assert run_ex.span_name == "weather_agent" and "lowest common ancestor of 2 model calls" in run_ex.reason
    # a traced function that is the only span: no model call, no run, no skip
    alone = extract(request(("openlit", [_traced(1, "helper", None, "42", "(1, 2)")])))
    assert alone.runs == [] and alone.skipped == []


def test_a_replay_without_the_tool_call_message_joins_only_the_call_it_answers() -> None:
    first = _chat(2, 1, gen_msgs(("user", "Weather?")), gen_msgs(("assistant", [CALL])))
    other = {**RESULT, "id": "c9"}  # answers a call the first response never made
    second = _chat(3, 1, gen_msgs(("user", "Weather?"), ("tool", [other])), gen_msgs(("assistant", "Sunny.")))
    runs = extract(request(("app", [span(1, "batch"), first, second]))).runs
    assert [r.span_id for r in runs] == [sid(2), sid(3)]


def test_semantic_kernel_tool_call_arguments_come_from_the_execute_tool_span() -> None:
    (run,) = runs_from_files(CAPTURES / "semantic-kernel" / "S3.pb")
    got = brief(run)
    assert got["input"] == [["user", QUESTION, []]]
    assert got["output"] == [["assistant", "", [[CALL_ID, "WeatherPlugin-get_weather", {"city": "Paris"}]]],
                             ["tool", CALL_ID, "sunny and 21 degrees Celsius"], ["assistant", ANSWER, []]]
    ex = _explained("semantic-kernel")
    assert ex.runs[0].reason == "top-most agent span (genai)"
    assert any("recovered from tool spans" in n for n in ex.runs[0].notes)
    # arguments that are not JSON are kept as the text they are
    agent = span(1, "invoke_agent bot", None, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot",
                                               "gen_ai.input.messages": gen_msgs(("user", "Weather?")),
                                               "gen_ai.output.messages": gen_msgs(("assistant", "Sunny."))})
    tool = span(2, "execute_tool get_weather", 1, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                                                   "gen_ai.tool.call.arguments": "{Paris",
                                                   "gen_ai.tool.call.result": "sunny"})
    (plain,) = extract(request(("sk", [agent, tool]))).runs
    assert plain.output[0].tool_calls[0].arguments == "{Paris" and plain.output[-1].content == "Sunny."


def test_agent_framework_responses_calls_chained_by_response_id_give_the_tool_call_once() -> None:
    ex = _explained("agent-framework-responses")
    assert ex.runs[0].reason == "top-most agent span (genai)"
    assert any("go on from the previous call's response on the server" in n for n in ex.runs[0].notes)
    (run,) = runs_from_files(CAPTURES / "agent-framework-responses" / "S3.pb")
    assert [m.role for m in run.output] == ["assistant", "tool", "assistant"]
    # the session key is the service session id: the previous turn's response id (README, session table)
    (turn2,) = runs_from_files(CAPTURES / "agent-framework-responses" / "S2.pb")
    assert run.session_id is None and (turn2.session_id or "").startswith("resp_")
    assert brief(turn2)["input"] == [["user", "What is my name?", []]] and brief(turn2)["remembered"] == []
    # without an agent span: the chained calls are one conversation on their common ancestor
    first = _chat(2, 1, gen_msgs(("user", "Weather?")), gen_msgs(("assistant", [CALL])), **{"gen_ai.response.id": "resp_a"})
    second = _chat(3, 1, gen_msgs(("tool", [RESULT])), gen_msgs(("assistant", "Sunny.")),
                   **{"gen_ai.conversation.id": "resp_a", "gen_ai.response.id": "resp_b"})
    elsewhere = _chat(4, 1, gen_msgs(("tool", [RESULT])), gen_msgs(("assistant", "Rainy.")),
                      **{"gen_ai.conversation.id": "resp_x"})
    runs = extract(request(("app", [span(1, "turn"), first, second, elsewhere]))).runs
    assert [r.span_id for r in runs] == [sid(1), sid(4)]
    assert brief(runs[0])["input"] == [["user", "Weather?", []]] and brief(runs[0])["output"] == [
        ["assistant", "", [["c1", "get_weather", {"city": "Paris"}]]], ["tool", "c1", "sunny"],
        ["assistant", "Sunny.", []]]
    assert json.loads(json.dumps(runs[0].json_form()))[1][-1]["content"] == "Sunny."
