"""Running a scorer: type coercion, ``prepare_run``, the four steps in order, the judge.

Every failure inside ``run()`` surfaces as one `ScorerRunError` (message
"Scorer Run Failed: <cause>", cause chained), including a failing ``prepare_run``
(``failed_step="prepare_run"``; Mastra lets that one propagate raw) and a run input or
output that does not validate against the scorer's types (``failed_step=None``, the cause
is a `ScorerInputError` naming the field). Cancellation is never wrapped.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
from scorers._judge_types import JudgeExecution, JudgeStepRecord, merge_judges
from scorers._run import STEP_ORDER, NotScorable, ScorerResult, ScorerRun, StepResults
from scorers._steps import StepDefinition, format_validation_error
from scorers.errors import JudgeError, ScorerDefinitionError, ScorerInputError, ScorerRunError

if TYPE_CHECKING:
    from scorers._builder import Scorer


class _ScoreOutput(BaseModel):
    """What a prompt-mode generate_score asks the judge for: ``{"score": number}``."""

    score: float


_EMPTY_AGENT_VALUES: dict[Any, Any] = {
    ScorerRunInputForAgent: ScorerRunInputForAgent,
    ScorerRunOutputForAgent: lambda: ScorerRunOutputForAgent([]),
}


def coerce(
    value: Any, adapter: TypeAdapter[Any] | None, target: Any, what: str, scorer_id: str
) -> Any:
    """Validate ``value`` into ``target`` (when the scorer declares a type), or fail clearly."""
    if adapter is None:
        return value
    if isinstance(target, type) and isinstance(value, target):
        return value
    if value is None and target in _EMPTY_AGENT_VALUES:
        return _EMPTY_AGENT_VALUES[target]()
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        type_name = getattr(target, "__name__", str(target))
        raise ScorerInputError(
            f'Scorer "{scorer_id}": {what} is not a valid {type_name}: '
            f"{format_validation_error(exc)}",
            field=what,
        ) from exc


def check_score(value: Any, scorer_id: str) -> float:
    """Return ``value`` as a float if it is a finite real number (not a bool), else raise.

    Example:
        >>> check_score(1, "s")
        1.0
        >>> check_score(True, "s")
        Traceback (most recent call last):
        ...
        TypeError: Scorer "s": generate_score must return a finite real number (int or float), got True (bool)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f'Scorer "{scorer_id}": generate_score must return a finite real number '
            f"(int or float), got {value!r} ({type(value).__name__})"
        )
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(
            f'Scorer "{scorer_id}": generate_score must return a finite real number '
            f"(int or float), got {value!r}"
        )
    return number


@dataclass
class _State:
    """What the steps produced so far (becomes the result, or the partial result on failure)."""

    step_results: dict[str, Any] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)
    judge: dict[str, JudgeStepRecord] = field(default_factory=dict)
    score: float | None = None
    reason: Any = None
    completed: list[str] = field(default_factory=list)

    def results(self) -> StepResults:
        return StepResults(
            preprocess_step_result=self.step_results.get("preprocess"),
            analyze_step_result=self.step_results.get("analyze"),
            generate_score_step_result=self.score,
        )

    def record(self, step: str, execution: JudgeExecution) -> None:
        self.judge.setdefault(step, JudgeStepRecord()).executions.append(execution)

    def to_result(
        self, run: ScorerRun[Any, Any], not_scorable: NotScorable | None
    ) -> ScorerResult[Any, Any]:
        return ScorerResult(
            run_id=run.run_id,
            score=self.score,
            reason=self.reason,
            preprocess_step_result=self.step_results.get("preprocess"),
            analyze_step_result=self.step_results.get("analyze"),
            preprocess_prompt=self.prompts.get("preprocess"),
            analyze_prompt=self.prompts.get("analyze"),
            generate_score_prompt=self.prompts.get("generate_score"),
            generate_reason_prompt=self.prompts.get("generate_reason"),
            input=run.input,
            output=run.output,
            ground_truth=run.ground_truth,
            request_context=run.request_context,
            not_scorable=not_scorable,
            judge=self.judge,
            trace_id=run.trace_id,
            span_id=run.span_id,
        )

    def has_anything(self) -> bool:
        return bool(self.step_results or self.prompts or self.judge or self.completed)


def _coerce_run(scorer: Scorer[Any, Any], run: ScorerRun[Any, Any]) -> ScorerRun[Any, Any]:
    new_input = coerce(run.input, scorer._input_adapter, scorer._input_type, "run.input", scorer.id)
    new_output = coerce(
        run.output, scorer._output_adapter, scorer._output_type, "run.output", scorer.id
    )
    if new_input is run.input and new_output is run.output:
        return run
    return run.model_copy(update={"input": new_input, "output": new_output})


_IDENTITY_FIELDS = ("run_id", "trace_id", "span_id")


