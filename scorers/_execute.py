"""Running a scorer: type coercion, ``prepare_run``, the four steps in order, the judge.

Every failure inside ``run()`` surfaces as one `ScorerRunError` (message
"Scorer Run Failed: <cause>", cause chained), including a failing ``prepare_run``
(``failed_step="prepare_run"``; Mastra lets that one propagate raw) and a run input or
output that does not validate against the scorer's types (``failed_step=None``, the cause
is a `ScorerInputError` naming the field). Cancellation is never wrapped.

A step's result and prompt are committed to the run's state only when the step completes.
A `ScorerRunError`'s ``partial_result`` is, as Mastra's ``error.result``, the run (input,
output, run_id...) with what completed (step results, prompts, judge executions, the score
if generate_score completed) plus the failed step's judge executions under
``judge[<failed step>]``: the failed call's record (status "failed", its prompt, usage,
``attempt_count``, ``model_call_count`` (0 when no request returned a reply, as in
Mastra), ``request_count``, error; also the chained `JudgeError`'s ``execution``) and any call of that step that succeeded before the step failed. The
failed step's own ``<step>_prompt`` and result stay unset. As in Mastra, a judge call that
failed before its first attempt (an unusable model string, an invalid schema, an input
processor that raised) leaves no execution, and ``partial_result`` is None when no step
completed and the failed step has no judge execution.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
from scorers._conversation import CONVERSATION_FIELDS, ConversationRun, check_run_kind
from scorers._judge_types import Judge, JudgeExecution, JudgeStepRecord, merge_judges
from scorers._run import STEP_ORDER, NotScorable, ScorerResult, ScorerRun, StepResults
from scorers._steps import InjectedCallable, StepDefinition, format_validation_error
from scorers.errors import JudgeError, ScorerDefinitionError, ScorerInputError, ScorerRunError


class Pipeline(Protocol):
    """What `execute` runs: a scorer's id and kind, its judge, how a run's input and output are
    coerced, its ``prepare_run`` and its steps by name. `scorers._builder.Scorer` is one (it
    holds these as its slots); this module needs nothing else of the builder, which imports it.
    """

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str | None: ...
    @property
    def judge(self) -> Judge | None: ...
    @property
    def _steps(self) -> Mapping[str, StepDefinition]: ...
    @property
    def _prepare_run(self) -> InjectedCallable | None: ...
    @property
    def _input_type(self) -> Any: ...
    @property
    def _input_adapter(self) -> TypeAdapter[Any] | None: ...
    @property
    def _output_type(self) -> Any: ...
    @property
    def _output_adapter(self) -> TypeAdapter[Any] | None: ...


def default_score_schema() -> dict[str, Any]:
    """What a prompt-mode generate_score asks the judge for, exactly (SPEC §1.5).

    Example:
        >>> import json
        >>> json.dumps(default_score_schema(), separators=(",", ":"))
        '{"type":"object","properties":{"score":{"type":"number"}},"required":["score"],"additionalProperties":false}'
    """
    return {
        "type": "object",
        "properties": {"score": {"type": "number"}},
        "required": ["score"],
        "additionalProperties": False,
    }


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
    """What the completed steps produced (becomes the result, or the partial result on failure)."""

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

    def commit(self, step: _StepOutcome) -> None:
        """Keep a finished step's prompt and judge executions (whatever its value)."""
        if step.prompt is not None:
            self.prompts[step.name] = step.prompt
        if step.executions:
            self.judge.setdefault(step.name, JudgeStepRecord()).executions.extend(step.executions)

    def partial(self, run: ScorerRun[Any, Any], failed: _StepOutcome) -> ScorerResult[Any, Any] | None:
        """The partial result of a run that failed in step ``failed`` (module docstring).

        Example:
            >>> state = _State(step_results={"preprocess": "pre"}, completed=["preprocess"])
            >>> failed = _StepOutcome("analyze", prompt="Check",
            ...                       executions=[JudgeExecution(status="failed", prompt="Check", model="m")])
            >>> partial = state.partial(ScorerRun(output="o", run_id="r"), failed)
            >>> (partial.run_id, partial.preprocess_step_result, partial.analyze_prompt, list(partial.judge))
            ('r', 'pre', None, ['analyze'])
            >>> _State().partial(ScorerRun(output="o"), _StepOutcome("analyze", prompt="Check")) is None
            True
        """
        if not self.completed and not failed.executions:
            return None
        judge = dict(self.judge)
        if failed.executions:
            judge[failed.name] = JudgeStepRecord(executions=list(failed.executions))
        return self.to_result(run, None, judge=judge)

    def to_result(
        self, run: ScorerRun[Any, Any], not_scorable: NotScorable | None,
        judge: dict[str, JudgeStepRecord] | None = None,
    ) -> ScorerResult[Any, Any]:
        """The result of the run from what the completed steps produced (``judge``: instead
        of theirs)."""
        fields = _result_fields()
        extra = {k: v for k, v in (run.model_extra or {}).items() if k not in fields}
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
            expected_trajectory=run.expected_trajectory,
            request_context=run.request_context,
            not_scorable=not_scorable,
            judge=self.judge if judge is None else judge,
            trace_id=run.trace_id,
            span_id=run.span_id,
            **extra,
        )


