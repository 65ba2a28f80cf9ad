"""LLM-judged summarization: alignment (is the summary right) and coverage (is it complete)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field

from scorers._builder import Scorer
from scorers._run import not_scorable
from scorers.builtin._common import JudgeOption, answer_text, input_text
from scorers.builtin._llm_common import (
    JudgeSchema,
    Verdicts,
    builder,
    bullet,
    count,
    prompt,
    scaled,
)
from scorers.errors import ScorerDefinitionError
from scorers.utils import round_to_two_decimals

SourceExtractor = Callable[[Any], str]


class SummaryPlan(JudgeSchema):
    """The summary's claims and closed questions about the source (preprocess result)."""

    claims: list[str] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list)


def summarization_score(plan: SummaryPlan, answers: Verdicts, alignment: Verdicts) -> tuple[float, float, float]:
    """``(score, alignment, coverage)``: alignment = supported claims / claims, coverage =
    questions the summary answers "yes" / questions; score = min of the two. No claims or
    no questions gives 0 for that part.

    Example:
        >>> from scorers.builtin._llm_common import Verdict
        >>> plan = SummaryPlan(claims=["a", "b"], questions=["q1", "q2", "q3", "q4"])
        >>> summarization_score(plan, Verdicts(verdicts=[Verdict(verdict="yes")] * 3 + [Verdict(verdict="no")]),
        ...                     Verdicts(verdicts=[Verdict(verdict="yes"), Verdict(verdict="no")]))
        (0.5, 0.5, 0.75)
    """
    aligned = count(alignment.verdicts, "yes") / len(plan.claims) if plan.claims else 0.0
    covered = count(answers.verdicts, "yes") / len(plan.questions) if plan.questions else 0.0
    aligned, covered = min(aligned, 1.0), min(covered, 1.0)
    return min(aligned, covered), aligned, covered


def summarization(
    judge: JudgeOption,
    *,
    source: str | None = None,
    source_extractor: SourceExtractor | None = None,
    max_questions: int = 10,
    scale: float = 1.0,
    id: str = "summarization",
) -> Scorer[Any, Any]:
    """How good a summary is (Mastra's summarization): min(alignment, coverage).

    The summary is the answer (the last assistant text); the source is
    ``source_extractor(run)``, else ``source``, else the input text. Steps: preprocess
    (judge, sees both) extracts the summary's claims and up to ``max_questions`` closed
    questions the source answers "yes" (`SummaryPlan`); analyze (judge) answers the
    questions from the summary alone, without the source ("yes" / "no" / "unsure": the
    coverage); generate_score (judge) checks each claim against the source (the
    alignment) and computes `summarization_score` times ``scale``, rounded: higher is
    better; generate_reason (code) states both parts. A run without a summary or a source
    is not scorable (Mastra scores 0).

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        source: a fixed source text.
        source_extractor: ``run -> source text`` (wins over ``source``).
        max_questions: the most coverage questions the judge may ask.
        scale: the score of a perfect summary.
        id: the scorer id.

    Raises:
        ScorerDefinitionError: ``max_questions`` below 1; a non-callable extractor.

    Example:
        >>> summarization("openai/gpt-4o-mini", max_questions=5).id
        'summarization'
    """
    if isinstance(max_questions, bool) or not isinstance(max_questions, int) or max_questions < 1:
        raise ScorerDefinitionError(f"summarization: max_questions must be a positive integer, got {max_questions!r}")
    if source_extractor is not None and not callable(source_extractor):
        raise ScorerDefinitionError("summarization: source_extractor must be callable")

    def source_of(run: Any) -> str:
        if source_extractor is not None:
            return str(source_extractor(run) or "")
        return source if source is not None else input_text(run.input, "\n")

    def plan(run: Any) -> Any:
        summary, text = answer_text(run.output), source_of(run)
        if not summary.strip():
            return not_scorable("the run has no summary")
        if not text.strip():
            return not_scorable("the run has no source text")
        return (
            "Prepare the evaluation of a summary. 1) claims: every factual statement the summary "
            f"makes. 2) questions: up to {max_questions} closed questions about the most important "
            'facts of the source, each answered "yes" by the source. Return {"claims": [...], '
            f'"questions": [...]}}.\n\nSource:\n{text}\n\nSummary:\n{summary}'
        )

    def answer_questions(run: Any, results: Any) -> str:
        return (
            "Answer each question using only the summary below (not your own knowledge): "
            '"yes" when the summary says so, "no" when it says otherwise, "unsure" when it does '
            'not say. One verdict per question, in order. Return {"verdicts": [{"verdict": ..., '
            f'"reason": ...}}]}}.\n\nSummary:\n{answer_text(run.output)}\n\n'
            f"Questions:\n{bullet(results.preprocess_step_result.questions)}"
        )

    def check_claims(run: Any, results: Any) -> str:
        return (
            "Check each claim of a summary against the source: \"yes\" when the source supports "
            'it, "no" when it contradicts it, "unsure" when the source does not say. One verdict '
            'per claim, in order. Return {"verdicts": [{"verdict": ..., "reason": ...}]}.\n\n'
            f"Source:\n{source_of(run)}\n\nClaims:\n{bullet(results.preprocess_step_result.claims)}"
        )

    def calculate(results: Any, judge_output: Any) -> float:
        value, _, _ = summarization_score(results.preprocess_step_result, results.analyze_step_result,
                                          Verdicts.model_validate(judge_output))  # fmt: skip
        return scaled(value, scale)

    def reason(results: Any, score: float) -> str:
        plan_result, answers = results.preprocess_step_result, results.analyze_step_result
        covered = count(answers.verdicts, "yes")
        coverage = round_to_two_decimals(covered / len(plan_result.questions)) if plan_result.questions else 0.0
        return (f"The score is {score}, the lower of coverage and alignment: coverage is {coverage} ({covered} of "
                f"{len(plan_result.questions)} questions answered by the summary); alignment is the share of the "
                f"summary's {len(plan_result.claims)} claims the source supports.")  # fmt: skip

    return (
        builder(id, "Summarization", "How faithful and complete the summary is (min of alignment and coverage)", judge,
                "You are a meticulous summary evaluator: you check summaries for factual alignment with the source and for coverage of its key facts.", scale)
        .preprocess(prompt("Extract the summary's claims and questions about the source", plan, SummaryPlan))
        .analyze(prompt("Answer the questions from the summary alone", answer_questions, Verdicts))
        .generate_score(description="Check the claims against the source", create_prompt=check_claims,
                        output_schema=Verdicts, calculate_score=calculate)
        .generate_reason(reason)
    )  # fmt: skip
