"""LLM-judged pass / fail checks: rubric and multi-turn judge."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from scorers._builder import Scorer
from scorers._run import not_scorable
from scorers._text import output_messages
from scorers.builtin._common import JudgeOption, answer_text, numbered, user_text
from scorers.builtin._llm_common import JudgeSchema, builder, prompt
from scorers.errors import ScorerDefinitionError

RubricOption = str | Sequence[Any] | None
_MARKER = re.compile(r"^\s*(?:[-*•+]|\d+[.)]|\[[ xX]?\])\s*")


class Criterion(JudgeSchema):
    """One rubric criterion; when no criterion is required, all are."""

    criterion: str
    required: bool = False


class Rubric(JudgeSchema):
    """The rubric of one run (the preprocess step result of `rubric`)."""

    criteria: list[Criterion]


def parse_rubric(value: Any) -> list[Criterion]:
    """Criteria from a checklist string (one per line, list markers stripped), a list of
    strings, or a list of ``{"criterion" (or "description"), "required"}`` dicts.

    Raises:
        ScorerDefinitionError: an unusable rubric.

    Example:
        >>> [c.criterion for c in parse_rubric("- Greets the user\\n2. Gives a price\\n\\n[ ] Signs off")]
        ['Greets the user', 'Gives a price', 'Signs off']
    """
    if isinstance(value, str):
        lines = (_MARKER.sub("", line).strip() for line in value.splitlines())
        return [Criterion(criterion=line) for line in lines if line]
    if not isinstance(value, Sequence):
        raise ScorerDefinitionError(f"rubric: criteria must be a string or a list, got {value!r}")
    criteria = []
    for item in value:
        if isinstance(item, Criterion):
            criteria.append(item)
        elif isinstance(item, str) and item.strip():
            criteria.append(Criterion(criterion=item.strip()))
        elif isinstance(item, Mapping) and (item.get("criterion") or item.get("description")):
            text = str(item.get("criterion") or item.get("description"))
            criteria.append(Criterion(criterion=text, required=bool(item.get("required", False))))
        else:
            raise ScorerDefinitionError(f"rubric: a criterion must be a non-empty string or a dict with 'criterion', got {item!r}")
    return criteria


class CriterionResult(JudgeSchema):
    """The judge's verdict on one criterion."""

    criterion: str
    satisfied: bool
    reasoning: str = ""


class RubricAnalysis(JudgeSchema):
    """The judge's verdicts, one per criterion, in order."""

    results: list[CriterionResult] = Field(default_factory=list)


def unmet_required(rubric: Rubric, analysis: RubricAnalysis) -> list[str]:
    """The required criteria the judge did not find satisfied (all criteria are required
    when none is marked; a criterion without a verdict is unmet).

    Example:
        >>> unmet_required(Rubric(criteria=[Criterion(criterion="a"), Criterion(criterion="b")]),
        ...                RubricAnalysis(results=[CriterionResult(criterion="a", satisfied=True)]))
        ['b']
    """
    any_required = any(c.required for c in rubric.criteria)
    verdicts = list(analysis.results)
    return [
        criterion.criterion
        for index, criterion in enumerate(rubric.criteria)
        if (criterion.required or not any_required)
        and (index >= len(verdicts) or not verdicts[index].satisfied)
    ]


def _per_run(run: Any, key: str) -> Any:
    """A per-run rubric setting: ``run.request_context[key]``, else ``run.additional_context[key]``."""
    found = run.request_context.get(key)
    if found is None:
        extra = (run.model_extra or {}).get("additional_context")
        found = extra.get(key) if isinstance(extra, dict) else None
    return found


