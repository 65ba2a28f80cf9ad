"""LLM-judged answer quality: answer relevancy and answer similarity."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from scorers._builder import Scorer
from scorers._run import not_scorable
from scorers.builtin._common import JudgeOption, answer_text, user_text
from scorers.builtin._llm_common import (
    JudgeSchema,
    Statements,
    Verdicts,
    builder,
    bullet,
    count,
    prompt,
    reason_prompt,
    scaled,
    verdict_lines,
)
from scorers.errors import ScorerDefinitionError, ScorerInputError

RELEVANCY_INSTRUCTIONS = (
    "You are a balanced and nuanced answer relevancy evaluator. You judge whether each "
    "statement of an answer addresses the user's question, directly or as useful context."
)


def answer_relevancy(
    judge: JudgeOption,
    *,
    uncertainty_weight: float = 0.3,
    scale: float = 1.0,
    id: str = "answer-relevancy",
) -> Scorer[Any, Any]:
    """How relevant the answer is to the user's question (Mastra's answer relevancy).

    Steps: preprocess (judge) extracts the answer's statements (`Statements`); analyze
    (judge) gives each a yes / no / unsure relevance verdict against the question
    (`Verdicts`); score = (yes + uncertainty_weight * unsure) / verdicts, times ``scale``,
    rounded to two decimals (0 when there are no verdicts): higher is more relevant;
    generate_reason (judge) explains the score. A run without an answer is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        uncertainty_weight: how much an "unsure" verdict counts (0-1).
        scale: the score for a fully relevant answer.
        id: the scorer id.

    Example:
        >>> scorer = answer_relevancy("openai/gpt-4o-mini")
        >>> (scorer.id, [s["name"] for s in scorer.get_steps()])
        ('answer-relevancy', ['preprocess', 'analyze', 'generate_score', 'generate_reason'])
    """
    if not 0 <= uncertainty_weight <= 1:
        raise ScorerDefinitionError(f"answer_relevancy: uncertainty_weight must be between 0 and 1, got {uncertainty_weight!r}")

    def extract(run: Any) -> Any:
        answer = answer_text(run.output)
        if not answer.strip():
            return not_scorable("the run has no answer text")
        return (
            "Extract the statements of this answer: break it into self-contained, meaningful "
            "statements that keep their context (each a sentence or a clause). Return "
            '{"statements": [...]}; an answer with no content gives an empty list.\n\n'
            f"Answer:\n{answer}"
        )

    def judge_statements(run: Any, results: Any) -> str:
        statements = results.preprocess_step_result.statements
        return (
            "Judge the relevance of each statement to the question. For each statement, in "
            'order, give a verdict: "yes" (it addresses the question or gives needed context), '
            '"no" (off topic), or "unsure" (partly or tangentially relevant), with a short '
            'reason. Return {"verdicts": [{"verdict": ..., "reason": ...}]}, one per statement.\n\n'
            f"Question:\n{user_text(run.input)}\n\nStatements:\n{bullet(statements)}"
        )

    def score(results: Any) -> float:
        verdicts = results.analyze_step_result.verdicts
        if not verdicts:
            return 0.0
        relevant = count(verdicts, "yes") + uncertainty_weight * count(verdicts, "unsure")
        return scaled(relevant / len(verdicts), scale)

    def reason(run: Any, results: Any, score: float) -> str:
        return reason_prompt("answer relevancy", scale, (
            f"Question: {user_text(run.input)}\nAnswer: {answer_text(run.output)}\nScore: {score}\n"
            f"Verdicts:\n{verdict_lines(results.analyze_step_result.verdicts, results.preprocess_step_result.statements)}"
        ))  # fmt: skip

    return (
        builder(id, "Answer Relevancy", "How relevant the answer is to the question", judge, RELEVANCY_INSTRUCTIONS, scale)
        .preprocess(prompt("Extract the answer's statements", extract, Statements))
        .analyze(prompt("Judge each statement's relevance to the question", judge_statements, Verdicts))
        .generate_score(score)
        .generate_reason(prompt("Explain the relevancy score", reason))
    )


class SemanticUnits(JudgeSchema):
    """The answer and the ground truth split into semantic units."""

    output_units: list[str] = Field(default_factory=list)
    ground_truth_units: list[str] = Field(default_factory=list)


class UnitMatch(JudgeSchema):
    """How one ground-truth unit appears in the answer."""

    ground_truth_unit: str
    output_unit: str | None = None
    match_type: Literal["exact", "semantic", "partial", "missing"]
    explanation: str = ""


class Contradiction(JudgeSchema):
    """An answer unit that contradicts a ground-truth unit."""

    output_unit: str
    ground_truth_unit: str
    explanation: str = ""


class SimilarityAnalysis(JudgeSchema):
    """The judge's comparison of the answer with the ground truth."""

    matches: list[UnitMatch] = Field(default_factory=list)
    extra_in_output: list[str] = Field(default_factory=list)
    contradictions: list[Contradiction] = Field(default_factory=list)


SIMILARITY_INSTRUCTIONS = (
    "You are a precise answer similarity evaluator. You compare an answer with a reference "
    "(ground truth) answer unit by unit: facts, claims and key pieces of information."
)