@dataclass
class _StepOutcome:
    """One step's value and what it produced on the way (committed only if it completes)."""

    name: str
    value: Any = None
    prompt: str | None = None
    executions: list[JudgeExecution] = field(default_factory=list)


def _coerce_run(scorer: Pipeline, run: ScorerRun[Any, Any]) -> ScorerRun[Any, Any]:
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
    the identity fields it leaves out (run_id, trace_id, span_id; and a conversation's
    turns, transcript and session fields) are kept from the run."""
    if isinstance(value, ScorerRun):
        return value
    if isinstance(value, Mapping):
        conversation = isinstance(original, ConversationRun)
        cls = ConversationRun if conversation else ScorerRun
        identity = _IDENTITY_FIELDS + (CONVERSATION_FIELDS if conversation else ())
        try:
            new: ScorerRun[Any, Any] = cls.model_validate(dict(value))
            kept = {
                f: getattr(original, f) for f in identity if f not in new.model_fields_set
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


@functools.cache
def _aliases(cls: type[ScorerRun[Any, Any]]) -> dict[str, str]:
    """A run model's camelCase field aliases, to the field names (read once per class)."""
    return {f.alias: name for name, f in cls.model_fields.items() if f.alias and f.alias != name}


@functools.cache
def _result_fields() -> frozenset[str]:
    """`ScorerResult`'s field names (read once)."""
    return frozenset(ScorerResult.model_fields)


def make_run(
    scorer_id: str, input: Any, fields: Mapping[str, Any], extra: Mapping[str, Any],
    conversation: bool = False,
) -> ScorerRun[Any, Any]:
    """The `ScorerRun` of ``scorer.run(input, **fields, **extra)``; ``input`` may be a whole run.

    For a conversation scorer (``conversation``), a list ``input`` is the turns of a
    `ConversationRun` (`ConversationRun.from_turns`, with the other arguments).

    Raises:
        TypeError: a whole run given with other arguments, turns given with an output, or an
            extra keyword that is a field's camelCase alias (``groundTruth=``: use ``ground_truth=``).
        ScorerRunError: the arguments do not make a valid run (the cause names the field).
    """
    if isinstance(input, ScorerRun):
        if any(value is not None for value in fields.values()) or extra:
            raise TypeError("run(): when input is a ScorerRun, give no other argument")
        return input
    turns = conversation and isinstance(input, list | tuple)
    if turns and fields.get("output") is not None:
        raise TypeError("run(): a conversation scorer takes its turns as input; give no output")
    cls = ConversationRun if turns else ScorerRun
    if extra:
        aliases = _aliases(cls)
        for key in extra:
            if key in aliases:
                raise TypeError(f"run() got {key}=; the field is {aliases[key]}=")
    try:
        if turns:
            given = {k: v for k, v in fields.items() if k != "output" and v is not None}
            return ConversationRun.from_turns(input, **given, **extra)
        return ScorerRun(input=input, **{**fields, "run_id": fields.get("run_id") or ""}, **extra)
    except ValidationError as exc:
        text = f'Scorer "{scorer_id}": invalid run: {format_validation_error(exc)}'
        cause = ScorerInputError(text, field="run")
        cause.__cause__ = exc
        raise ScorerRunError(scorer_id, None, [], cause=cause) from cause


