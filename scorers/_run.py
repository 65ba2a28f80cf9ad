"""Run-time data of a scorer: `ScorerRun` (what is scored), `StepResults`, `ScorerResult`, `not_scorable`.

Invariants: a `ScorerRun` always has a non-empty ``run_id``, a dict ``request_context`` and an
``additional_context`` extra field (``{}`` when none was given),
and keeps any extra field it is given (Mastra's run object spreads unknown keys through);
a `ScorerResult` has ``score`` None exactly when the run was not scorable (``not_scorable``
set, naming the step) or, in a partial result attached to a `ScorerRunError`, when
generate_score did not complete. Step results are kept exactly as the steps returned them.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from scorers._judge_types import JudgeStepRecord

InT = TypeVar("InT")
OutT = TypeVar("OutT")

StepName = Literal["preprocess", "analyze", "generate_score", "generate_reason"]
STEP_ORDER: tuple[StepName, ...] = ("preprocess", "analyze", "generate_score", "generate_reason")
"""The canonical execution order of the four steps."""


class ScorerRun(BaseModel, Generic[InT, OutT]):
    """One run to score: what the scored system received and produced, plus context.

    ``run_id`` becomes a new UUID4 string when it is missing or empty. Mastra's camelCase
    keys (``runId``, ``groundTruth``, ``requestContext``, ``expectedTrajectory``, and the extra
    ``additionalContext``) are accepted when validating a dict. Like Mastra's run object it keeps extra fields: a run made with
    ``additional_context={...}`` (``scorer.run(..., additional_context=...)``, or a
    ``prepare_run`` that adds it) has ``run.additional_context``, listed in ``run.model_extra``.
    ``additional_context`` is ``{}`` when none (or None) was given, so a step reads it however
    the run was made (``run()``, the daemon, ``tracescore score``) without an AttributeError
    (in Mastra an absent key reads as ``undefined``).
    Annotate step functions with ``run: ScorerRun[MyInput, MyOutput]`` to type ``run.input``.

    Attributes:
        input: what the scored system received (a `ScorerRunInputForAgent` for agent scorers).
        output: what it produced (a `ScorerRunOutputForAgent` for agent scorers).
        run_id: the run's id.
        ground_truth: the reference answer, if any.
        expected_trajectory: the expected trajectory (steps, tool calls), for trajectory scorers.
        request_context: free-form context of the request (service, user, model...).
        trace_id: the trace the run came from (lowercase hex), when it came from a trace.
        span_id: the span that was scored, when it came from a trace.

    Example:
        >>> run = ScorerRun(input="What is 2+2?", output="4")
        >>> (run.input, run.output, len(run.run_id), run.request_context)
        ('What is 2+2?', '4', 36, {})
        >>> ScorerRun.model_validate({"output": "4", "runId": "r1", "groundTruth": "4"}).ground_truth
        '4'
        >>> extra = ScorerRun(output="4", additional_context={"rubric": "- is a number"})
        >>> (extra.additional_context, extra.model_extra)
        ({'rubric': '- is a number'}, {'additional_context': {'rubric': '- is a number'}})
        >>> (ScorerRun(output="4").additional_context, ScorerRun(output="4", additional_context=None).model_extra)
        ({}, {'additional_context': {}})
    """

    model_config = ConfigDict(
        arbitrary_types_allowed=True,
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
    )

    input: InT = None  # type: ignore[assignment]
    output: OutT = None  # type: ignore[assignment]
    run_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    ground_truth: Any = None
    expected_trajectory: Any = None
    request_context: dict[str, Any] = Field(default_factory=dict)
    trace_id: str | None = None
    span_id: str | None = None
    if TYPE_CHECKING:  # for type checkers only: an extra field, {} unless one was given
        additional_context: Any = None

    @model_validator(mode="before")
    @classmethod
    def _additional_context(cls, data: Any) -> Any:
        # Mastra's extra key as runs exported from Mastra spell it, and {} when none was given.
        if not isinstance(data, dict) or data.get("additional_context") is not None:
            return data
        data = dict(data)
        camel = data.pop("additionalContext", None)
        data["additional_context"] = {} if camel is None else camel
        return data

    @field_validator("run_id", mode="before")
    @classmethod
    def _default_run_id(cls, value: Any) -> Any:
        return value if value else str(uuid.uuid4())

    @field_validator("request_context", mode="before")
    @classmethod
    def _default_request_context(cls, value: Any) -> Any:
        return {} if value is None else value


class StepResults(BaseModel):
    """The results of the steps completed so far, as step functions receive them (``results``).

    Attributes:
        preprocess_step_result: what preprocess returned (None when it has not run).
        analyze_step_result: what analyze returned (None when it has not run).
        generate_score_step_result: the score, for generate_reason.

    Example:
        >>> results = StepResults(analyze_step_result={"relevant": True})
        >>> (results.preprocess_step_result, results.analyze_step_result)
        (None, {'relevant': True})
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    preprocess_step_result: Any = None
    analyze_step_result: Any = None
    generate_score_step_result: float | None = None


