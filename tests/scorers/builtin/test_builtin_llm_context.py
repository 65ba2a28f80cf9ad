"""Context precision, context relevance and noise sensitivity against the fake judge server."""

from __future__ import annotations

from typing import Any

import pytest
from builtin_support import by_prefix, prompts

from scorers import Judge, ScorerDefinitionError, ScorerRunError
from scorers.builtin import context_precision, context_relevance, noise_sensitivity
from scorers.builtin._llm_context import (
    ContextEvaluation,
    ContextRelevanceAnalysis,
    ImpactDimension,
    NoiseAnalysis,
    context_relevance_score,
    mean_average_precision,
    noise_score,
)


def test_mean_average_precision_hand_computed() -> None:
    assert mean_average_precision([True, True, False]) == 1.0
    assert mean_average_precision([False, True]) == 0.5
    assert mean_average_precision([False, True, True]) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert mean_average_precision([False, False]) == 0.0
    assert mean_average_precision([]) == 0.0


async def test_context_precision_sorts_by_index_and_scores_map(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({
        "Judge each context piece": {"verdicts": [
            {"context_index": 2, "verdict": "yes", "reason": "r2"},
            {"context_index": 0, "verdict": "no", "reason": "r0"},
            {"context_index": 1, "verdict": "yes", "reason": "r1"}]},
        "Explain the context precision": "Useful pieces come second and third.",
    })
    scorer = context_precision(judge, context=["Cats purr.", "Paris is in France.", "France's capital is Paris."])
    result = await scorer.run(input="Capital of France?", output="Paris.")
    assert result.score == 0.58  # [no, yes, yes]: (1/2 + 2/3) / 2 = 0.583
    sent = prompts(server)
    assert "Question:\nCapital of France?" in sent[0] and "Answer:\nParis." in sent[0]
    assert "0. Cats purr.\n1. Paris is in France.\n2. France's capital is Paris." in sent[0]
    assert "- piece 2: yes (r2)" in sent[1]


async def test_context_precision_no_useful_piece_is_zero(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge each context piece": {"verdicts": [
        {"context_index": 0, "verdict": "no"}]}, "Explain": "None useful."})
    assert (await context_precision(judge, context=["x"], scale=10).run(input="q", output="a")).score == 0.0


async def test_context_precision_extractor_and_empty_run_context(server: Any, judge: Judge) -> None:
    scorer = context_precision(judge, context_extractor=lambda run: run.request_context.get("docs", []))
    result = await scorer.run(input="q", output="a")
    assert result.not_scorable.reason == "the run has no context"  # type: ignore[union-attr]
    assert server.requests == []


def test_context_precision_requires_context() -> None:
    with pytest.raises(ScorerDefinitionError, match="^Context is required for Context Precision scoring$"):
        context_precision("openai/gpt-4o-mini")
    with pytest.raises(ScorerDefinitionError, match="cannot be empty"):
        context_precision("openai/gpt-4o-mini", context=[])


def evaluation(index: int, level: str, used: bool) -> ContextEvaluation:
    return ContextEvaluation(context_index=index, relevance_level=level, was_used=used)  # type: ignore[arg-type]


def test_context_relevance_score_arithmetic() -> None:
    assert context_relevance_score(ContextRelevanceAnalysis()) == 1.0
    assert context_relevance_score(ContextRelevanceAnalysis(missing_context=["x"])) == 0.0
    # mean (1 + 0.7 + 0 ) / 3 = 0.5667; one unused high -0.1; 2 missing -0.3 -> 0.1667
    analysis = ContextRelevanceAnalysis(evaluations=[evaluation(0, "high", False), evaluation(1, "medium", True),
                                                     evaluation(2, "none", False)], missing_context=["a", "b"])
    assert context_relevance_score(analysis) == pytest.approx(1.7 / 3 - 0.4)
    # the missing penalty is capped at 0.5; the score floored at 0
    capped = ContextRelevanceAnalysis(evaluations=[evaluation(0, "high", True)], missing_context=list("abcdef"))
    assert context_relevance_score(capped) == 0.5
    assert context_relevance_score(ContextRelevanceAnalysis(evaluations=[evaluation(0, "low", True)],
                                                            missing_context=list("abcd"))) == 0.0


async def test_context_relevance_against_the_server(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({
        "Evaluate each context piece": {"evaluations": [
            {"context_index": 0, "relevance_level": "high", "was_used": True, "reasoning": "key"},
            {"context_index": 1, "relevance_level": "low", "was_used": False, "reasoning": "aside"}],
            "missing_context": [], "overall_assessment": "ok"},
        "Explain the context relevance": "Mostly relevant.",
    })
    result = await context_relevance(judge, context=["A", "B"]).run(input="q", output="a")
    assert result.score == 0.65
    assert result.analyze_step_result.evaluations[1].was_used is False
    assert "- piece 1: low, used=False" in prompts(server)[1]


def test_context_relevance_definition_errors() -> None:
    with pytest.raises(ScorerDefinitionError, match="Either context or context_extractor is required"):
        context_relevance("openai/gpt-4o-mini")


def test_noise_score_arithmetic() -> None:
    agree = NoiseAnalysis(robustness_score=0.9, dimensions=[
        ImpactDimension(dimension="a", impact_level="none"), ImpactDimension(dimension="b", impact_level="minimal")])
    assert noise_score(agree) == 0.9  # mean 0.925 within 0.2 of 0.9: the judge's score
    disagree = NoiseAnalysis(robustness_score=0.9, dimensions=[ImpactDimension(dimension="a", impact_level="moderate")])
    assert noise_score(disagree) == 0.6  # 0.3 apart: the lower
    issues = NoiseAnalysis(robustness_score=0.8, major_issues=list("abcde"))
    assert noise_score(issues) == pytest.approx(0.5)  # penalty capped at 0.3
    assert noise_score(NoiseAnalysis(robustness_score=1.0)) == 1.0


async def test_noise_sensitivity_prompt_and_score(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({
        "Compare the answer to a noisy question": {
            "dimensions": [{"dimension": "accuracy", "impact_level": "significant", "specific_changes": "Lyon"}],
            "major_issues": ["accepted the misinformation"], "robustness_score": 0.4, "overall_assessment": "weak"},
        "Explain the noise robustness": "It repeated the misinformation.",
    })
    scorer = noise_sensitivity(judge, baseline_response="Paris.", noisy_query="Capital of France? I heard Lyon.",
                               noise_type="misinformation")
    result = await scorer.run(input="Capital of France?", output="Lyon.")
    assert result.score == 0.3  # |0.4 - 0.3| <= 0.2 -> 0.4, minus 0.1
    sent = prompts(server)[0]
    for piece in ("Original question:\nCapital of France?", "Noisy question:\nCapital of France? I heard Lyon.",
                  "Noise type: misinformation", "Baseline answer:\nParis.", "Answer to the noisy question:\nLyon."):
        assert piece in sent


async def test_noise_sensitivity_rejects_an_out_of_range_judge_score(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Compare the answer": {"robustness_score": 7}})
    scorer = noise_sensitivity(judge, baseline_response="b", noisy_query="n")
    with pytest.raises(ScorerRunError) as caught:
        await scorer.run(input="q", output="a")
    assert caught.value.failed_step == "analyze"


def test_noise_sensitivity_requires_baseline_and_query() -> None:
    with pytest.raises(ScorerDefinitionError, match="Both baseline_response and noisy_query are required"):
        noise_sensitivity("openai/gpt-4o-mini", baseline_response="", noisy_query="q")
