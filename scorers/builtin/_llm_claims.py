"""LLM-judged claims against a context: faithfulness, hallucination, context recall.

The context of a run is, in order: ``context_extractor(run)`` when given, else the static
``context``, else the tool results of the run's output (what the agent looked up). A run
with no context at all is not scorable: there is nothing to check the claims against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scorers._builder import Scorer
from scorers._run import not_scorable
from scorers.builtin._common import JudgeOption, answer_text, tool_results_text, user_text
from scorers.builtin._llm_common import (
    Claims,
    ContextExtractor,
    ContextOption,
    Verdicts,
    builder,
    bullet,
    check_context,
    count,
    prompt,
    reason_prompt,
    scaled,
    verdict_lines,
)


def _context_of(run: Any, context: list[str] | None, extractor: ContextExtractor | None) -> list[str]:
    if extractor is not None:
        return [str(c) for c in extractor(run) or []]
    if context is not None:
        return context
    return tool_results_text(run.output)


def _claims_scorer(
    *, id: str, name: str, description: str, judge: JudgeOption, instructions: str, scale: float,
    context: ContextOption, context_extractor: ContextExtractor | None,
    source: Callable[[Any], tuple[str, str]], verdict_rule: str, score_of: Callable[[Verdicts], float],
    what: str,
) -> Scorer[Any, Any]:  # fmt: skip
    static = check_context(context, context_extractor, name)

    def extract(run: Any) -> Any:
        label, text = source(run)
        if not text.strip():
            return not_scorable(f"the run has no {label.lower()}")
        if not _context_of(run, static, context_extractor):
            return not_scorable("the run has no context")
        return (
            f"Extract the claims of this {label.lower()}: every factual statement it makes, each "
            'self-contained. Leave out questions, greetings and opinions. Return {"claims": [...]}.'
            f"\n\n{label}:\n{text}"
        )

    def verdicts(run: Any, results: Any) -> str:
        return (
            f"Check each claim against the context. {verdict_rule} Give one verdict per claim, in "
            'order, with a short reason. Return {"verdicts": [{"verdict": ..., "reason": ...}]}.\n\n'
            f"Context:\n{bullet(_context_of(run, static, context_extractor))}\n\n"
            f"Claims:\n{bullet(results.preprocess_step_result.claims)}"
        )

    def reason(run: Any, results: Any, score: float) -> str:
        return reason_prompt(what, scale, (
            f"Question: {user_text(run.input)}\nScore: {score}\nVerdicts:\n"
            f"{verdict_lines(results.analyze_step_result.verdicts, results.preprocess_step_result.claims)}"
        ))  # fmt: skip

    return (
        builder(id, name, description, judge, instructions, scale)
        .preprocess(prompt("Extract the claims", extract, Claims))
        .analyze(prompt("Check each claim against the context", verdicts, Verdicts))
        .generate_score(lambda results: scaled(score_of(results.analyze_step_result), scale))
        .generate_reason(prompt(f"Explain the {what} score", reason))
    )


def _share(verdicts: Verdicts, value: str) -> float:
    items = verdicts.verdicts
    return count(items, value) / len(items) if items else 0.0


def faithfulness(
    judge: JudgeOption,
    *,
    context: ContextOption = None,
    context_extractor: ContextExtractor | None = None,
    scale: float = 1.0,
    id: str = "faithfulness",
) -> Scorer[Any, Any]:
    """How much of the answer the context supports (Mastra's faithfulness).

    Steps: preprocess (judge) extracts the answer's claims (`Claims`, an object, where
    Mastra returns a bare list that cannot be stored); analyze (judge) gives each a verdict:
    "yes" supported by the context, "no" contradicted, "unsure" not verifiable; score =
    yes / verdicts times ``scale``, rounded: higher is more faithful; no claims gives 0.
    Context: ``context_extractor(run)``, else ``context``, else the output's tool results.
    A run without an answer or without context is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        context: fixed context passages (non-empty).
        context_extractor: ``run -> list of passages``, per run.
        scale: the score of a fully supported answer.
        id: the scorer id.

    Example:
        >>> faithfulness("openai/gpt-4o-mini", context=["Paris is the capital of France."]).id
        'faithfulness'
    """
    return _claims_scorer(
        id=id, name="Faithfulness", description="Share of the answer's claims supported by the context",
        judge=judge, scale=scale, context=context, context_extractor=context_extractor,
        instructions="You are a precise faithfulness evaluator: you check whether an answer's claims are supported by the given context, and nothing else.",
        source=lambda run: ("Answer", answer_text(run.output)),
        verdict_rule='"yes": the context supports the claim; "no": the context contradicts it; "unsure": the context does not say.',
        score_of=lambda v: _share(v, "yes"), what="faithfulness",
    )  # fmt: skip


def hallucination(
    judge: JudgeOption,
    *,
    context: ContextOption = None,
    context_extractor: ContextExtractor | None = None,
    scale: float = 1.0,
    id: str = "hallucination",
) -> Scorer[Any, Any]:
    """How much of the answer contradicts the context (Mastra's hallucination): lower is better.

    Steps: preprocess (judge) extracts the answer's claims; analyze (judge) gives "yes" to
    a claim that contradicts the context and "no" otherwise; score = yes / verdicts times
    ``scale``, rounded: 0 means no hallucination; no claims gives 0. Context as for
    `faithfulness`. A run without an answer or without context is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        context: fixed context passages (non-empty).
        context_extractor: ``run -> list of passages`` (Mastra's ``getContext``).
        scale: the score of a fully hallucinated answer.
        id: the scorer id.

    Example:
        >>> hallucination("openai/gpt-4o-mini", context_extractor=lambda run: [str(run.ground_truth)]).id
        'hallucination'
    """
    return _claims_scorer(
        id=id, name="Hallucination", description="Share of the answer's claims that contradict the context (lower is better)",
        judge=judge, scale=scale, context=context, context_extractor=context_extractor,
        instructions="You are a precise hallucination detector: you find claims of an answer that contradict the given context.",
        source=lambda run: ("Answer", answer_text(run.output)),
        verdict_rule='"yes": the claim contradicts the context (a hallucination); "no": it does not (it agrees, or the context does not cover it).',
        score_of=lambda v: _share(v, "yes"), what="hallucination",
    )  # fmt: skip


def context_recall(
    judge: JudgeOption,
    *,
    context: ContextOption = None,
    context_extractor: ContextExtractor | None = None,
    scale: float = 1.0,
    id: str = "context-recall",
) -> Scorer[Any, Any]:
    """How much of the ground truth the context holds (Mastra's context recall).

    Steps: preprocess (judge) extracts the claims of ``run.ground_truth``; analyze (judge)
    gives "yes" to a claim attributable to the context, "no" otherwise; score = yes /
    verdicts times ``scale``, rounded: higher means the retrieval found more of what was
    needed; no claims gives 0. Context as for `faithfulness`. A run without ground truth
    (Mastra scores 0) or without context is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        context: fixed context passages (non-empty).
        context_extractor: ``run -> list of passages``.
        scale: the score when every claim is attributable.
        id: the scorer id.

    Example:
        >>> context_recall("openai/gpt-4o-mini", context=["The Eiffel Tower is in Paris."]).id
        'context-recall'
    """
    return _claims_scorer(
        id=id, name="Context Recall", description="Share of the ground truth's claims found in the context",
        judge=judge, scale=scale, context=context, context_extractor=context_extractor,
        instructions="You are a precise context recall evaluator: you check whether each claim of a reference answer can be attributed to the retrieved context.",
        source=lambda run: ("Ground truth", "" if run.ground_truth is None else str(run.ground_truth)),
        verdict_rule='"yes": the claim can be attributed to the context; "no": it cannot.',
        score_of=lambda v: _share(v, "yes"), what="context recall",
    )  # fmt: skip
