"""LLM-judged retrieval quality and robustness: context precision, context relevance,
noise sensitivity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from scorers._builder import Scorer
from scorers._run import not_scorable
from scorers.builtin._common import JudgeOption, answer_text, numbered, user_text
from scorers.builtin._llm_common import (
    ContextExtractor,
    ContextOption,
    JudgeSchema,
    builder,
    check_context,
    prompt,
    reason_prompt,
    run_context,
    scaled,
)
from scorers.errors import ScorerDefinitionError


class ContextVerdict(JudgeSchema):
    """Whether one context piece (by its 0-based index) was useful for the answer."""

    context_index: int
    verdict: Literal["yes", "no"]
    reason: str = ""


class ContextVerdicts(JudgeSchema):
    """The judge's per-piece usefulness verdicts."""

    verdicts: list[ContextVerdict] = Field(default_factory=list)


def mean_average_precision(relevant: Sequence[bool]) -> float:
    """Average of precision@k over the relevant positions k (0 when none is relevant).

    Example:
        >>> round(mean_average_precision([True, False, True]), 4)  # (1/1 + 2/3) / 2
        0.8333
    """
    hits, total = 0, 0.0
    for position, is_relevant in enumerate(relevant, 1):
        if is_relevant:
            hits += 1
            total += hits / position
    return total / hits if hits else 0.0


def _needs_context(context: ContextOption, extractor: ContextExtractor | None, name: str, message: str) -> list[str] | None:
    if context is None and extractor is None:
        raise ScorerDefinitionError(message)
    return check_context(context, extractor, name)


def _context_prompt(run: Any, context: list[str], request: str) -> str:
    return (
        f"{request}\n\nQuestion:\n{user_text(run.input)}\n\nAnswer:\n{answer_text(run.output)}\n\n"
        "Context pieces (index. text):\n" + "\n".join(f"{i}. {c}" for i, c in enumerate(context))
    )


def context_precision(
    judge: JudgeOption,
    *,
    context: ContextOption = None,
    context_extractor: ContextExtractor | None = None,
    scale: float = 1.0,
    id: str = "context-precision",
) -> Scorer[Any, Any]:
    """Whether the useful context pieces come first (Mastra's context precision).

    Steps: analyze (judge) gives each context piece a yes / no verdict: was it useful for
    answering the question; verdicts are sorted by ``context_index`` and score = mean
    average precision over the useful positions (`mean_average_precision`) times
    ``scale``, rounded: higher is better; no useful piece gives 0. A run whose context is
    empty (from ``context_extractor``) is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        context: fixed context pieces, in retrieval order (non-empty).
        context_extractor: ``run -> list of pieces`` (wins over ``context``).
        scale: the score when every useful piece comes first.
        id: the scorer id.

    Raises:
        ScorerDefinitionError: ``"Context is required for Context Precision scoring"``
            without ``context`` or ``context_extractor``; an empty ``context``.

    Example:
        >>> context_precision("openai/gpt-4o-mini", context=["Paris is in France.", "Cats purr."]).id
        'context-precision'
    """
    static = _needs_context(context, context_extractor, "Context Precision",
                            "Context is required for Context Precision scoring")  # fmt: skip

    def judge_pieces(run: Any) -> Any:
        pieces = run_context(run, static, context_extractor)
        if not pieces:
            return not_scorable("the run has no context")
        return _context_prompt(run, pieces, (
            "Judge each context piece: was it useful to answer the question (does it hold "
            'information the answer needs)? One verdict per piece, "yes" or "no", with its '
            'context_index and a short reason. Return {"verdicts": [{"context_index": ..., '
            '"verdict": ..., "reason": ...}]}.'
        ))  # fmt: skip

    def score(results: Any) -> float:
        ordered = sorted(results.analyze_step_result.verdicts, key=lambda v: v.context_index)
        return scaled(mean_average_precision([v.verdict == "yes" for v in ordered]), scale)

    def reason(results: Any, score: float) -> str:
        lines = "\n".join(f"- piece {v.context_index}: {v.verdict} ({v.reason})" for v in results.analyze_step_result.verdicts)
        return reason_prompt("context precision", scale, f"Score: {score}\nVerdicts:\n{lines or '(none)'}")

    return (
        builder(id, "Context Precision", "Whether the useful context pieces are ranked first", judge,
                "You are a precise retrieval evaluator: you judge which context pieces are useful to answer a question.", scale)
        .analyze(prompt("Judge each context piece's usefulness", judge_pieces, ContextVerdicts))
        .generate_score(score)
        .generate_reason(prompt("Explain the context precision score", reason))
    )  # fmt: skip


class ContextEvaluation(JudgeSchema):
    """The judge's view of one context piece: how relevant, and whether the answer used it."""

    context_index: int
    relevance_level: Literal["high", "medium", "low", "none"]
    was_used: bool
    reasoning: str = ""


