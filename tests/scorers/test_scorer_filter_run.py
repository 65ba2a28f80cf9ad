"""filter_run: Mastra's filterRun semantics on our agent types and on dicts (SPEC §1.4)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorers import (
    Message,
    RunFilter,
    ScorerDefinitionError,
    ScorerRun,
    ScorerRunInputForAgent,
    ScorerRunOutputForAgent,
    create_scorer,
    filter_run,
)
from scorers.utils import make_agent_run, make_message, make_tool_call


def tool_message(name: str, text: str = "") -> Message:
    return make_message(text, role="assistant", tool_calls=[make_tool_call(name, id=f"id-{name}")])


def reasoning_message(text: str) -> Message:
    return make_message(text, role="assistant", reasoning="thinking")


def sample_run() -> ScorerRun[ScorerRunInputForAgent, ScorerRunOutputForAgent]:
    return make_agent_run(
        [make_message("question")],
        [
            tool_message("search_web"),
            make_message(
                "tool says hi", role="tool", tool_call_id="id-search_web", name="search_web"
            ),
            tool_message("fetch_page"),
            make_message("final answer", role="assistant"),
        ],
        remembered_messages=[
            make_message("old question"),
            tool_message("search_docs", "looked it up"),
            make_message("old answer", role="assistant"),
        ],
        system_messages=["Be terse."],
        tagged_system_messages={"memory": ["likes tea"]},
        ground_truth="gt",
        request_context={"user": "u1"},
        run_id="r1",
    )


def contents(messages: Any) -> list[str]:
    return [m.content or m.tool_calls[0].name for m in messages]


def test_no_options_returns_the_same_run() -> None:
    run = sample_run()
    assert filter_run()(run) is run


def test_drop_request_context_and_ground_truth_keep_everything_else() -> None:
    run = sample_run()
    new = filter_run(drop_request_context=True, drop_ground_truth=True)(run)
    assert (new.request_context, new.ground_truth) == ({}, None)
    assert (new.run_id, new.input, new.output) == ("r1", run.input, run.output)
    assert run.request_context == {"user": "u1"} and run.ground_truth == "gt"  # not mutated


def test_limits_keep_the_last_n_messages() -> None:
    new = filter_run(max_remembered_messages=1, max_output_messages=2)(sample_run())
    assert contents(new.input.remembered_messages) == ["old answer"]
    assert contents(new.output) == ["fetch_page", "final answer"]
    assert isinstance(new.output, ScorerRunOutputForAgent)


def test_zero_limit_keeps_everything_as_in_mastra() -> None:
    new = filter_run(max_output_messages=0)(sample_run())
    assert len(new.output) == 4


def test_input_system_and_tagged_messages_are_never_touched() -> None:
    run = sample_run()
    new = filter_run(part_types=["reasoning"], max_remembered_messages=1)(run)
    assert new.input.input_messages == run.input.input_messages
    assert new.input.system_messages == run.input.system_messages
    assert new.input.tagged_system_messages == run.input.tagged_system_messages


def test_part_types_match_by_prefix() -> None:
    new = filter_run(part_types=["tool"])(sample_run())
    assert contents(new.output) == ["search_web", "fetch_page"]
    assert contents(new.input.remembered_messages) == ["looked it up"]


def test_part_types_keep_messages_with_any_matching_part() -> None:
    run = make_agent_run(
        "q", [reasoning_message("answer"), make_message("plain", role="assistant")]
    )
    new = filter_run(part_types=["reas"])(run)
    assert contents(new.output) == ["answer"]


def test_tool_names_filter_only_messages_with_tools() -> None:
    new = filter_run(tool_names=["search"])(sample_run())
    # fetch_page's call is dropped; messages without tools stay; the tool result of
    # search_web stays (its role "tool" message is named search_web).
    assert contents(new.output) == ["search_web", "tool says hi", "final answer"]
    assert contents(new.input.remembered_messages) == ["old question", "looked it up", "old answer"]


def test_tool_names_and_part_types_must_both_hold() -> None:
    new = filter_run(tool_names=["fetch"], part_types=["tool-call"])(sample_run())
    assert contents(new.output) == ["fetch_page"]


def test_mastra_tool_invocation_part_type_matches_tool_calls() -> None:
    new = filter_run(part_types=["tool-invocation"])(sample_run())
    assert contents(new.output) == ["search_web", "fetch_page"]


def test_filters_then_limits() -> None:
    new = filter_run(part_types=["text"], max_output_messages=1)(sample_run())
    assert contents(new.output) == ["final answer"]


def test_dict_input_and_list_output_are_filtered_keeping_their_shape() -> None:
    raw_output = [
        {"role": "assistant", "content": "one"},
        {"role": "assistant", "content": "two"},
    ]
    run = ScorerRun(
        input={"rememberedMessages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
               "inputMessages": [{"role": "user", "content": "q"}]},
        output=raw_output,
    )  # fmt: skip
    new = filter_run(max_remembered_messages=1, max_output_messages=1)(run)
    assert new.input["rememberedMessages"] == [{"role": "user", "content": "b"}]
    assert new.input["inputMessages"] == [{"role": "user", "content": "q"}]
    assert new.output == [{"role": "assistant", "content": "two"}]


def test_missing_remembered_list_in_a_dict_is_treated_as_empty() -> None:
    run = ScorerRun(input={"rememberedMessages": None}, output="text")
    new = filter_run(max_remembered_messages=2)(run)
    assert new.input == {"rememberedMessages": []} and new.output == "text"


def test_non_message_entries_are_kept() -> None:
    run: ScorerRun[Any, Any] = ScorerRun(output=[42, {"role": "assistant", "content": "x"}])
    assert filter_run(part_types=["image"])(run).output == [42]


@pytest.mark.parametrize("option", ["max_remembered_messages", "max_output_messages"])
def test_negative_limits_are_rejected_when_filter_run_is_called(option: str) -> None:
    with pytest.raises(ScorerDefinitionError, match=f"{option} must not be negative, got -1"):
        filter_run(**{option: -1})  # type: ignore[arg-type]


def test_bad_option_types_are_rejected() -> None:
    with pytest.raises(ScorerDefinitionError, match="part_types must be a list of strings"):
        filter_run(part_types="text")
    with pytest.raises(ScorerDefinitionError, match="tool_names must be a list of strings"):
        filter_run(tool_names=[1])  # type: ignore[list-item]
    with pytest.raises(ScorerDefinitionError, match="max_output_messages must be an int"):
        filter_run(max_output_messages=True)


async def test_filter_run_as_prepare_run_in_an_agent_scorer() -> None:
    seen: list[ScorerRun[Any, Any]] = []

    def score(run: ScorerRun[Any, Any]) -> float:
        seen.append(run)
        return float(len(run.output))

    scorer = create_scorer(
        id="s",
        description="d",
        type="agent",
        prepare_run=filter_run(drop_request_context=True, tool_names=["fetch"]),
    ).generate_score(score)
    run = sample_run()
    result = await scorer.run(run)
    # search_web's call and its role "tool" result are dropped; fetch_page and the answer stay
    assert result.score == 2.0 and result.request_context == {}
    assert contents(seen[0].output) == ["fetch_page", "final answer"]
    assert run.request_context == {"user": "u1"}


def test_filter_run_returns_a_run_filter_with_its_options() -> None:
    prepare = filter_run(part_types=("text",), max_output_messages=3)
    assert isinstance(prepare, RunFilter)
    assert (prepare.part_types, prepare.tool_names, prepare.max_output_messages) == (
        ("text",),
        None,
        3,
    )


_PART_KINDS = ["text", "reasoning", "tool-call", "image", "data-progress"]


def _message_of(kinds: list[str], tool: str) -> Message:
    parts: list[dict[str, Any]] = []
    for kind in kinds:
        if kind == "tool-call":
            parts.append({"type": "tool-call", "toolCallId": tool, "toolName": tool})
        elif kind == "image":
            parts.append({"type": "image", "url": "https://example.com/x.png"})
        elif kind == "data-progress":
            parts.append({"type": "data-progress", "pct": 1})
        else:
            parts.append({"type": kind, "text": kind})
    return Message.model_validate({"role": "assistant", "content": [], "parts": parts})


@settings(max_examples=60, deadline=None)
@given(
    messages=st.lists(
        st.tuples(
            st.lists(st.sampled_from(_PART_KINDS), min_size=1, max_size=3),
            st.sampled_from(["search_web", "search_docs", "fetch"]),
        ),
        max_size=8,
    ),
    part_types=st.one_of(
        st.none(), st.lists(st.sampled_from(["te", "tool", "image", "data-"]), max_size=2)
    ),
    tool_names=st.one_of(
        st.none(), st.lists(st.sampled_from(["search", "fetch", "x"]), max_size=2)
    ),
    limit=st.one_of(st.none(), st.integers(min_value=0, max_value=5)),
)
def test_filtered_output_is_an_ordered_subset_within_the_limit(
    messages: list[tuple[list[str], str]],
    part_types: list[str] | None,
    tool_names: list[str] | None,
    limit: int | None,
) -> None:
    output = [_message_of(kinds, tool) for kinds, tool in messages]
    run = make_agent_run("question", output, system_messages=["sys"])
    new = filter_run(part_types=part_types, tool_names=tool_names, max_output_messages=limit)(run)
    kept = list(new.output)
    positions = [next(i for i, m in enumerate(output) if m is k) for k in kept]
    assert positions == sorted(positions)
    if limit:
        assert len(kept) <= limit
    for message in kept:
        if part_types is not None:
            assert any(p.type.startswith(tuple(part_types)) for p in message.parts)
        if tool_names is not None and message.tool_calls:
            assert any(c.name.startswith(tuple(tool_names)) for c in message.tool_calls)
    assert new.input == run.input