async def execute(scorer: Pipeline, run: ScorerRun[Any, Any]) -> ScorerResult[Any, Any]:
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
        check_run_kind(scorer.id, scorer.type, run)
        run = _coerce_run(scorer, run)
    except ScorerInputError as exc:
        raise ScorerRunError(scorer.id, None, [], cause=exc) from exc
    if scorer._prepare_run is not None:
        try:
            prepared = await scorer._prepare_run.call({"run": run})
            run = _as_run(prepared, run, scorer.id)
            check_run_kind(scorer.id, scorer.type, run)
            run = _coerce_run(scorer, run)
        except Exception as exc:
            raise ScorerRunError(scorer.id, "prepare_run", [], cause=exc) from exc

    state = _State()
    for name in STEP_ORDER:
        step = steps.get(name)
        if step is None:
            continue
        outcome = _StepOutcome(name)
        try:
            await _run_step(scorer, step, run, state, outcome)
        except Exception as exc:
            raise ScorerRunError(
                scorer.id, name, state.completed, cause=exc, partial_result=state.partial(run, outcome)
            ) from exc
        state.commit(outcome)
        value = outcome.value
        if isinstance(value, NotScorable):
            state.score = None
            return state.to_result(run, value.model_copy(update={"step": name}))
        if name == "generate_score":
            state.score = value
        elif name == "generate_reason":
            state.reason = value
        else:
            state.step_results[name] = value
        state.completed.append(name)
    return state.to_result(run, None)


async def _run_step(
    scorer: Pipeline, step: StepDefinition, run: ScorerRun[Any, Any], state: _State,
    outcome: _StepOutcome,
) -> None:
    available = {"run": run, "results": state.results(), "score": state.score}
    if step.function is not None:
        value = await step.function.call(available)
    else:
        value = await _run_prompt_step(scorer, step, available, outcome)
    if step.name == "generate_score" and not isinstance(value, NotScorable):
        value = check_score(value, scorer.id)
    outcome.value = value


async def _run_prompt_step(
    scorer: Pipeline, step: StepDefinition, available: dict[str, Any],
    outcome: _StepOutcome,
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
    outcome.prompt = prompt
    try:
        from scorers._judge import execute_judge_call
    except ImportError as exc:
        raise RuntimeError(f"the LLM judge is not available: {exc}") from exc

    schema: Any
    if step.name in ("preprocess", "analyze"):
        schema = step.prompt.output_schema
    elif step.name == "generate_score":
        schema = step.prompt.output_schema or default_score_schema()
    else:
        schema = None
    try:
        value, execution = await execute_judge_call(judge, prompt, output_schema=schema)
    except JudgeError as exc:
        _keep_failed_execution(outcome, exc)
        raise
    outcome.executions.append(execution)
    if step.name != "generate_score":
        return value
    if step.calculate_score is None:
        raw = value.get("score") if isinstance(value, Mapping) else getattr(value, "score", value)
    else:
        raw = await step.calculate_score.call({**available, "judge_output": value})
        if isinstance(raw, NotScorable):
            return raw
    score = check_score(raw, scorer.id)
    outcome.executions[-1] = execution.model_copy(update={"output": score})
    return score


def _keep_failed_execution(outcome: _StepOutcome, error: JudgeError) -> None:
    """Keep a failed judge call's record with its step's executions, for the partial result.

    Only a call that made an attempt has one to keep, as in Mastra: a failure before the
    first attempt (the model string cannot be used, the schema is invalid, an input
    processor raised) records ``attempt_count`` 0 and is left on the `JudgeError` alone.
    """
    execution = error.execution
    if execution is not None and execution.attempt_count >= 1:
        outcome.executions.append(execution)
