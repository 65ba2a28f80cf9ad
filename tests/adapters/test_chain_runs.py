"""The CHAIN-root rule (issue 24): agents whose instrumentors mark them CHAIN (DSPy ReAct, Haystack's Agent)
or leave them untyped (Haystack's own tracer) are one run on their top-most chain span; nested model calls
are never runs of their own. The captures' exact messages are checked against their ground truth in
test_captures.py; here: which span is the run, why (``inspect --explain``), and where the rule does not apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from adapters_support import brief, extract, request, runs_from_files, span

from adapters import assemble, explain_trace, read_trace_file, spans_from_resource_spans
from adapters.haystack import chat_messages

CAPTURES = Path(__file__).resolve().parent / "captures"
QUESTION = "What is the weather in Paris?"
ANSWER = "The weather in Paris is sunny and 21 degrees Celsius."
CALL_ID = "call_68e4854238118622674403a6"


def _explained(variant: str, scenario: str = "S3") -> Any:
    (trace,) = assemble(spans_from_resource_spans(read_trace_file(CAPTURES / variant / f"{scenario}.pb").resource_spans))
    return explain_trace(trace)


def test_dspy_react_is_one_run_with_the_tool_call_from_its_tool_span_and_no_finish() -> None:
    (run,) = runs_from_files(CAPTURES / "dspy-openinference" / "S3.pb")
    got = brief(run)
    assert run.span_name == "ReAct.forward"
    assert got["input"] == [["user", QUESTION, []]]
    (call,) = got["output"][0][2]
    assert got["output"] == [["assistant", "", [call]], ["tool", call[0], "sunny and 21 degrees Celsius"],
                             ["assistant", ANSWER, []]]
    assert call[0].startswith("call_") and call[1:] == ["get_weather", {"city": "Paris"}]
    assert run.request_context["model"] == "gpt-4o-mini"


@pytest.mark.parametrize(("variant", "run_span", "calls"), [
    ("dspy-openinference", "ReAct.forward", 3),
    ("haystack-openinference", "Agent.run", 0),
    ("haystack-native", "haystack.component.run", 2),
])
def test_explain_names_the_chain_rule_and_puts_every_model_call_in_the_run(variant: str, run_span: str,
                                                                          calls: int) -> None:
    ex = _explained(variant)
    (run,) = ex.runs
    assert run.span_name == run_span
    assert run.reason.startswith("no agent span")
    assert ("CHAIN span" if variant.endswith("openinference") else "untyped span") in run.reason
    assert (f"above {calls} model call(s)" in run.reason) if calls else ("no model call in the trace" in run.reason)
    models = [s for s in ex.spans if s.kind == "llm"]
    assert len(models) == calls and all(s.status == "in_run" and s.run_span_id == run.span_id for s in models)
    assert [s.name for s in ex.spans if s.status == "run"] == [run_span]


def test_explain_says_dspy_finish_is_a_control_step_and_where_the_messages_came_from() -> None:
    ex = _explained("dspy-openinference")
    finish = next(s for s in ex.spans if s.name == "finish.__call__")
    assert finish.framework == "dspy" and any("control step" in n for n in finish.notes)
    notes = " | ".join(ex.runs[0].notes)
    assert "(finish) left out" in notes and "do not hold the run's input" in notes
    nested = next(s for s in ex.spans if s.name == "ChainOfThought.forward")
    assert (nested.status, nested.kind) == ("in_run", "chain")


def test_haystack_tool_call_keeps_its_id_in_both_tracers() -> None:
    for variant in ("haystack-openinference", "haystack-native"):
        (run,) = runs_from_files(CAPTURES / variant / "S3.pb")
        assert brief(run)["output"][:2] == [["assistant", "", [[CALL_ID, "get_weather", {"city": "Paris"}]]],
                                            ["tool", CALL_ID, "sunny and 21 degrees Celsius"]], variant


def _chain(n: int, parent: int | None, inp: Any, out: Any, kind: str = "CHAIN") -> Any:
    return span(n, f"chain{n}", parent, {"openinference.span.kind": kind, "input.value": json.dumps(inp),
                                          "input.mime_type": "application/json", "output.value": json.dumps(out),
                                          "output.mime_type": "application/json"})


def _llm(n: int, parent: int, user: str, answer: str) -> Any:
    return span(n, "chat", parent, {"openinference.span.kind": "LLM",
                                     "llm.input_messages.0.message.role": "user",
                                     "llm.input_messages.0.message.content": user,
                                     "llm.output_messages.0.message.role": "assistant",
                                     "llm.output_messages.0.message.content": answer})


def test_an_agent_span_anywhere_in_the_trace_turns_the_rule_off() -> None:
    spans = [_chain(1, None, {"question": "Hi?"}, {"answer": "Hello."}),
             _chain(2, 1, {"input": "Hi?"}, "Hello.", kind="AGENT"), _llm(3, 2, "Hi?", "Hello.")]
    ex = explain_trace(assemble(spans_from_resource_spans(request(("oi", spans)).resource_spans))[0])
    assert [(s.name, s.status) for s in ex.spans] == [("chain1", "not_read"), ("chain2", "run"), ("chat", "in_run")]


def test_model_calls_that_carry_the_conversation_are_read_as_before_under_a_chain_root() -> None:
    spans = [_chain(1, None, {"question": "Hi?"}, {"answer": "Hello."}), _chain(2, 1, {"question": "Hi?"},
                                                                                 {"answer": "Hello."}),
             _llm(3, 2, "Hi?", "Hello.")]
    (run,) = extract(request(("oi", spans))).runs
    assert run.span_name == "chain1"
    assert brief(run) == {"system": [], "remembered": [], "input": [["user", "Hi?", []]],
                          "output": [["assistant", "Hello.", []]]}


def test_a_chain_without_an_answer_is_not_a_run() -> None:
    spans = [_chain(1, None, {"question": "Hi?"}, {"status": "ok"}), _llm(2, 1, "Hi?", "Hello.")]
    (run,) = extract(request(("oi", spans))).runs
    assert run.span_name == "chat"  # the model call, as without the rule


def test_a_chain_with_model_calls_elsewhere_and_none_below_is_not_a_run() -> None:
    spans = [span(1, "root"), _chain(2, 1, {"question": "Hi?"}, {"answer": "Hello."}), _llm(3, 1, "Yo?", "Yo.")]
    assert [r.span_name for r in extract(request(("oi", spans))).runs] == ["chat"]


def test_haystack_chat_generator_component_outside_an_agent_is_a_model_call() -> None:
    messages = [{"role": "system", "content": [{"text": "Be terse."}]}, {"role": "user", "content": [{"text": "Hi?"}]}]
    replies = [{"role": "assistant", "meta": {}, "name": None, "content": [{"text": "Hello."}]}]
    spans = [span(1, "haystack.pipeline.run", None, {"haystack.pipeline.input_data": json.dumps({"llm": {"messages": messages}}),
                                                     "haystack.pipeline.output_data": json.dumps({"llm": {"replies": replies}})}),
             span(2, "haystack.component.run", 1, {"haystack.component.type": "OpenAIChatGenerator",
                                                   "haystack.component.input": json.dumps({"messages": messages}),
                                                   "haystack.component.output": json.dumps({"replies": replies})})]
    (run,) = extract(request(("haystack", spans))).runs
    assert (run.span_name, run.convention) == ("haystack.component.run", "haystack")
    assert brief(run) == {"system": ["Be terse."], "remembered": [], "input": [["user", "Hi?", []]],
                          "output": [["assistant", "Hello.", []]]}


def test_haystack_chat_messages_in_every_serialization() -> None:
    legacy = [{"_role": "user", "_content": [{"text": "Hi?"}], "_name": None, "_meta": {}},
              {"content": "Hello.", "role": "assistant", "name": None, "meta": {}}]
    assert [(m.role, m.content) for m in chat_messages(legacy) or []] == [("user", "Hi?"), ("assistant", "Hello.")]
    reprs = ["ChatMessage(_role=<ChatRole.ASSISTANT: 'assistant'>, _content=[TextContent(text='Checking.'), "
             "ToolCall(tool_name='w', arguments={'city': 'Paris', 'days': -1}, id=None, extra=None)], _name=None, "
             "_meta={'usage': {'total_tokens': 10}})"]
    (msg,) = chat_messages(reprs) or []
    assert (msg.content, msg.tool_calls[0].name, msg.tool_calls[0].arguments) == ("Checking.", "w",
                                                                                  {"city": "Paris", "days": -1})
    assert chat_messages(["ChatMessage(_role=__import__('os').system('true'))"]) is None  # never evaluated
    assert chat_messages([{"role": "user", "content": 3}]) is None and chat_messages("Hi") is None