class NotScorable(BaseModel):
    """Why a run was not scored: the step that declined and its reason; see `not_scorable`.

    A step returns ``not_scorable(reason)`` (``step`` None); the result's ``not_scorable``
    names the step that returned it.

    Attributes:
        step: the step that declined ("preprocess", "analyze", "generate_score",
            "generate_reason"); None on the marker a step returns.
        reason: why, as the step said (None when it gave no reason).

    Example:
        >>> NotScorable(step="preprocess", reason="no tool calls")
        NotScorable(step='preprocess', reason='no tool calls')
    """

    model_config = ConfigDict(frozen=True)

    step: StepName | None = None
    reason: str | None = None


def not_scorable(reason: str | None = None) -> NotScorable:
    """Return this from any step to stop the run without a score.

    The remaining steps are skipped and no further judge call is made; the result has
    ``not_scorable`` set (``NotScorable(step=<the step>, reason=reason)``) and ``score``
    None. The step that returned it has no step result; results of earlier steps are kept.

    Args:
        reason: why the run cannot be scored (kept on the result).

    Example:
        >>> from scorers import create_scorer
        >>> scorer = create_scorer(id="needs-tools", description="Scores tool use").generate_score(
        ...     lambda run: not_scorable("no tool calls") if not run.output else 1.0)
        >>> result = scorer.run_sync(input="hi", output=[])
        >>> (result.score, result.not_scorable)
        (None, NotScorable(step='generate_score', reason='no tool calls'))
    """
    return NotScorable(reason=reason)


class ScorerResult(BaseModel, Generic[InT, OutT]):
    """The outcome of one scorer run.

    Attributes:
        run_id: the run's id.
        score: the score (None when the run was not scorable).
        reason: what generate_reason returned (a string for prompt steps), None without it.
        preprocess_step_result: what preprocess returned, as returned.
        analyze_step_result: what analyze returned, as returned.
        preprocess_prompt: the prompt text of a prompt-mode preprocess (None for functions).
        analyze_prompt: the prompt text of a prompt-mode analyze.
        generate_score_prompt: the prompt text of a prompt-mode generate_score.
        generate_reason_prompt: the prompt text of a prompt-mode generate_reason.
        input: the run's input, after type coercion and ``prepare_run``.
        output: the run's output, after type coercion and ``prepare_run``.
        ground_truth: the run's ground truth.
        expected_trajectory: the run's expected trajectory.
        request_context: the run's request context.
        not_scorable: set when a step returned `not_scorable`: that step and its reason.
        judge: per prompt step name, its judge executions (empty for function-only scorers).
        trace_id: the trace the run came from, if any.
        span_id: the scored span, if any.

    The run's extra fields (``additional_context``...) are kept on the result as extra
    fields too, as Mastra's result spreads the run (a name the result already has is not
    overwritten).

    Example:
        >>> from scorers import create_scorer
        >>> scorer = create_scorer(id="length", description="Long answers score 1").generate_score(
        ...     lambda run: 1.0 if len(run.output) > 10 else 0.0)
        >>> result = scorer.run_sync(input="Tell me a story", output="Once upon a time...")
        >>> (result.score, result.reason, result.judge, result.output)
        (1.0, None, {}, 'Once upon a time...')
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="allow")

    run_id: str
    score: float | None = None
    reason: Any = None
    preprocess_step_result: Any = None
    analyze_step_result: Any = None
    preprocess_prompt: str | None = None
    analyze_prompt: str | None = None
    generate_score_prompt: str | None = None
    generate_reason_prompt: str | None = None
    input: InT = None  # type: ignore[assignment]
    output: OutT = None  # type: ignore[assignment]
    ground_truth: Any = None
    expected_trajectory: Any = None
    request_context: dict[str, Any] = Field(default_factory=dict)
    not_scorable: NotScorable | None = None
    judge: dict[str, JudgeStepRecord] = Field(default_factory=dict)
    trace_id: str | None = None
    span_id: str | None = None
