"""Issue 12: runs, results and filter_run behave as Mastra's (SPEC §1.1, §1.2, §1.4).

not_scorable names its step (point 2), filter_run refuses non-list message fields (3), runs
keep extra fields and have an expected trajectory (10). Through the public API only.
"""

from __future__ import annotations

from typing import Any

import pytest
from llm_server import Reply

from scorers import (
    Judge,
    NotScorable,
    ScorerRun,
    ScorerRunError,
    create_scorer,
    filter_run,
    not_scorable,
)
from scorers.utils import make_message

# --------------------------------------------------------------------------- 2. not_scorable


async def test_not_scorable_names_the_step_that_declined() -> None:
    scorer = (create_scorer(id="s", description="d")
              .preprocess(lambda run: not_scorable("empty") if not run.output else {"n": 1})
              .generate_score(lambda: 1.0))
    result = await scorer.run(input="q", output="")
    assert result.not_scorable == NotScorable(step="preprocess", reason="empty")
    assert (result.not_scorable.step, result.not_scorable.reason) == ("preprocess", "empty")
    assert result.score is None


async def test_not_scorable_from_a_prompt_steps_create_prompt(server: Any) -> None:
    judge = Judge(model="openai/gpt-4o-mini", instructions="i",
                  model_settings={"api_base": server.url + "/v1", "api_key": "k"})
    scorer = (create_scorer(id="s", description="d", judge=judge)
              .generate_score(description="s", create_prompt=lambda: "Score")
              .generate_reason(description="r", create_prompt=lambda: not_scorable()))
    server.script(Reply.json({"score": 1}))
    result = await scorer.run(output="a")
    assert result.not_scorable == NotScorable(step="generate_reason")
    assert result.generate_reason_prompt is None and len(server.requests) == 1


def test_the_marker_a_step_returns_names_no_step() -> None:
    assert not_scorable("why") == NotScorable(reason="why") and not_scorable().step is None


# --------------------------------------------------------------------------- 3. filter_run


@pytest.mark.parametrize("key", ["remembered_messages", "rememberedMessages"])
def test_filter_run_refuses_a_string_message_field(key: str) -> None:
    run = ScorerRun(input={key: "abc"}, output=[])
    with pytest.raises(TypeError, match=f"{key}.*must be a list of messages, got str"):
        filter_run(max_remembered_messages=2)(run)
    with pytest.raises(TypeError):
        filter_run()(run)  # no option needed: the field is never iterated as characters


async def test_filter_run_type_error_fails_the_run_with_it_chained() -> None:
    scorer = create_scorer(id="s", description="d", prepare_run=filter_run(part_types=["text"]))
    with pytest.raises(ScorerRunError) as caught:
        await scorer.generate_score(lambda: 1).run(input={"remembered_messages": "abc"}, output=[])
    assert caught.value.failed_step == "prepare_run" and isinstance(caught.value.__cause__, TypeError)


def test_filter_run_still_filters_lists_in_a_dict_input() -> None:
    remembered = [make_message("old"), make_message("new")]
    run = filter_run(max_remembered_messages=1)(ScorerRun(input={"remembered_messages": remembered}))
    assert [m.content for m in run.input["remembered_messages"]] == ["new"]
    assert filter_run()(ScorerRun(input={"remembered_messages": None})).input == {"remembered_messages": []}


# --------------------------------------------------------------------------- 10. extra fields


STEPS = ("preprocess", "analyze", "generate_score", "generate_reason")


def every_step_reads(seen: list[Any], prepare_run: Any = None) -> Any:
    def step(name: str, value: Any) -> Any:
        def read(run: ScorerRun[Any, Any]) -> Any:
            seen.append((name, run.additional_context, run.model_extra))
            return value
        return read

    return (create_scorer(id="ctx", description="d", prepare_run=prepare_run)
            .preprocess(step("preprocess", {"p": 1}))
            .analyze(step("analyze", {"a": 1}))
            .generate_score(step("generate_score", 0.5))
            .generate_reason(step("generate_reason", "ok")))


async def test_run_keeps_additional_context_for_every_step() -> None:
    seen: list[Any] = []
    context = {"rubric": "- polite"}
    result = await every_step_reads(seen).run(input="q", output="a", additional_context=context)
    assert seen == [(name, context, {"additional_context": context}) for name in STEPS]
    assert result.score == 0.5 and result.additional_context == context  # the result keeps it