class ContextRelevanceAnalysis(JudgeSchema):
    """The judge's evaluation of every context piece and what context was missing."""

    evaluations: list[ContextEvaluation] = Field(default_factory=list)
    missing_context: list[str] = Field(default_factory=list)
    overall_assessment: str = ""


RELEVANCE_WEIGHTS: Mapping[str, float] = {"high": 1.0, "medium": 0.7, "low": 0.3, "none": 0.0}


def context_relevance_score(
    analysis: ContextRelevanceAnalysis, *, unused_high_penalty: float = 0.1,
    missing_penalty: float = 0.15, max_missing_penalty: float = 0.5,
) -> float:  # fmt: skip
    """Mastra's context-relevance arithmetic (0-1, before scaling).

    Mean relevance weight (high 1, medium 0.7, low 0.3, none 0), minus
    ``unused_high_penalty`` per highly relevant piece the answer did not use, minus
    min(``missing_penalty`` per missing item, ``max_missing_penalty``), floored at 0. No
    evaluations: 0 when context was missing, else 1.

    Example:
        >>> round(context_relevance_score(ContextRelevanceAnalysis(evaluations=[
        ...     ContextEvaluation(context_index=0, relevance_level="high", was_used=False),
        ...     ContextEvaluation(context_index=1, relevance_level="low", was_used=True)])), 4)
        0.55
    """
    if not analysis.evaluations:
        return 0.0 if analysis.missing_context else 1.0
    mean = sum(RELEVANCE_WEIGHTS[e.relevance_level] for e in analysis.evaluations) / len(analysis.evaluations)
    unused = sum(1 for e in analysis.evaluations if e.relevance_level == "high" and not e.was_used)
    missing = min(len(analysis.missing_context) * missing_penalty, max_missing_penalty)
    return max(0.0, mean - unused * unused_high_penalty - missing)


def context_relevance(
    judge: JudgeOption,
    *,
    context: ContextOption = None,
    context_extractor: ContextExtractor | None = None,
    scale: float = 1.0,
    id: str = "context-relevance",
) -> Scorer[Any, Any]:
    """How relevant the provided context is, and whether the answer used it (Mastra's
    context relevance).

    Steps: analyze (judge) rates each piece's relevance (high, medium, low, none) and
    whether the answer used it, and lists missing context; score =
    `context_relevance_score` times ``scale``, rounded: higher is better. A run whose
    context is empty is not scorable (Mastra raises "No context available for evaluation").

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        context: fixed context pieces (non-empty).
        context_extractor: ``run -> list of pieces`` (wins over ``context``).
        scale: the score of fully relevant, fully used context.
        id: the scorer id.

    Raises:
        ScorerDefinitionError: ``"Either context or context_extractor is required for
            Context Relevance scoring"``; an empty ``context``.

    Example:
        >>> context_relevance("openai/gpt-4o-mini", context_extractor=lambda run: ["doc"]).id
        'context-relevance'
    """
    static = _needs_context(context, context_extractor, "Context Relevance",
                            "Either context or context_extractor is required for Context Relevance scoring")  # fmt: skip

    def evaluate(run: Any) -> Any:
        pieces = run_context(run, static, context_extractor)
        if not pieces:
            return not_scorable("the run has no context")
        return _context_prompt(run, pieces, (
            "Evaluate each context piece: its relevance_level to the question (\"high\", "
            '"medium", "low" or "none") and was_used (did the answer use it). List in '
            "missing_context the information the question needed that no piece holds. Return "
            '{"evaluations": [{"context_index": ..., "relevance_level": ..., "was_used": ..., '
            '"reasoning": ...}], "missing_context": [...], "overall_assessment": "..."}.'
        ))  # fmt: skip

    def reason(results: Any, score: float) -> str:
        a = results.analyze_step_result
        lines = "\n".join(f"- piece {e.context_index}: {e.relevance_level}, used={e.was_used}" for e in a.evaluations)
        return reason_prompt("context relevance", scale,
                             f"Score: {score}\nEvaluations:\n{lines or '(none)'}\nMissing context: {numbered(a.missing_context)}")

    return (
        builder(id, "Context Relevance", "How relevant the context is and whether the answer used it", judge,
                "You are a precise retrieval evaluator: you judge how relevant each context piece is to a question.", scale)
        .analyze(prompt("Evaluate each context piece's relevance and use", evaluate, ContextRelevanceAnalysis))
        .generate_score(lambda results: scaled(context_relevance_score(results.analyze_step_result), scale))
        .generate_reason(prompt("Explain the context relevance score", reason))
    )  # fmt: skip


class ImpactDimension(JudgeSchema):
    """How much the noise changed one dimension of the answer."""

    dimension: str
    impact_level: Literal["none", "minimal", "moderate", "significant", "severe"]
    specific_changes: str = ""


class NoiseAnalysis(JudgeSchema):
    """The judge's comparison of the noisy answer with the baseline answer."""

    dimensions: list[ImpactDimension] = Field(default_factory=list)
    major_issues: list[str] = Field(default_factory=list)
    robustness_score: float = Field(ge=0, le=1)
    overall_assessment: str = ""