def similarity_score(
    analysis: SimilarityAnalysis,
    *,
    exact_match_bonus: float = 0.2,
    semantic_weight: float = 0.8,
    partial_weight: float = 0.4,
    missing_penalty: float = 0.15,
    contradiction_penalty: float = 1.0,
    extra_info_penalty: float = 0.05,
    max_extra_penalty: float = 0.2,
) -> float:
    """Mastra's answer-similarity arithmetic (0-1, before scaling).

    Per ground-truth unit: exact 1 + bonus, semantic ``semantic_weight``, partial
    ``partial_weight``, missing ``-missing_penalty``; the sum is divided by units * (1 +
    bonus); then minus contradictions * ``contradiction_penalty`` and min(extra units *
    ``extra_info_penalty``, ``max_extra_penalty``); clamped to 0-1. No units gives 1.

    Example:
        >>> round(similarity_score(SimilarityAnalysis(matches=[
        ...     UnitMatch(ground_truth_unit="a", match_type="exact"),
        ...     UnitMatch(ground_truth_unit="b", match_type="missing")])), 4)  # (1.2 - 0.15) / 2.4
        0.4375
    """
    if not analysis.matches:
        return 1.0
    weights = {"exact": 1 + exact_match_bonus, "semantic": semantic_weight,
               "partial": partial_weight, "missing": -missing_penalty}  # fmt: skip
    total = sum(weights[m.match_type] for m in analysis.matches)
    value = total / (len(analysis.matches) * (1 + exact_match_bonus))
    value -= len(analysis.contradictions) * contradiction_penalty
    value -= min(len(analysis.extra_in_output) * extra_info_penalty, max_extra_penalty)
    return min(1.0, max(0.0, value))


def answer_similarity(
    judge: JudgeOption,
    *,
    require_ground_truth: bool = True,
    exact_match_bonus: float = 0.2,
    semantic_weight: float = 0.8,
    partial_weight: float = 0.4,
    missing_penalty: float = 0.15,
    contradiction_penalty: float = 1.0,
    extra_info_penalty: float = 0.05,
    scale: float = 1.0,
    id: str = "answer-similarity",
) -> Scorer[Any, Any]:
    """How close the answer is to the run's ground truth (Mastra's answer similarity).

    Steps: preprocess (judge) splits the answer and the ground truth into semantic units;
    analyze (judge) matches each ground-truth unit (exact, semantic, partial, missing) and
    lists extra answer units and contradictions; score = `similarity_score` times
    ``scale``, rounded (higher is more similar; no ground-truth units gives ``scale``);
    generate_reason (judge) explains it. The ground truth is ``run.ground_truth`` (a
    string, or any value shown as text).

    A run without ground truth fails the preprocess step with ``"Answer Similarity Scorer
    requires ground truth to be provided"`` (a `ScorerInputError`), or, with
    ``require_ground_truth=False``, is not scorable (Mastra scores it 0, which reads as a
    completely wrong answer).

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        require_ground_truth: fail (True) or skip (False) runs without ground truth.
        exact_match_bonus, semantic_weight, partial_weight, missing_penalty,
            contradiction_penalty, extra_info_penalty: the weights of `similarity_score`.
        scale: the score of an answer equivalent to the ground truth.
        id: the scorer id.

    Example:
        >>> answer_similarity({"model": "openai/gpt-4o-mini"}, contradiction_penalty=0.5).id
        'answer-similarity'
    """
    weights = dict(exact_match_bonus=exact_match_bonus, semantic_weight=semantic_weight,
                   partial_weight=partial_weight, missing_penalty=missing_penalty,
                   contradiction_penalty=contradiction_penalty, extra_info_penalty=extra_info_penalty)  # fmt: skip

    def extract(run: Any) -> Any:
        if run.ground_truth is None or run.ground_truth == "":
            if require_ground_truth:
                raise ScorerInputError("Answer Similarity Scorer requires ground truth to be provided", field="run.ground_truth")
            return not_scorable("the run has no ground truth")
        return (
            "Extract the semantic units (facts, claims, key pieces of information) of the answer "
            'and of the ground truth. Return {"output_units": [...], "ground_truth_units": [...]}.\n\n'
            f"Answer:\n{answer_text(run.output)}\n\nGround truth:\n{run.ground_truth}"
        )

    def compare(results: Any) -> str:
        units = results.preprocess_step_result
        return (
            "Match each ground-truth unit with the answer units: match_type is \"exact\" (same "
            'information, same wording), "semantic" (same meaning, other words), "partial" (some '
            'of it) or "missing". Also list answer units that are not in the ground truth '
            "(extra_in_output) and answer units that contradict a ground-truth unit. Return "
            '{"matches": [{"ground_truth_unit", "output_unit", "match_type", "explanation"}], '
            '"extra_in_output": [...], "contradictions": [{"output_unit", "ground_truth_unit", '
            '"explanation"}]}.\n\n'
            f"Answer units:\n{bullet(units.output_units)}\n\nGround-truth units:\n{bullet(units.ground_truth_units)}"
        )

    def reason(results: Any, score: float) -> str:
        a = results.analyze_step_result
        lines = "\n".join(f"- {m.ground_truth_unit}: {m.match_type}" for m in a.matches)
        return reason_prompt("answer similarity", scale, (
            f"Score: {score}\nMatches:\n{lines or '(none)'}\nExtra in answer: {bullet(a.extra_in_output)}\n"
            f"Contradictions: {bullet([c.output_unit for c in a.contradictions])}"
        ))  # fmt: skip

    return (
        builder(id, "Answer Similarity", "How close the answer is to the ground truth", judge, SIMILARITY_INSTRUCTIONS, scale)
        .preprocess(prompt("Extract semantic units of the answer and the ground truth", extract, SemanticUnits))
        .analyze(prompt("Match the ground-truth units with the answer", compare, SimilarityAnalysis))
        .generate_score(lambda results: scaled(similarity_score(results.analyze_step_result, **weights), scale))
        .generate_reason(prompt("Explain the similarity score", reason))
    )