async def test_run_sync_keeps_extra_fields_too() -> None:
    seen: list[Any] = []
    every_step_reads(seen).run_sync(input="q", output="a", additional_context={"k": 1})
    assert {entry[1]["k"] for entry in seen} == {1}


async def test_additional_context_is_an_empty_dict_when_none_was_given() -> None:
    """Issue 19 (5): every step reads ``run.additional_context`` (``{}``, never an
    AttributeError) when run() / run_sync() got none, or None."""
    seen: list[Any] = []
    result = await every_step_reads(seen).run(input="q", output="a")
    assert seen == [(name, {}, {"additional_context": {}}) for name in STEPS]
    assert result.score == 0.5 and result.additional_context == {}
    seen.clear()
    every_step_reads(seen).run_sync(input="q", output="a", additional_context=None)
    assert [entry[1] for entry in seen] == [{}] * len(STEPS)


async def test_a_prepare_run_dict_without_additional_context_gives_an_empty_one() -> None:
    seen: list[Any] = []
    prepare = lambda run: {"input": run.input, "output": run.output}  # noqa: E731
    result = await every_step_reads(seen, prepare).run(input="q", output="a", additional_context={"k": 1})
    assert [entry[1] for entry in seen] == [{}] * len(STEPS) and result.additional_context == {}


@pytest.mark.parametrize("how", ["model_copy", "dict"])
async def test_a_field_added_by_prepare_run_reaches_every_step(how: str) -> None:
    def prepare(run: ScorerRun[Any, Any]) -> Any:
        if how == "dict":
            return {**run.model_dump(), "additional_context": {"source": "prepare"}}
        return run.model_copy(update={"additional_context": {"source": "prepare"}})

    seen: list[Any] = []
    result = await every_step_reads(seen, prepare).run(input="q", output="a", run_id="r1")
    assert [entry[1] for entry in seen] == [{"source": "prepare"}] * 4
    assert result.run_id == "r1" and result.additional_context == {"source": "prepare"}


async def test_create_prompt_reads_additional_context(server: Any) -> None:
    judge = Judge(model="openai/gpt-4o-mini", instructions="i",
                  model_settings={"api_base": server.url + "/v1", "api_key": "k"})
    scorer = create_scorer(id="s", description="d", judge=judge).generate_score(
        description="s", create_prompt=lambda run: f"Rubric: {run.additional_context['rubric']}")
    server.script(Reply.json({"score": 1}))
    await scorer.run(output="a", additional_context={"rubric": "- cites sources"})
    assert server.requests[0].message_text("user") == "Rubric: - cites sources"


def test_mastra_camel_case_additional_context_is_read_as_additional_context() -> None:
    run = ScorerRun.model_validate({"output": "a", "additionalContext": {"x": 1}})
    assert run.additional_context == {"x": 1} and run.model_extra == {"additional_context": {"x": 1}}


async def test_a_camel_case_field_alias_as_keyword_is_refused() -> None:
    scorer = create_scorer(id="s", description="d").generate_score(lambda: 1)
    with pytest.raises(TypeError, match="ground_truth="):
        await scorer.run(output="a", groundTruth="b")


async def test_expected_trajectory_is_a_run_field() -> None:
    seen: list[Any] = []
    trajectory = [{"tool": "search"}, {"tool": "answer"}]
    scorer = create_scorer(id="t", description="d").generate_score(
        lambda run: seen.append(run.expected_trajectory) or 1.0)
    result = await scorer.run(input="q", output="a", expected_trajectory=trajectory)
    assert seen == [trajectory] and result.expected_trajectory == trajectory
    assert "expected_trajectory" in ScorerRun.model_fields
    assert ScorerRun.model_validate({"expectedTrajectory": trajectory}).expected_trajectory == trajectory


async def test_filter_run_can_drop_the_expected_trajectory() -> None:
    seen: list[Any] = []
    scorer = create_scorer(id="t", description="d", prepare_run=filter_run(drop_expected_trajectory=True))
    scorer = scorer.generate_score(lambda run: seen.append(run.expected_trajectory) or 1.0)
    result = await scorer.run(input="q", output="a", expected_trajectory=[{"tool": "search"}],
                              ground_truth="kept")
    assert seen == [None] and result.expected_trajectory is None and result.ground_truth == "kept"
