"""Langfuse observations (`adapters.langfuse`): the SDK's captures give one run each with its session,
model and usage; ``inspect --explain`` names the rule that found the run; values that are not JSON,
or JSON of no known shape, are read as plain text, and a recorded call with no text argument still
gives a readable user message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from adapters_support import extract, request, runs_from_files, span
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import is_run_candidate
from adapters._trace import TraceSpan
from adapters.langfuse import view_span
from collector.cli import main

CAPTURES = Path(__file__).resolve().parent / "captures"
LANGFUSE = sorted(CAPTURES.glob("langfuse-sdk*/S?.pb"))
TYPE, INPUT, OUTPUT = "langfuse.observation.type", "langfuse.observation.input", "langfuse.observation.output"


def _inspect(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["inspect", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_every_capture_is_one_run_with_its_session_model_and_usage() -> None:
    assert [f"{p.parent.name}/{p.stem}" for p in LANGFUSE] == [
        f"{v}/{s}" for v in ("langfuse-sdk", "langfuse-sdk-plain", "langfuse-sdk-v3") for s in ("S1", "S2")]
    for path in LANGFUSE:
        truth = json.loads(path.with_name(path.stem + ".expected.json").read_text())
        (run,) = runs_from_files(path)
        assert (run.session_id, run.convention) == (truth["session_id"], "langfuse"), path
        context = run.request_context
        assert (context["model"], context["service"]) == ("gpt-4o-mini", "gen-langfuse"), path
        calls = len(truth["llm_calls"])
        assert calls == (2 if path.stem == "S1" else 1) and context["usage"]["output_tokens"] == 7 * calls, path
        assert context.get("agent_name") == (None if "plain" in path.parent.name else "weather_agent"), path


def test_explain_names_the_rule_that_found_the_run(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    lines = _inspect(capsys, "--explain", str(CAPTURES / "langfuse-sdk" / "S1.pb"), "--format", "table")
    assert lines[0].endswith(": 1 run(s), 4 span(s)")
    assert lines[1].startswith("  run weather_agent (") and lines[1].endswith(", langfuse): top-most agent span (langfuse)")
    agent = lines.index(next(line for line in lines if line.startswith("  weather_agent [langfuse agent] run:")))
    assert "langfuse.observation.type=agent" in lines[agent + 1]
    assert "positional argument 0" in lines[agent + 2]
    assert sum("OpenAI-generation [langfuse llm] in_run of run" in line for line in lines) == 2
    assert any("get_weather [langfuse tool] in_run" in line for line in lines)
    plain = _inspect(capsys, "--explain", str(CAPTURES / "langfuse-sdk-plain" / "S1.pb"), "--format", "table")
    assert plain[1].endswith(", langfuse): no agent span in the trace: the top-most Langfuse span observation "
                             "that carries the run's input and output, above 2 model call(s)")
    assert any("get_weather [not read] not_read: Langfuse 'span' observation" in line for line in plain)


def _view(kind: str, inp: Any = None, out: Any = None, name: str = "obs") -> Any:
    attrs: dict[str, Any] = {TYPE: kind}
    if inp is not None:
        attrs[INPUT] = inp
    if out is not None:
        attrs[OUTPUT] = out
    return view_span(TraceSpan("a" * 32, "b" * 16, None, name, attributes=attrs), (), print)


def _msgs(msgs: Any) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in msgs]


BROKEN = '[{"role": "user", "content": "Hi"'


@pytest.mark.parametrize(("inp", "out", "request_", "response"), [
    (BROKEN, "{oops", [("user", BROKEN)], [("assistant", "{oops")]),  # not JSON: plain text
    ('{"prompt_id": 7, "vars": {"city": "Paris"}}', '{"score": 0.5}',  # JSON of no known shape: its text
     [("user", '{"prompt_id": 7, "vars": {"city": "Paris"}}')], [("assistant", '{"score": 0.5}')]),
    ('"What is the weather?"', '"Sunny."', [("user", "What is the weather?")], [("assistant", "Sunny.")]),
    ("42", "[1, 2]", [("user", "42")], [("assistant", "[1, 2]")]),
    ('{"messages": "not a list"}', '{"role": 3}', [("user", '{"messages": "not a list"}')], [("assistant", '{"role": 3}')]),
    ('{"instructions": "Be terse.", "input": "Hi"}', '[{"type": "message", "role": "assistant", "content": '
     '[{"type": "output_text", "text": "Yo"}]}]', [("system", "Be terse."), ("user", "Hi")], [("assistant", "Yo")]),
])
def test_generation_values_that_are_not_messages_are_plain_text(inp: str, out: str, request_: list[Any],
                                                               response: list[Any]) -> None:
    view = _view("generation", inp, out)
    assert (view.kind, _msgs(view.request), _msgs(view.response)) == ("llm", request_, response)
    assert not view.fallback


@pytest.mark.parametrize(("inp", "expected"), [
    ('{"args": [42]}', "42"),
    ('{"args": [{"city": "Paris"}, 3]}', '[{"city": "Paris"}, 3]'),
    ('{"args": [], "kwargs": {"city": "Paris", "days": 2}}', '{"city": "Paris", "days": 2}'),
    ('{"args": [1.5], "kwargs": {"verbose": true}}', '{"args": [1.5], "kwargs": {"verbose": true}}'),
    ('{"args": [null, "What is my name?"], "kwargs": {}}', "What is my name?"),
    ('{"args": [{"question": "Weather in Paris?"}]}', "Weather in Paris?"),
    ('{"args": [[{"role": "user", "content": "Hi"}]]}', "Hi"),
    ('{"args": [], "kwargs": {"query": "Weather?"}}', "Weather?"),
    ("{broken", "{broken"),
    ("[true, false]", "[true, false]"),
])
def test_function_input_without_text_argument_is_a_readable_user_message(inp: str, expected: str) -> None:
    view = _view("agent", inp, "Done.")
    assert _msgs(view.request) == [("user", expected)] and _msgs(view.response) == [("assistant", "Done.")]


def test_agent_without_model_call_is_a_run_from_its_own_input_and_output() -> None:
    spans = [span(1, "weather_agent", None, {TYPE: "agent", INPUT: '{"args": [{"city": "Paris"}]}',
                                             OUTPUT: '{"unexpected": ["shape"]}', "langfuse.session.id": "s-7"}),
             span(2, "get_weather", 1, {TYPE: "tool", INPUT: '{"args": ["Paris"]}', OUTPUT: "sunny"}),
             span(3, "format", 1, {TYPE: "span", INPUT: "{not json", OUTPUT: "ok"})]
    result = extract(request(("langfuse-sdk", spans)))
    (run,) = result.runs
    assert _msgs(run.input.input_messages) == [("user", '{"city": "Paris"}')]
    assert [(m.role, m.content) for m in run.output] == [
        ("assistant", ""), ("tool", "sunny"), ("assistant", '{"unexpected": ["shape"]}')]
    assert [c.arguments for c in run.output[0].tool_calls] == ["Paris"]
    assert (run.session_id, result.skipped) == ("s-7", [])
    assert all(is_run_candidate(s.name, [a.key for a in s.attributes]) for s in spans)


_VALUES = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=12), st.sampled_from([
    "{", "[", '"', "null", "[]", "{}", '{"args": 1}', '{"args": [], "kwargs": []}', '{"messages": [1]}',
    '{"role": "assistant", "tool_calls": "x"}', '{"choices": [1, {"message": 2}]}', '[{"role": null}]',
    '{"input": {"a": 1}}', '{"args": [[1], {"role": "user"}]}']))


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["agent", "generation", "tool", "span", "chain", "event", 3]),
       inp=_VALUES, out=_VALUES, usage=_VALUES)
def test_no_value_makes_the_module_fail(kind: Any, inp: Any, out: Any, usage: Any) -> None:
    attrs = {TYPE: kind, INPUT: inp, OUTPUT: out, "langfuse.observation.usage_details": usage}
    result = extract(request(("langfuse-sdk", [
        span(1, "root", None, {k: v for k, v in attrs.items() if v is not None}),
        span(2, "call", 1, {TYPE: "generation", INPUT: inp} if inp is not None else {TYPE: "generation"})])))
    assert "adapter_error" not in [s.reason for s in result.skipped]
    assert "run_error" not in [s.reason for s in result.skipped]