IMPACT_WEIGHTS: Mapping[str, float] = {"none": 1.0, "minimal": 0.85, "moderate": 0.6, "significant": 0.3, "severe": 0.1}


def noise_score(analysis: NoiseAnalysis, *, discrepancy_threshold: float = 0.2,
                major_issue_penalty: float = 0.1, max_major_issue_penalty: float = 0.3) -> float:  # fmt: skip
    """Mastra's noise-sensitivity arithmetic (0-1, before scaling).

    The mean impact weight of the dimensions (none 1, minimal 0.85, moderate 0.6,
    significant 0.3, severe 0.1; the judge's ``robustness_score`` when there are no
    dimensions); when it differs from the judge's score by more than
    ``discrepancy_threshold``, the lower of the two is used, else the judge's; minus
    min(``major_issue_penalty`` per major issue, ``max_major_issue_penalty``); clamped to 0-1.

    Example:
        >>> noise_score(NoiseAnalysis(robustness_score=0.9, major_issues=["x"], dimensions=[
        ...     ImpactDimension(dimension="accuracy", impact_level="severe")]))
        0.0
    """
    judged = analysis.robustness_score
    if analysis.dimensions:
        mean = sum(IMPACT_WEIGHTS[d.impact_level] for d in analysis.dimensions) / len(analysis.dimensions)
        value = min(judged, mean) if abs(judged - mean) > discrepancy_threshold else judged
    else:
        value = judged
    value -= min(len(analysis.major_issues) * major_issue_penalty, max_major_issue_penalty)
    return min(1.0, max(0.0, value))


def noise_sensitivity(
    judge: JudgeOption,
    *,
    baseline_response: str,
    noisy_query: str,
    noise_type: str | None = None,
    scale: float = 1.0,
    id: str = "noise-sensitivity",
) -> Scorer[Any, Any]:
    """How robust the agent is to noise in the question (Mastra's noise sensitivity).

    The run is the agent answering ``noisy_query`` (a version of the original question
    with misinformation, distractors or typos); ``baseline_response`` is its answer to the
    clean question. Steps: analyze (judge) compares the two answers per dimension
    (content accuracy, completeness, relevance, consistency...), lists major issues and
    gives a robustness score; score = `noise_score` times ``scale``, rounded: higher is
    more robust. A run without an answer is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        baseline_response: the agent's answer to the clean question.
        noisy_query: the noisy question the run answered.
        noise_type: what kind of noise it is (misinformation, distractor, typos...).
        scale: the score of an unaffected answer.
        id: the scorer id.

    Raises:
        ScorerDefinitionError: a missing ``baseline_response`` or ``noisy_query``.

    Example:
        >>> noise_sensitivity("openai/gpt-4o-mini", baseline_response="Paris.",
        ...                   noisy_query="What is the capital of France? (I heard it is Lyon)").id
        'noise-sensitivity'
    """
    if not baseline_response or not noisy_query:
        raise ScorerDefinitionError("Both baseline_response and noisy_query are required for Noise Sensitivity scoring")

    def compare(run: Any) -> Any:
        answer = answer_text(run.output)
        if not answer.strip():
            return not_scorable("the run has no answer text")
        return (
            "Compare the answer to a noisy question with the baseline answer to the original "
            "question. For each dimension (content accuracy, completeness, relevance, "
            'consistency, hallucination), give the impact_level of the noise ("none", "minimal", '
            '"moderate", "significant", "severe") and the specific changes; list major issues; '
            "give a robustness_score from 0 (derailed) to 1 (unaffected). Return "
            '{"dimensions": [{"dimension": ..., "impact_level": ..., "specific_changes": ...}], '
            '"major_issues": [...], "robustness_score": ..., "overall_assessment": "..."}.\n\n'
            f"Original question:\n{user_text(run.input)}\n\nNoisy question:\n{noisy_query}\n\n"
            f"Noise type: {noise_type or 'unspecified'}\n\nBaseline answer:\n{baseline_response}\n\n"
            f"Answer to the noisy question:\n{answer}"
        )

    def reason(results: Any, score: float) -> str:
        a = results.analyze_step_result
        lines = "\n".join(f"- {d.dimension}: {d.impact_level}" for d in a.dimensions)
        return reason_prompt("noise robustness", scale,
                             f"Score: {score}\nDimensions:\n{lines or '(none)'}\nMajor issues: {numbered(a.major_issues)}")

    return (
        builder(id, "Noise Sensitivity", "How robust the answer is to noise in the question", judge,
                "You are a careful robustness evaluator: you compare how an agent answers a clean and a noisy question.", scale)
        .analyze(prompt("Compare the noisy answer with the baseline", compare, NoiseAnalysis))
        .generate_score(lambda results: scaled(noise_score(results.analyze_step_result), scale))
        .generate_reason(prompt("Explain the robustness score", reason))
    )  # fmt: skip