def rubric(judge: JudgeOption, *, criteria: RubricOption = None, scale: float = 1.0, id: str = "rubric") -> Scorer[Any, Any]:
    """Pass / fail against a rubric (Mastra's rubric scorer): ``scale`` when every required
    criterion is met, else 0.

    The rubric is the run's ``"rubric"`` when set (per run: in ``run.request_context``, else
    in the run's extra field ``additional_context``, as Mastra's rubric reads
    ``additionalContext``), else ``criteria`` (see `parse_rubric`). The text judged is the
    run's ``"current_text"`` (same places) when set, else the answer; the task is the user's message. Steps: preprocess (code) resolves
    the rubric (`Rubric`); analyze (judge) decides each criterion; score as above;
    generate_reason (code) lists the unmet criteria. A run with no rubric is not scorable
    (Mastra scores it 1, a pass that checked nothing).

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        criteria: the static rubric (see `parse_rubric`); None to rely on per-run rubrics.
        scale: the score of a pass.
        id: the scorer id.

    Example:
        >>> rubric("openai/gpt-4o-mini", criteria="- Mentions the price\\n- Is polite").id
        'rubric'
    """
    static = parse_rubric(criteria) if criteria is not None else None

    def resolve(run: Any) -> Any:
        per_run = _per_run(run, "rubric")
        found = parse_rubric(per_run) if per_run is not None else static
        return Rubric(criteria=found) if found else not_scorable("no rubric")

    def judge_criteria(run: Any, results: Any) -> str:
        text = _per_run(run, "current_text") or answer_text(run.output)
        return (
            "Decide for each criterion, in order, whether the response satisfies it (true or "
            'false), with a short reasoning. Return {"results": [{"criterion": ..., "satisfied": '
            '..., "reasoning": ...}]}, one per criterion.\n\n'
            f"Task:\n{user_text(run.input)}\n\nResponse:\n{text}\n\n"
            f"Criteria:\n{numbered([c.criterion for c in results.preprocess_step_result.criteria])}"
        )

    def score(results: Any) -> float:
        return 0.0 if unmet_required(results.preprocess_step_result, results.analyze_step_result) else scale

    def reason(results: Any) -> str:
        unmet = unmet_required(results.preprocess_step_result, results.analyze_step_result)
        return "Unmet criteria: " + "; ".join(unmet) if unmet else "All required criteria are met."

    return (
        builder(id, "Rubric", "Whether the response meets every required rubric criterion", judge,
                "You are a strict grader: you check a response against each rubric criterion literally.", scale)
        .preprocess(resolve)
        .analyze(prompt("Decide each rubric criterion", judge_criteria, RubricAnalysis))
        .generate_score(score)
        .generate_reason(reason)
    )  # fmt: skip


class MultiTurnVerdict(JudgeSchema):
    """Whether the whole conversation satisfies the criterion."""

    satisfied: bool
    reasoning: str = ""


def transcript(run: Any) -> str:
    """The conversation as ``role: text`` lines: remembered and input messages, then the
    output's user and assistant messages with text (tool traffic left out).

    Example:
        >>> from scorers.utils import make_agent_run
        >>> print(transcript(make_agent_run("Hi", "Hello!")))
        user: Hi
        assistant: Hello!
    """
    run_input = run.input
    messages = [*getattr(run_input, "remembered_messages", []), *getattr(run_input, "input_messages", [])]
    messages += output_messages(run.output)
    return "\n".join(f"{m.role}: {m.content}" for m in messages if m.role in ("user", "assistant") and m.content)


def multi_turn_judge(judge: JudgeOption, *, criterion: str, id: str = "multi-turn-judge") -> Scorer[Any, Any]:
    """Whether a whole conversation satisfies one criterion: 1 or 0 (Mastra's multi-turn judge).

    The conversation (`transcript`) holds the remembered history, this turn's input and
    every assistant turn of the output. Steps: analyze (judge) answers ``satisfied`` with
    a reasoning (`MultiTurnVerdict`); score 1 when satisfied, else 0; generate_reason
    (code) is the judge's reasoning. A run without any assistant text is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        criterion: what the conversation must satisfy.
        id: the scorer id.

    Raises:
        ScorerDefinitionError: an empty criterion.

    Example:
        >>> multi_turn_judge("openai/gpt-4o-mini", criterion="The agent never repeats a question").id
        'multi-turn-judge'
    """
    if not isinstance(criterion, str) or not criterion.strip():
        raise ScorerDefinitionError("multi_turn_judge: criterion must be a non-empty string")

    def judge_conversation(run: Any) -> Any:
        if not any(m.role == "assistant" and m.content for m in output_messages(run.output)):
            return not_scorable("the run has no assistant turn")
        return (
            "Judge the whole conversation against the criterion: is it satisfied across all the "
            'assistant turns? Return {"satisfied": true or false, "reasoning": "..."}.\n\n'
            f"Criterion:\n{criterion}\n\nConversation:\n{transcript(run)}"
        )

    return (
        builder(id, "Multi-turn Judge", f"Whether the conversation satisfies: {criterion}", judge,
                "You are a careful conversation evaluator: you judge a whole multi-turn conversation against one criterion.")
        .analyze(prompt("Judge the conversation against the criterion", judge_conversation, MultiTurnVerdict))
        .generate_score(lambda results: 1.0 if results.analyze_step_result.satisfied else 0.0)
        .generate_reason(lambda results: results.analyze_step_result.reasoning)
    )  # fmt: skip
