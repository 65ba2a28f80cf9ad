"""scorers.utils: Mastra's rules for where text is found, on our types, dicts and strings (SPEC §1.3)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from scorers import Message, ScorerRun, ScorerRunInputForAgent, ScorerRunOutputForAgent, ToolCall
from scorers.utils import (
    ToolCallInfo,
    extract_agent_response_messages,
    extract_input_messages,
    extract_tool_calls,
    extract_tool_results,
    get_assistant_message,
    get_combined_system_prompt,
    get_reasoning,
    get_system_messages,
    get_text_content,
    get_user_message,
    make_agent_run,
    make_message,
    make_tool_call,
    round_to_two_decimals,
)

MASTRA_INPUT = {
    "inputMessages": [
        {"id": "s0", "role": "system", "content": "Inline system."},
        {
            "id": "u1",
            "role": "user",
            "content": {
                "format": 2,
                "parts": [{"type": "text", "text": "draft"}, {"type": "text", "text": "Weather in Paris?"}],
            },
        },
    ],
    "rememberedMessages": [],
    "systemMessages": [
        {"role": "system", "content": "Be terse."},
        {"role": "system", "content": [{"type": "text", "text": "Use"}, {"type": "text", "text": "tools."}]},
    ],
    "taggedSystemMessages": {"memory": [{"role": "system", "content": "User: Ann"}]},
}  # fmt: skip

MASTRA_OUTPUT = [
    {
        "id": "a1",
        "role": "assistant",
        "content": {
            "format": 2,
            "reasoning": "Need the weather tool.",
            "parts": [
                {
                    "type": "tool-invocation",
                    "toolInvocation": {
                        "state": "result",
                        "toolCallId": "c1",
                        "toolName": "weather",
                        "args": {"city": "Paris"},
                        "result": {"sky": "sunny"},
                    },
                },
                {
                    "type": "tool-invocation",
                    "toolInvocation": {"state": "partial-call", "toolCallId": "c2", "toolName": "maps"},
                },
                {"type": "text", "text": "It is sunny."},
            ],
        },
    }
]  # fmt: skip

OPENAI_OUTPUT = [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "name": "get_weather", "arguments": '{"city": "Paris"}'}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny and 21 degrees"},
    {"role": "assistant", "content": "The weather in Paris is sunny."},
]  # fmt: skip


# -- get_text_content ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "text"),
    [
        ({"role": "user", "content": "plain"}, "plain"),
        ({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}, "b"),
        ({"role": "user", "content": {"format": 2, "content": "legacy", "parts": []}}, "legacy"),
        ({"role": "user", "content": {"format": 2, "text": "from text"}}, "from text"),
        ({"role": "user", "content": {"format": 2, "parts": [{"type": "text", "text": "x"},
                                                              {"type": "text", "text": "last"}]}}, "last"),
        ({"role": "user", "content": {"format": 2, "content": "", "parts": [{"type": "text", "text": "p"}]}}, "p"),
        ({"role": "assistant", "text": "legacy output"}, "legacy output"),
        ({"role": "user", "content": {"format": 2, "parts": [{"type": "reasoning", "text": "r"}]}}, ""),
        (Message(role="user", content="model"), "model"),
        ("raw string", "raw string"),
        (None, ""),
        (42, ""),
    ],
)  # fmt: skip
def test_get_text_content_follows_mastra_order(message: Any, text: str) -> None:
    assert get_text_content(message) == text


# -- input helpers -------------------------------------------------------------------------


def test_get_user_message_from_mastra_json_and_models() -> None:
    assert get_user_message(MASTRA_INPUT) == "Weather in Paris?"
    model = ScorerRunInputForAgent.model_validate(MASTRA_INPUT)
    assert get_user_message(model) == "Weather in Paris?"  # coerced as Mastra reads it: the last text part
    assert get_user_message(ScorerRun(input=model)) == get_user_message(model)


@pytest.mark.parametrize(
    ("run_input", "expected"),
    [
        ("just a string", "just a string"),
        ({"input_messages": [{"role": "user", "content": "snake"}]}, "snake"),
        ({"inputMessages": [{"role": "assistant", "content": "no"}],
          "messages": [{"role": "user", "content": "from messages"}]}, "from messages"),
        ({"prompt": "the prompt", "text": "t"}, "the prompt"),
        ({"text": "the text"}, "the text"),
        ({"content": "the content"}, "the content"),
        ({"input": {"role": "user", "content": "nested"}}, "nested"),
        ({"user": "the user"}, "the user"),
        ([{"role": "user", "content": "list input"}], "list input"),
        ({"nothing": 1}, None),
        (None, None),
        (3.14, None),
    ],
)  # fmt: skip
def test_get_user_message_sources(run_input: Any, expected: str | None) -> None:
    assert get_user_message(run_input) == expected


def test_get_system_messages_collects_all_sources_in_order() -> None:
    assert get_system_messages(MASTRA_INPUT) == [
        "Be terse.",
        "Use tools.",
        "Inline system.",
        "User: Ann",
    ]
    model = ScorerRunInputForAgent.model_validate(MASTRA_INPUT)
    assert get_system_messages(model) == ["Be terse.", "Use\ntools.", "Inline system.", "User: Ann"]
    assert get_system_messages("a string") == [] and get_system_messages(None) == []


def test_get_system_messages_from_messages_key() -> None:
    run_input = {
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}]
    }
    assert get_system_messages(run_input) == ["sys"]


def test_get_combined_system_prompt_joins_with_blank_lines() -> None:
    assert (
        get_combined_system_prompt(MASTRA_INPUT)
        == "Be terse.\n\nUse tools.\n\nInline system.\n\nUser: Ann"
    )
    assert get_combined_system_prompt({}) == ""


def test_extract_input_messages() -> None:
    assert extract_input_messages(MASTRA_INPUT) == ["Inline system.", "Weather in Paris?"]
    assert extract_input_messages("q") == ["q"]
    assert extract_input_messages(make_agent_run(["a", "b"])) == ["a", "b"]
    assert extract_input_messages(None) == []


# -- output helpers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("a string answer", "a string answer"),
        (MASTRA_OUTPUT, "It is sunny."),
        (OPENAI_OUTPUT, "The weather in Paris is sunny."),
        ({"role": "assistant", "text": "legacy"}, "legacy"),
        ({"text": "no role"}, "no role"),
        ({"role": "assistant", "content": "content string"}, "content string"),
        ({"role": "user", "content": "not the assistant"}, None),
        ([{"role": "assistant", "content": ""}], ""),
        ([{"role": "user", "content": "u"}], None),
        ([], None),
        (None, None),
    ],
)  # fmt: skip
def test_get_assistant_message(output: Any, expected: str | None) -> None:
    assert get_assistant_message(output) == expected


def test_get_assistant_message_on_models_and_runs() -> None:
    output = ScorerRunOutputForAgent.model_validate(OPENAI_OUTPUT)
    assert get_assistant_message(output) == "The weather in Paris is sunny."
    assert get_assistant_message(ScorerRun(output=output)) == "The weather in Paris is sunny."
    assert get_assistant_message(Message(role="assistant", content="m")) == "m"


def test_extract_agent_response_messages_includes_tool_call_only_messages() -> None:
    assert extract_agent_response_messages(OPENAI_OUTPUT) == ["", "The weather in Paris is sunny."]
    assert extract_agent_response_messages("s") == ["s"]


def test_get_reasoning() -> None:
    assert get_reasoning(MASTRA_OUTPUT) == "Need the weather tool."
    detailed = [{"role": "assistant", "content": {"format": 2, "parts": [
        {"type": "reasoning", "details": [{"type": "text", "text": "step 1, "}, {"type": "text", "text": "step 2"}]},
        {"type": "reasoning", "reasoning": "second part"},
        {"type": "text", "text": "answer"}]}}]  # fmt: skip
    assert get_reasoning(detailed) == "step 1, step 2\nsecond part"
    assert get_reasoning([make_message("a", role="assistant", reasoning="why")]) == "why"
    assert get_reasoning(OPENAI_OUTPUT) is None and get_reasoning(None) is None


def test_extract_tool_calls_mastra_json() -> None:
    calls = extract_tool_calls(MASTRA_OUTPUT)
    assert calls.tools == ["weather"]  # the partial-call is not counted
    assert calls.tool_call_infos == [
        ToolCallInfo(tool_name="weather", tool_call_id="c1", message_index=0, invocation_index=0)
    ]


def test_extract_tool_calls_legacy_tool_invocations() -> None:
    output = [{"role": "assistant", "content": {"format": 2, "parts": [], "toolInvocations": [
        {"state": "call", "toolName": "a"}, {"state": "result", "toolName": "b", "toolCallId": "x"}]}}]  # fmt: skip
    calls = extract_tool_calls(output)
    assert calls.tools == ["a", "b"]
    assert [i.tool_call_id for i in calls.tool_call_infos] == ["0-0", "x"]


def test_extract_tool_calls_openai_shape_and_models() -> None:
    assert extract_tool_calls(OPENAI_OUTPUT).tools == ["get_weather"]
    run = make_agent_run("q", [make_message("", role="assistant", tool_calls=[
        make_tool_call("a", id="1"), make_tool_call("", id="2"), make_tool_call("c", state="output-error")])])  # fmt: skip
    assert extract_tool_calls(run).tools == ["a"]
    assert extract_tool_calls("no tools").tools == []


def test_extract_tool_results_from_mastra_invocations() -> None:
    results = extract_tool_results(MASTRA_OUTPUT)
    assert [(r.tool_name, r.tool_call_id, r.args, r.result) for r in results] == [
        ("weather", "c1", {"city": "Paris"}, {"sky": "sunny"})
    ]


def test_extract_tool_results_from_tool_messages_and_parts() -> None:
    results = extract_tool_results(OPENAI_OUTPUT)
    assert [(r.tool_name, r.tool_call_id, r.args, r.result) for r in results] == [
        ("get_weather", "call_1", {"city": "Paris"}, "sunny and 21 degrees")
    ]
    with_part = [
        {"role": "assistant", "tool_calls": [{"id": "k", "name": "calc", "arguments": {"x": 1}}]},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "k", "result": 2}]},
    ]
    assert [(r.tool_name, r.args, r.result) for r in extract_tool_results(with_part)] == [
        ("calc", {"x": 1}, 2)
    ]


def test_extract_tool_results_does_not_duplicate_a_call_with_its_result_message() -> None:
    output = [
        make_message("", role="assistant", tool_calls=[make_tool_call("t", {"a": 1}, "r", id="1")]),
        make_message("r", role="tool", tool_call_id="1", name="t"),
    ]
    assert len(extract_tool_results(output)) == 1


def test_calls_without_results_are_not_results() -> None:
    output = [make_message("", role="assistant", tool_calls=[make_tool_call("t", state="call")])]
    assert extract_tool_results(output) == []


# -- rounding and builders -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.005, 1.01),
        (0.125, 0.13),
        (2 / 3, 0.67),
        (0.0, 0.0),
        (1.0, 1.0),
        (-1.005, -1.0),
        (0.994999, 0.99),
    ],
)
def test_round_to_two_decimals(value: float, expected: float) -> None:
    assert round_to_two_decimals(value) == expected


def test_make_tool_call_defaults_to_result_state() -> None:
    call = make_tool_call("search", '{"q": "x"}', ["hit"], id="c9")
    assert call == ToolCall(
        id="c9", name="search", arguments={"q": "x"}, result=["hit"], state="result"
    )


def test_make_message_accepts_tool_call_dicts() -> None:
    message = make_message(
        "hi", role="assistant", tool_calls=[{"toolName": "t", "toolCallId": "1"}], id="m1"
    )
    assert (message.id, message.tool_calls[0].name, message.tool_calls[0].id) == ("m1", "t", "1")


def test_make_agent_run_defaults() -> None:
    run = make_agent_run()
    assert run.input == ScorerRunInputForAgent() and list(run.output) == []
    assert uuid.UUID(run.run_id).version == 4 and run.request_context == {}


def test_make_agent_run_accepts_strings_dicts_and_messages() -> None:
    run = make_agent_run(
        ["q1", {"role": "user", "content": "q2"}],
        "answer",
        remembered_messages=[make_message("earlier", role="assistant")],
        system_messages="sys",
        tagged_system_messages={"memory": ["m"]},
        ground_truth="gt",
        request_context={"k": "v"},
        trace_id="t",
        span_id="s",
    )
    assert extract_input_messages(run) == ["q1", "q2"]
    assert [m.role for m in run.output] == ["assistant"]
    assert run.input.remembered_messages[0].role == "assistant"
    assert run.input.system_messages[0].role == "system"
    assert run.input.tagged_system_messages["memory"][0].content == "m"
    assert (run.ground_truth, run.request_context, run.trace_id, run.span_id) == (
        "gt",
        {"k": "v"},
        "t",
        "s",
    )


def test_make_agent_run_rejects_non_messages() -> None:
    with pytest.raises(ValueError, match="not a message: 42"):
        make_agent_run([42])
