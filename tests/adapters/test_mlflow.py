"""MLflow Tracing's native format (`adapters.mlflow`): the real captures' run context, session and
``inspect --explain``, and bad input read as plain text, never an exception.

The captures' messages are held to their ground truth by ``test_captures.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from adapters_support import brief, extract, request, runs_from_files, span
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import SKIP_REASONS, AssembledTrace, TraceSpan, explain_trace, extract_runs
from collector.cli import main

CAPTURES = Path(__file__).resolve().parent / "captures"
SESSION = "weather-chat-7"


def _agent(inputs: Any, outputs: Any, **extra: Any) -> dict[str, Any]:
    return {"mlflow.spanType": '"AGENT"', "mlflow.spanInputs": inputs, "mlflow.spanOutputs": outputs, **extra}


def _chat(inputs: Any, outputs: Any) -> dict[str, Any]:
    return {"mlflow.spanType": '"CHAT_MODEL"', "mlflow.message.format": '"openai"',
            "mlflow.spanInputs": inputs, "mlflow.spanOutputs": outputs}


def _run(*spans: Any) -> Any:
    (run,) = extract(request(("mlflow.tracing.provider", list(spans)))).runs
    return run


def _explained(*spans: Any) -> Any:
    from adapters import assemble, spans_from_resource_spans

    (trace,) = assemble(spans_from_resource_spans(request(("mlflow.tracing.provider", list(spans))).resource_spans))
    return explain_trace(trace)


def test_native_captures_give_one_run_with_its_session_model_usage_and_agent() -> None:
    s1, s2 = (runs_from_files(CAPTURES / "mlflow-native" / f"{s}.pb") for s in ("S1", "S2"))
    (tool_round,), (second_turn,) = s1, s2
    for run in (tool_round, second_turn):
        # session.id set through MLflow's span API is JSON text ('"weather-chat-7"'): its text names the session
        assert (run.convention, run.span_name, run.session_id) == ("mlflow", "weather_agent", SESSION)
        assert run.request_context["agent_name"] == "weather_agent"
        assert run.request_context["model"] == "gpt-4o-mini"
    # mlflow.chat.tokenUsage of the two model calls, summed
    assert tool_round.request_context["usage"] == {"input_tokens": 13, "output_tokens": 14, "total_tokens": 27}
    assert second_turn.request_context["usage"] == {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}
    for scenario in ("S1", "S2"):
        # MLflow's GenAI-semconv export of the same agent is read by the GenAI module, its session decoded as well
        (genai,) = runs_from_files(CAPTURES / "mlflow-genai" / f"{scenario}.pb")
        assert (genai.convention, genai.span_name, genai.session_id) == ("genai", "invoke_agent weather_agent", SESSION)
        # the session as a trace tag (opentelemetry-sdk < 1.43): mlflow.traceTag.session_id on the root span
        (tagged,) = runs_from_files(CAPTURES / "mlflow-native-tags" / f"{scenario}.pb")
        assert (tagged.convention, tagged.span_name, tagged.session_id) == ("mlflow", "weather_agent", SESSION)


def test_without_an_agent_span_the_conversation_is_one_run_on_its_common_ancestor() -> None:
    from dataclasses import replace

    from adapters import assemble, read_trace_file, spans_from_resource_spans

    spans = spans_from_resource_spans(read_trace_file(CAPTURES / "mlflow-native" / "S1.pb").resource_spans)
    plain = [replace(s, attributes={**s.attributes, "mlflow.spanType": '"UNKNOWN"'}) if s.parent_span_id is None
             else s for s in spans]  # a plain @mlflow.trace on the agent function
    (trace,) = assemble(plain)
    (run,) = extract_runs(trace).runs
    (agent,) = runs_from_files(CAPTURES / "mlflow-native" / "S1.pb")
    assert (run.span_name, run.session_id, brief(run)) == ("weather_agent", SESSION, brief(agent))
    assert "lowest common ancestor of 2 model calls" in explain_trace(trace).runs[0].reason


def test_inspect_explain_names_the_rule_that_found_the_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    capture = CAPTURES / "mlflow-native" / "S1.pb"
    assert main(["inspect", "--explain", str(capture), "--format", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (run,) = runs_from_files(capture)
    assert lines[0].endswith(": 1 run(s), 4 span(s)")
    assert lines[1] == f"  run weather_agent ({run.span_id}, mlflow): top-most agent span (mlflow)"
    agent = next(i for i, line in enumerate(lines) if line.startswith("  weather_agent [mlflow agent] run:"))
    assert lines[agent + 1:agent + 3] == [
        "      - MLflow AGENT span (mlflow.spanType)",
        "      - input from the 'question' argument of the agent function (mlflow.spanInputs)"]
    calls = [line for line in lines if line.lstrip().startswith("Completions")]
    assert calls == [f"    Completions [mlflow llm] in_run of run {run.span_id}: model call inside the agent run"] * 2
    assert any(line.startswith("    get_weather [mlflow tool] in_run") for line in lines)
    assert any("mlflow.message.format 'openai', 1 tool definition(s) in mlflow.chat.tools" in line for line in lines)
    assert main(["inspect", "--explain", str(CAPTURES / "mlflow-genai" / "S1.pb"), "--format", "jsonl"]) == 0
    (genai,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["span_name"], r["reason"]) for r in genai["runs"]] == [
        ("invoke_agent weather_agent", "top-most agent span (genai)")]


def test_values_that_are_not_json_are_plain_text() -> None:
    agent = span(1, "weather_agent", None, _agent("What is the weather in Paris?", "Sunny, 21 degrees."))
    tool = span(2, "get_weather", 1, {"mlflow.spanType": "TOOL", "mlflow.spanInputs": "Paris",
                                      "mlflow.spanOutputs": "sunny"})
    run = _run(agent, tool)
    assert brief(run)["input"] == [["user", "What is the weather in Paris?", []]]
    # no model call recorded the tool call: it is recovered from the tool span, its arguments the text recorded
    calls = [m for m in brief(run)["output"] if m[0] == "assistant" and m[2]]
    assert [c[1:] for m in calls for c in m[2]] == [["get_weather", "Paris"]]
    assert brief(run)["output"][1:] == [["tool", calls[0][2][0][0], "sunny"], ["assistant", "Sunny, 21 degrees.", []]]
    notes = {s.name: s.notes for s in _explained(agent, tool).spans}
    assert "mlflow.spanInputs is not JSON: read as plain text" in notes["weather_agent"]


def test_json_of_an_unexpected_shape_is_plain_text() -> None:
    run = _run(span(1, "lookup", None, _agent('{"city": "Paris", "units": "C"}', '{"rows": 3}')))
    assert brief(run)["input"] == [["user", '{"city": "Paris", "units": "C"}', []]]
    assert brief(run)["output"] == [["assistant", '{"rows": 3}', []]]
    # a model call whose request and answer fit no message shape: their text, so the run is still read
    chat = span(1, "Completions", None, _chat("[1, 2]", '{"choices": "none"}'))
    assert {k: brief(_run(chat))[k] for k in ("input", "output")} == {
        "input": [["user", "[1, 2]", []]], "output": [["assistant", '{"choices": "none"}', []]]}
    # a number is its text; JSON null (a function returning None) is no message at all
    assert brief(_run(span(1, "count", None, _agent('"How many?"', "42"))))["output"] == [["assistant", "42", []]]
    assert brief(_run(span(1, "noop", None, _agent('"Hi"', "null"))))["output"] == []


def test_span_types_other_than_agent_model_and_tool_are_not_read_and_explain_says_so() -> None:
    chain = span(1, "pipeline", None, {"mlflow.spanType": '"CHAIN"', "mlflow.spanInputs": '{"q": "Hi"}'})
    retriever = span(2, "search", 1, {"mlflow.spanType": '"RETRIEVER"'})
    odd = span(3, "odd", 1, {"mlflow.spanType": '["AGENT"]'})
    broken = span(4, "broken", 1, {"mlflow.spanType": '"AGENT'})
    ex = _explained(chain, retriever, odd, broken)
    rows = {s.name: s for s in ex.spans}
    assert ex.runs == () and all(s.status == "not_read" for s in ex.spans)
    assert rows["pipeline"].reason == "MLflow CHAIN span: neither an agent, a model call nor a tool"
    assert rows["search"].reason == "MLflow RETRIEVER span: neither an agent, a model call nor a tool"
    # tracescore's own evaluation spans (EVALUATOR in both conventions) are never runs
    evaluator = span(1, "tracescore.evaluation", None, {"mlflow.spanType": "EVALUATOR",
                                                        "openinference.span.kind": "EVALUATOR"})
    assert extract(request(("tracescore", [evaluator]))).runs == []


def test_a_genai_span_under_mlflow_is_read_by_the_genai_module_and_plain_type_values_count() -> None:
    both = span(1, "chat gpt-4o-mini", None, {
        "mlflow.spanType": '"CHAT_MODEL"', "mlflow.spanInputs": '{"messages": [{"role": "user", "content": "Ignored"}]}',
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]'})
    run = _run(both)
    assert (run.convention, brief(run)["input"]) == ("genai", [["user", "Hi", []]])
    plain = span(1, "agent", None, {"mlflow.spanType": "AGENT", "mlflow.spanInputs": {"question": "Hi"},
                                    "mlflow.spanOutputs": {"choices": [{"message": {"content": "Yo"}}]}})
    run = _run(plain)  # structured values (read back from MLflow's server) and a type that is not JSON text
    assert (run.convention, brief(run)["input"], brief(run)["output"]) == (
        "mlflow", [["user", "Hi", []]], [["assistant", "Yo", []]])


def test_responses_and_anthropic_shapes_give_system_input_output_and_tool_calls() -> None:
    responses = span(1, "Responses", None, _chat(
        json.dumps({"model": "gpt-4o-mini", "instructions": "Be terse.", "input": "Weather in Paris?"}),
        json.dumps({"model": "gpt-4o-mini", "output": [
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]})))
    assert brief(_run(responses)) == {"system": ["Be terse."], "remembered": [],
                                      "input": [["user", "Weather in Paris?", []]],
                                      "output": [["assistant", "", [["c1", "get_weather", {"city": "Paris"}]]]]}
    anthropic = span(1, "Messages", None, {**_chat(
        json.dumps({"system": [{"type": "text", "text": "Be terse."}],
                    "messages": [{"role": "user", "content": "Hi"}]}),
        json.dumps({"role": "assistant", "content": [{"type": "text", "text": "Yo"}]})),
        "mlflow.message.format": '"anthropic"', "mlflow.llm.model": '"claude-x"'})
    run = _run(anthropic)
    assert (brief(run)["system"], brief(run)["output"], run.request_context["model"]) == (
        ["Be terse."], [["assistant", "Yo", []]], "claude-x")


def test_session_from_a_trace_tag_and_json_text_only_on_mlflow_spans() -> None:
    agent = span(1, "agent", None, _agent('{"question": "Hi"}', '"Yo"', **{"mlflow.traceTag.session_id": "chat-3"}))
    assert _run(agent).session_id == "chat-3"
    # a JSON-looking session.id on a span MLflow did not make is kept as it is
    root = span(1, "POST /chat", None, {"session.id": '"quoted"'})
    child = span(2, "chat", 1, {"gen_ai.operation.name": "chat",
                                "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]'})
    assert extract(request(("x", [root, child]))).runs[0].session_id == '"quoted"'


KEYS = ["mlflow.spanType", "mlflow.spanInputs", "mlflow.spanOutputs", "mlflow.chat.tools", "mlflow.message.format",
        "mlflow.spanFunctionName", "mlflow.chat.tokenUsage", "mlflow.llm.model", "session.id",
        "mlflow.traceTag.session_id", "gen_ai.operation.name"]
TYPES = ['"AGENT"', '"CHAT_MODEL"', '"LLM"', '"TOOL"', "AGENT", '"CHAIN"', "TOOL"]
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6) | st.sampled_from(["user", "assistant", "tool"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["role", "content", "messages", "choices", "message", "output", "input", "system", "instructions",
         "tool_calls", "question", "model", "input_tokens"]), inner, max_size=4),
    max_leaves=10)
attr = values.map(json.dumps) | st.text(max_size=10) | st.sampled_from(TYPES) | st.sampled_from(["[", '{"a":', '"x'])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(KEYS), attr, max_size=6), min_size=1, max_size=4))
def test_any_mlflow_attribute_soup_is_read_without_an_exception(soups: list[dict[str, Any]]) -> None:
    spans = tuple(TraceSpan("ab" * 16, f"{i + 1:016x}", f"{i:016x}" if i else None, f"s{i}", start_ns=i,
                            attributes={"mlflow.spanType": '"AGENT"', **soup} if i == 0 else soup)
                  for i, soup in enumerate(soups))
    result = extract_runs(AssembledTrace("ab" * 16, spans))
    assert all(skip.reason in SKIP_REASONS and skip.reason not in ("adapter_error", "run_error")
               for skip in result.skipped)
    for run in result.runs:  # every run makes valid scorer messages, the same by either path
        assert run.json_form() == (run.input.model_dump(mode="json"), run.output.model_dump(mode="json"))
