"""Answer relevancy and answer similarity against the fake judge server."""

from __future__ import annotations

from typing import Any

import pytest
from builtin_support import by_prefix, prompts, schema_of

from scorers import Judge, ScorerDefinitionError, ScorerRunError
from scorers.builtin import answer_relevancy, answer_similarity
from scorers.builtin._llm_answer import SimilarityAnalysis, UnitMatch, similarity_score
from scorers.utils import make_agent_run, make_message, make_tool_call

RELEVANCY = {
    "Extract the statements": {"statements": ["Paris is the capital", "It has the Eiffel Tower",
                                              "Cats are mammals", "Maybe it rains"]},
    "Judge the relevance": {"verdicts": [
        {"verdict": "yes", "reason": "answers"}, {"verdict": "YES", "reason": "context"},
        {"verdict": "no", "reason": "off topic"}, {"verdict": "unsure", "reason": "vague"}]},
    "Explain the answer relevancy": "The score is 0.58 because one statement is off topic.",
}


async def test_answer_relevancy_score_from_verdicts_and_prompts(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(RELEVANCY)
    result = await answer_relevancy(judge).run(input="What is the capital of France?",
                                                output="Paris is the capital. It has the Eiffel Tower.")
    assert result.score == 0.58  # (2 + 0.3 * 1) / 4 = 0.575 -> 0.58
    assert result.reason == "The score is 0.58 because one statement is off topic."
    assert result.preprocess_step_result.statements[0] == "Paris is the capital"
    assert [v.verdict for v in result.analyze_step_result.verdicts] == ["yes", "yes", "no", "unsure"]
    sent = prompts(server)
    assert len(sent) == 3
    assert "Answer:\nParis is the capital. It has the Eiffel Tower." in sent[0]
    assert "Question:\nWhat is the capital of France?" in sent[1] and '"Cats are mammals"' in sent[1]
    assert "Score: 0.58" in sent[2] and "- Cats are mammals: no (off topic)" in sent[2]
    system = server.requests[0].message_text("system")
    assert "answer relevancy evaluator" in system
    assert schema_of(server.requests[1])["$defs"]["Verdict"]["properties"]["verdict"]["enum"] == ["yes", "no", "unsure"]


async def test_answer_relevancy_weight_scale_and_agent_messages(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(RELEVANCY)
    run = make_agent_run("Capital of France?", [
        make_message("", role="assistant", tool_calls=[make_tool_call("search", result="Paris")]),
        make_message("Paris.", role="assistant")])
    result = await answer_relevancy(judge, uncertainty_weight=0.5, scale=10).run(input=run.input, output=run.output)
    assert result.score == 6.25  # (2 + 0.5) / 4 * 10
    assert prompts(server)[0].endswith("Answer:\nParis.")


async def test_answer_relevancy_no_verdicts_is_zero(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({**RELEVANCY, "Extract the statements": {"statements": []},
                                  "Judge the relevance": {"verdicts": []}})
    result = await answer_relevancy(judge).run(input="q", output="Hmm.")
    assert result.score == 0.0


async def test_answer_relevancy_without_answer_is_not_scorable(server: Any, judge: Judge) -> None:
    result = await answer_relevancy(judge).run(input="q", output=[])
    assert result.score is None and result.not_scorable is not None
    assert result.not_scorable.reason == "the run has no answer text"
    assert server.requests == []


def test_answer_relevancy_definition_errors() -> None:
    with pytest.raises(ScorerDefinitionError, match="a judge is required"):
        answer_relevancy(None)  # type: ignore[arg-type]
    with pytest.raises(ScorerDefinitionError, match="the judge needs a model"):
        answer_relevancy(Judge(instructions="x"))
    with pytest.raises(ScorerDefinitionError, match="uncertainty_weight"):
        answer_relevancy("openai/gpt-4o-mini", uncertainty_weight=2)
    with pytest.raises(ScorerDefinitionError, match="scale must be a positive number"):
        answer_relevancy("openai/gpt-4o-mini", scale=0)


def test_judge_instructions_default_and_override() -> None:
    assert "relevancy" in (answer_relevancy("openai/gpt-4o-mini").judge.instructions or "")  # type: ignore[union-attr]
    custom = answer_relevancy({"model": "openai/gpt-4o-mini", "instructions": "Be harsh."})
    assert custom.judge.instructions == "Be harsh."  # type: ignore[union-attr]


def match(kind: str) -> UnitMatch:
    return UnitMatch(ground_truth_unit=kind, match_type=kind)  # type: ignore[arg-type]


def test_similarity_score_arithmetic() -> None:
    assert similarity_score(SimilarityAnalysis()) == 1.0
    assert similarity_score(SimilarityAnalysis(matches=[match("exact")])) == 1.0
    # (0.8 + 0.4) / 2.4 = 0.5; minus min(5 * 0.05, 0.2) = 0.3
    analysis = SimilarityAnalysis(matches=[match("semantic"), match("partial")], extra_in_output=list("abcde"))
    assert similarity_score(analysis) == pytest.approx(0.3)
    with_contradiction = SimilarityAnalysis(matches=[match("exact")], contradictions=[
        {"output_unit": "x", "ground_truth_unit": "y"}])  # type: ignore[list-item]
    assert similarity_score(with_contradiction) == 0.0
    assert similarity_score(with_contradiction, contradiction_penalty=0.25) == 0.75
    assert similarity_score(SimilarityAnalysis(matches=[match("missing")])) == 0.0  # clamped


SIMILARITY = {
    "Extract the semantic units": {"output_units": ["Paris is the capital"],
                                   "ground_truth_units": ["capital is Paris", "population 2M"]},
    "Match each ground-truth unit": {
        "matches": [{"ground_truth_unit": "capital is Paris", "output_unit": "Paris is the capital",
                     "match_type": "semantic", "explanation": "same"},
                    {"ground_truth_unit": "population 2M", "output_unit": None, "match_type": "partial",
                     "explanation": "vague"}],
        "extra_in_output": ["x"], "contradictions": []},
    "Explain the answer similarity": "Mostly similar.",
}


async def test_answer_similarity_score_and_prompts(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(SIMILARITY)
    result = await answer_similarity(judge).run(input="q", output="Paris is the capital.",
                                                ground_truth="The capital is Paris, population 2M.")
    assert result.score == 0.45  # (0.8 + 0.4) / 2.4 - 0.05
    assert result.reason == "Mostly similar."
    sent = prompts(server)
    assert "Answer:\nParis is the capital." in sent[0]
    assert "Ground truth:\nThe capital is Paris, population 2M." in sent[0]
    assert '"population 2M"' in sent[1]
    assert "- population 2M: partial" in sent[2]


async def test_answer_similarity_missing_ground_truth(server: Any, judge: Judge) -> None:
    with pytest.raises(ScorerRunError) as caught:
        await answer_similarity(judge).run(input="q", output="a")
    assert caught.value.failed_step == "preprocess"
    assert str(caught.value.__cause__) == "Answer Similarity Scorer requires ground truth to be provided"
    lenient = await answer_similarity(judge, require_ground_truth=False).run(input="q", output="a")
    assert lenient.score is None and lenient.not_scorable is not None
    assert server.requests == []


async def test_answer_relevancy_through_litellm_transport(server: Any, judge: Judge, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same scorer through ``litellm.acompletion`` (not the shared aiohttp fast path)."""
    from scorers import _judge_route

    monkeypatch.setattr(_judge_route, "_routes", {})
    monkeypatch.setattr(_judge_route, "FAST_PROVIDERS", frozenset())
    server.responder = by_prefix(RELEVANCY)
    result = await answer_relevancy(judge).run(input="Capital of France?", output="Paris.")
    assert result.score == 0.58
    assert len(server.requests) == 3