def _as_run(value: Any, original: ScorerRun[Any, Any], scorer_id: str) -> ScorerRun[Any, Any]:
    """What prepare_run returned, as a run. A dict replaces the run's fields, except that
    the identity fields it leaves out (run_id, trace_id, span_id) are kept from the run."""
    if isinstance(value, ScorerRun):
        return value
    if isinstance(value, Mapping):
        try:
            new: ScorerRun[Any, Any] = ScorerRun.model_validate(dict(value))
            kept = {
                f: getattr(original, f) for f in _IDENTITY_FIELDS if f not in new.model_fields_set
            }
            return new.model_copy(update=kept) if kept else new
        except ValidationError as exc:
            raise ScorerInputError(
                f'Scorer "{scorer_id}": prepare_run returned an invalid run: '
                f"{format_validation_error(exc)}",
                field="prepare_run",
            ) from exc
    raise TypeError(
        f'Scorer "{scorer_id}": prepare_run must return a ScorerRun (or a dict of its fields), '
        f"got {type(value).__name__}"
    )


async def execute(scorer: Scorer[Any, Any], run: ScorerRun[Any, Any]) -> ScorerResult[Any, Any]:
    """Run ``scorer`` on ``run``; see the module docstring for the error contract."""
    steps = scorer._steps
    if "generate_score" not in steps:
        names = ", ".join(n for n in STEP_ORDER if n in steps) or "none"
        cause = ScorerDefinitionError(
            f'Cannot execute pipeline without generate_score() step (scorer "{scorer.id}", '
            f"steps: {names})"
        )
        raise ScorerRunError(scorer.id, None, [], cause=cause) from cause
    try:
        run = _coerce_run(scorer, run)
    except ScorerInputError as exc:
        raise ScorerRunError(scorer.id, None, [], cause=exc) from exc
    if scorer._prepare_run is not None:
        try:
            prepared = await scorer._prepare_run.call({"run": run})
            run = _coerce_run(scorer, _as_run(prepared, run, scorer.id))
        except Exception as exc:
            raise ScorerRunError(scorer.id, "prepare_run", [], cause=exc) from exc

    state = _State()
    outcome: NotScorable | None = None
    for name in STEP_ORDER:
        step = steps.get(name)
        if step is None:
            continue
        try:
            value = await _run_step(scorer, step, run, state)
        except Exception as exc:
            partial = state.to_result(run, None) if state.has_anything() else None
            raise ScorerRunError(
                scorer.id, name, state.completed, cause=exc, partial_result=partial
            ) from exc
        if isinstance(value, NotScorable):
            outcome = value
            state.score = None
            break
        if name == "generate_score":
            state.score = value
        elif name == "generate_reason":
            state.reason = value
        else:
            state.step_results[name] = value
        state.completed.append(name)
    return state.to_result(run, outcome)


async def _run_step(
    scorer: Scorer[Any, Any], step: StepDefinition, run: ScorerRun[Any, Any], state: _State
) -> Any:
    available = {"run": run, "results": state.results(), "score": state.score}
    if step.function is not None:
        value = await step.function.call(available)
    else:
        value = await _run_prompt_step(scorer, step, available, state)
    if step.name == "generate_score" and not isinstance(value, NotScorable):
        value = check_score(value, scorer.id)
    return value


async def _run_prompt_step(
    scorer: Scorer[Any, Any], step: StepDefinition, available: dict[str, Any], state: _State
) -> Any:
    assert step.prompt is not None and step.create_prompt is not None
    judge = merge_judges(scorer.judge, step.prompt.judge)
    if not judge.model or not judge.instructions:
        raise ScorerDefinitionError(f'Step "{step.name}" requires a model and instructions')
    prompt = await step.create_prompt.call(available)
    if isinstance(prompt, NotScorable):
        return prompt
    if not isinstance(prompt, str):
        raise TypeError(
            f'Step "{step.name}": create_prompt must return the prompt string, '
            f"got {type(prompt).__name__}"
        )
    state.prompts[step.name] = prompt
    try:
        from scorers._judge import execute_judge_call
    except ImportError as exc:
        raise RuntimeError(f"the LLM judge is not available: {exc}") from exc

    schema: Any
    if step.name in ("preprocess", "analyze"):
        schema = step.prompt.output_schema
    elif step.name == "generate_score":
        schema = step.prompt.output_schema or _ScoreOutput
    else:
        schema = None
    try:
        value, execution = await execute_judge_call(judge, prompt, output_schema=schema)
    except JudgeError as exc:
        if exc.execution is not None:
            state.record(step.name, exc.execution)
        raise
    state.record(step.name, execution)
    if step.name != "generate_score":
        return value
    if step.calculate_score is None:
        raw = value.get("score") if isinstance(value, Mapping) else getattr(value, "score", value)
    else:
        raw = await step.calculate_score.call({**available, "judge_output": value})
        if isinstance(raw, NotScorable):
            return raw
    score = check_score(raw, scorer.id)
    state.judge[step.name].executions[-1] = execution.model_copy(update={"output": score})
    return score
