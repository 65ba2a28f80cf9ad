"""Rubric, multi-turn judge and summarization against the fake judge server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from builtin_support import by_prefix, prompts, schema_of

from scorers import Judge, ScorerDefinitionError
from scorers.builtin import multi_turn_judge, parse_rubric, rubric, summarization
from scorers.utils import make_agent_run, make_message, make_tool_call


def test_parse_rubric_shapes() -> None:
    assert [c.criterion for c in parse_rubric("* a\n  - b\n1) c\n[x] d\n\n")] == ["a", "b", "c", "d"]
    parsed = parse_rubric(["plain", {"criterion": "must", "required": True}, {"description": "desc"}])
    assert [(c.criterion, c.required) for c in parsed] == [("plain", False), ("must", True), ("desc", False)]
    with pytest.raises(ScorerDefinitionError, match="a criterion must be"):
        parse_rubric([{"required": True}])
    with pytest.raises(ScorerDefinitionError, match="must be a string or a list"):
        parse_rubric(42)


def results(*satisfied: bool) -> dict[str, Any]:
    return {"results": [{"criterion": f"c{i}", "satisfied": s, "reasoning": ""} for i, s in enumerate(satisfied)]}


async def test_rubric_all_criteria_required_when_none_marked(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Decide for each criterion": results(True, False)})
    result = await rubric(judge, criteria="- Greets\n- Gives a price").run(input="Price?", output="Hi! It is $5.")
    assert (result.score, result.reason) == (0.0, "Unmet criteria: Gives a price")
    sent = prompts(server)
    assert len(sent) == 1  # the reason is computed, not asked
    assert "Task:\nPrice?" in sent[0] and "Response:\nHi! It is $5." in sent[0]
    assert sent[0].endswith("Criteria:\n1. Greets\n2. Gives a price")


async def test_rubric_only_required_criteria_count_and_scale(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Decide for each criterion": results(False, True)})
    criteria = [{"criterion": "nice to have"}, {"criterion": "must", "required": True}]
    result = await rubric(judge, criteria=criteria, scale=5).run(input="q", output="a")
    assert (result.score, result.reason) == (5.0, "All required criteria are met.")


async def test_rubric_missing_verdict_is_unmet(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Decide for each criterion": results(True)})
    assert (await rubric(judge, criteria=["a", "b"]).run(input="q", output="x")).score == 0.0


async def test_rubric_per_run_rubric_and_current_text(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Decide for each criterion": results(True)})
    result = await rubric(judge, criteria=["static"]).run(
        input="q", output="answer", request_context={"rubric": "- per run", "current_text": "draft text"})
    assert result.score == 1.0
    assert result.preprocess_step_result.criteria[0].criterion == "per run"
    assert "Response:\ndraft text" in prompts(server)[0] and "static" not in prompts(server)[0]


async def test_rubric_per_run_rubric_from_additional_context(server: Any, judge: Judge) -> None:
    """Mastra's rubric scorer reads ``run.additionalContext.rubric``: ours reads the run's
    extra field ``additional_context`` (issue 12)."""
    server.responder = by_prefix({"Decide for each criterion": results(True)})
    result = await rubric(judge).run(
        input="q", output="answer", additional_context={"rubric": "- cites a source", "current_text": "v2"})
    assert result.score == 1.0 and result.additional_context["rubric"] == "- cites a source"
    assert result.preprocess_step_result.criteria[0].criterion == "cites a source"
    assert "Response:\nv2" in prompts(server)[0]


async def test_builtin_schemas_carry_no_titles_or_docstrings_of_ours(server: Any, judge: Judge) -> None:
    """SPEC §1.5: the judge receives no title or description of ours, built-in scorers included."""
    server.responder = by_prefix({"Decide for each criterion": results(True)})
    await rubric(judge, criteria="- polite").run(input="q", output="a")
    fmt = server.requests[0].body["response_format"]["json_schema"]
    assert fmt["name"] == "response"
    sent = json.dumps(fmt["schema"])
    assert '"title"' not in sent and '"description"' not in sent


async def test_rubric_without_rubric_is_not_scorable(server: Any, judge: Judge) -> None:
    result = await rubric(judge).run(input="q", output="a")
    assert result.not_scorable.reason == "no rubric"  # type: ignore[union-attr]
    assert server.requests == []


async def test_multi_turn_judge_transcript_and_verdict(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge the whole conversation": {"satisfied": False, "reasoning": "Asked twice."}})
    run = make_agent_run("What's my order status?", [
        make_message("", role="assistant", tool_calls=[make_tool_call("lookup", result="shipped")]),
        make_message("It shipped. What's your order number?", role="assistant")],
        remembered_messages=[make_message("My order is 42"), make_message("Thanks, noted.", role="assistant")])
    result = await multi_turn_judge(judge, criterion="Never asks for known information").run(
        input=run.input, output=run.output)
    assert (result.score, result.reason) == (0.0, "Asked twice.")
    assert prompts(server)[0].endswith(
        "Criterion:\nNever asks for known information\n\nConversation:\nuser: My order is 42\n"
        "assistant: Thanks, noted.\nuser: What's my order status?\nassistant: It shipped. What's your order number?")


async def test_multi_turn_judge_satisfied_and_not_scorable(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge the whole conversation": {"satisfied": True, "reasoning": "Fine."}})
    assert (await multi_turn_judge(judge, criterion="polite").run(input="hi", output="Hello!")).score == 1.0
    assert (await multi_turn_judge(judge, criterion="polite").run(input="hi", output=[])).not_scorable is not None
    with pytest.raises(ScorerDefinitionError, match="criterion must be a non-empty string"):
        multi_turn_judge("openai/gpt-4o-mini", criterion=" ")


def verdicts(*values: str) -> dict[str, Any]:
    return {"verdicts": [{"verdict": v, "reason": ""} for v in values]}


SOURCE = "Paris is the capital of France. It has 2 million people. The Seine runs through it."


async def test_summarization_min_of_alignment_and_coverage(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({
        "Prepare the evaluation of a summary": {"claims": ["Paris is the capital", "It has 5M people"],
                                                "questions": ["Is Paris the capital?", "Does it have 2M people?",
                                                              "Does the Seine run through it?"]},
        "Answer each question using only the summary": verdicts("yes", "no", "unsure"),
        "Check each claim of a summary": verdicts("yes", "no"),
    })
    result = await summarization(judge, source=SOURCE, max_questions=3).run(
        input="Summarize", output="Paris is the capital of France, with 5M people.")
    assert result.score == 0.33  # min(alignment 1/2, coverage 1/3)
    assert result.reason.startswith("The score is 0.33, the lower of coverage and alignment: coverage is 0.33 (1 of 3")
    sent = prompts(server)
    assert "up to 3 closed questions" in sent[0] and f"Source:\n{SOURCE}" in sent[0]
    assert SOURCE not in sent[1]  # coverage is judged from the summary alone
    assert "Summary:\nParis is the capital of France, with 5M people." in sent[1]
    assert f"Source:\n{SOURCE}" in sent[2] and '["Paris is the capital", "It has 5M people"]' in sent[2]
    assert "verdicts" in schema_of(server.requests[2])["properties"]
    assert result.judge["generate_score"].executions[0].output == 0.33


async def test_summarization_source_defaults_to_the_input_and_extractor_wins(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Prepare the evaluation": {"claims": ["c"], "questions": ["q"]},
                                  "Answer each question": verdicts("yes"), "Check each claim": verdicts("yes")})
    result = await summarization(judge, scale=10).run(input=SOURCE, output="Paris: capital.")
    assert result.score == 10.0
    assert f"Source:\n{SOURCE}" in prompts(server)[0]
    await summarization(judge, source="static", source_extractor=lambda run: run.ground_truth).run(
        input="x", output="s", ground_truth="from extractor")
    assert "Source:\nfrom extractor" in prompts(server)[3]


async def test_summarization_nothing_to_score(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Prepare the evaluation": {"claims": [], "questions": []},
                                  "Answer each question": verdicts(), "Check each claim": verdicts()})
    assert (await summarization(judge).run(input=SOURCE, output="Hmm.")).score == 0.0
    count = len(server.requests)
    assert (await summarization(judge).run(input=SOURCE, output="")).not_scorable.reason == "the run has no summary"  # type: ignore[union-attr]
    assert (await summarization(judge).run(input="", output="s")).not_scorable.reason == "the run has no source text"  # type: ignore[union-attr]
    assert len(server.requests) == count


def test_summarization_definition_errors() -> None:
    with pytest.raises(ScorerDefinitionError, match="max_questions must be a positive integer"):
        summarization("openai/gpt-4o-mini", max_questions=0)
    with pytest.raises(ScorerDefinitionError, match="source_extractor must be callable"):
        summarization("openai/gpt-4o-mini", source_extractor="x")  # type: ignore[arg-type]
