"""Step definitions: function steps, prompt steps (`PromptStep`) and keyword injection.

Every user callable (step functions, ``create_prompt``, ``calculate_score``) is inspected
once, when the step is defined: we record which of the injectable keywords it declares
and whether it is a coroutine function. At run time it is called with exactly those
keywords. A sync callable runs in the event loop's default (bounded) executor until it has
shown it is quick, then on the loop itself (`scorers._sync_calls`), so a slow step never
blocks the loop; a sync callable that returns an awaitable has it awaited.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError

from scorers._judge_types import Judge
from scorers._run import StepName
from scorers._sync_calls import SyncCallPlacement
from scorers.errors import ScorerDefinitionError

StepKind = Literal["function", "prompt"]

STEP_KEYWORDS: dict[str, tuple[str, ...]] = {
    "preprocess": ("run", "results"),
    "analyze": ("run", "results"),
    "generate_score": ("run", "results"),
    "generate_reason": ("run", "results", "score"),
}
CALCULATE_SCORE_KEYWORDS: tuple[str, ...] = ("run", "results", "judge_output")


@dataclass(frozen=True, slots=True)
class PromptStep:
    """A step that asks the LLM judge: ``create_prompt`` builds the prompt, the judge answers.

    Pass one to a step method (``scorer.analyze(PromptStep(...))``) or give the same fields
    as keywords (``scorer.analyze(description=..., create_prompt=..., output_schema=...)``).

    Args:
        description: what the step does (shown by ``get_steps()``).
        create_prompt: called like a function step (keywords ``run``, ``results``, and
            ``score`` for generate_reason; sync or async); returns the prompt string.
        output_schema: a pydantic model class or a JSON Schema dict the judge's answer must
            match. Required for preprocess and analyze; optional for generate_score with
            ``calculate_score`` (default: the JSON Schema dict ``{"score": number}``, so
            ``judge_output`` is a dict such as ``{"score": 4}``); not allowed for
            generate_reason (the judge answers in plain text).
        judge: overrides the scorer's judge field by field for this step.
        calculate_score: generate_score only: called with keywords ``run``, ``results``,
            ``judge_output`` (the validated answer); returns the score.

    Example:
        >>> from pydantic import BaseModel, TypeAdapter, ValidationError
        >>> class Verdict(BaseModel):
        ...     relevant: bool
        >>> step = PromptStep(description="Judge relevance", output_schema=Verdict,
        ...                   create_prompt=lambda run: f"Is {run.output!r} relevant?")
        >>> step.description
        'Judge relevance'
    """

    description: str
    create_prompt: Callable[..., Any]
    output_schema: type[BaseModel] | dict[str, Any] | None = None
    judge: Judge | None = None
    calculate_score: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.description, str) or not self.description.strip():
            raise ScorerDefinitionError("A prompt step needs a non-empty description")
        if not callable(self.create_prompt):
            raise ScorerDefinitionError(
                f"Prompt step {self.description!r}: create_prompt must be a callable returning "
                f"the prompt string, got {type(self.create_prompt).__name__}"
            )
        schema = self.output_schema
        if schema is not None and not (
            isinstance(schema, dict) or (isinstance(schema, type) and issubclass(schema, BaseModel))
        ):
            raise ScorerDefinitionError(
                f"Prompt step {self.description!r}: output_schema must be a pydantic model class "
                f"or a JSON Schema dict, got {schema!r}"
            )
        object.__setattr__(self, "judge", as_judge(self.judge, f"Prompt step {self.description!r}"))
        if self.calculate_score is not None and not callable(self.calculate_score):
            raise ScorerDefinitionError(
                f"Prompt step {self.description!r}: calculate_score must be callable"
            )


def type_adapter(target: Any, what: str, scorer_id: str) -> TypeAdapter[Any] | None:
    """A pydantic TypeAdapter for a scorer's input_type / output_type (None: no validation)."""
    if target is None:
        return None
    try:
        return TypeAdapter(target)
    except Exception as exc:
        raise ScorerDefinitionError(
            f'Scorer "{scorer_id}": {what} must be a type pydantic can validate '
            f"(a BaseModel subclass...), got {target!r}: {exc}"
        ) from exc


def format_validation_error(error: ValidationError, limit: int = 5) -> str:
    """One line per problem, ``<field path>: <message>``, at most ``limit`` of them.

    Example:
        >>> from pydantic import BaseModel
        >>> class Q(BaseModel):
        ...     question: str
        >>> try:
        ...     Q.model_validate({})
        ... except ValidationError as exc:
        ...     print(format_validation_error(exc))
        question: Field required
    """
    lines = []
    for item in error.errors()[:limit]:
        loc = ".".join(str(part) for part in item["loc"]) or "(value)"
        lines.append(f"{loc}: {item['msg']}")
    more = error.error_count() - limit
    if more > 0:
        lines.append(f"... and {more} more")
    return "; ".join(lines)


def as_judge(judge: Judge | Mapping[str, Any] | None, where: str) -> Judge | None:
    """Accept a `Judge`, a dict of its fields, or None."""
    if judge is None or isinstance(judge, Judge):
        return judge
    if isinstance(judge, Mapping):
        try:
            return Judge.model_validate(dict(judge))
        except ValidationError as exc:
            raise ScorerDefinitionError(
                f"{where}: invalid judge: {format_validation_error(exc)}"
            ) from exc
    raise ScorerDefinitionError(f"{where}: judge must be a Judge, got {judge!r}")


def _callable_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return str(name) if name else type(fn).__name__


def _is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


@dataclass(frozen=True, slots=True)
class InjectedCallable:
    """A user callable with the keywords it declared, inspected once at definition."""

    fn: Callable[..., Any]
    keywords: tuple[str, ...]
    is_async: bool
    positional: bool = False
    placement: SyncCallPlacement = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "placement", SyncCallPlacement(_callable_name(self.fn)))

    async def call(self, available: Mapping[str, Any]) -> Any:
        if self.positional:
            args: tuple[Any, ...] = tuple(available[name] for name in self.keywords)
            kwargs: dict[str, Any] = {}
        else:
            args, kwargs = (), {name: available[name] for name in self.keywords}
        try:
            if self.is_async:
                return await self.fn(*args, **kwargs)
            result = await self.placement.call(self.fn, *args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return result
        except SystemExit as exc:
            # User code calling sys.exit() fails its step; it must not stop the process
            # (asyncio lets SystemExit out of the event loop: the daemon would exit).
            raise RuntimeError(f"scorer code called sys.exit({exc.code!r})") from exc


def positional_callable(fn: Callable[..., Any], *names: str) -> InjectedCallable:
    """Wrap ``fn`` to be called with ``names``' values as positional arguments (prepare_run)."""
    return InjectedCallable(fn=fn, keywords=names, is_async=_is_async_callable(fn), positional=True)


def inspect_callable(
    fn: Callable[..., Any], allowed: tuple[str, ...], *, what: str, step: str
) -> InjectedCallable:
    """Inspect ``fn``'s signature once and record which ``allowed`` keywords it declares.

    A ``**kwargs`` parameter receives every allowed keyword. A required parameter whose
    name is not allowed (or is positional-only) is a `ScorerDefinitionError`; optional
    unknown parameters keep their defaults. ``score`` may only be declared where allowed.

    Example:
        >>> inspect_callable(lambda run, results: 1, ("run", "results"), what="function", step="analyze").keywords
        ('run', 'results')
        >>> inspect_callable(lambda run: 1, ("run", "results"), what="function", step="analyze").keywords
        ('run',)
    """
    if not callable(fn):
        raise ScorerDefinitionError(
            f'Step "{step}": the {what} must be callable, got {type(fn).__name__}'
        )
    name = _callable_name(fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ScorerDefinitionError(
            f'Step "{step}": cannot inspect the signature of {what} {name}: {exc}'
        ) from exc
    declared: list[str] = []
    takes_kwargs = False
    allowed_text = ", ".join(allowed)
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            takes_kwargs = True
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        required = param.default is inspect.Parameter.empty
        if param.name == "score" and "score" not in allowed:
            raise ScorerDefinitionError(
                f'Step "{step}": {what} {name} declares "score", which only generate_reason '
                f"receives; it may declare: {allowed_text}"
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            if required:
                raise ScorerDefinitionError(
                    f'Step "{step}": {what} {name} has a positional-only parameter '
                    f'"{param.name}"; steps are called with keyword arguments ({allowed_text})'
                )
            continue
        if param.name in allowed:
            declared.append(param.name)
        elif required:
            raise ScorerDefinitionError(
                f'Step "{step}": {what} {name} has an unknown required parameter '
                f'"{param.name}"; it may declare: {allowed_text}'
            )
    keywords = allowed if takes_kwargs else tuple(declared)
    return InjectedCallable(fn=fn, keywords=keywords, is_async=_is_async_callable(fn))


@dataclass(frozen=True, slots=True)
class StepDefinition:
    """One compiled step of a scorer (internal): its kind and its inspected callables."""

    name: StepName
    kind: StepKind
    description: str | None
    function: InjectedCallable | None = None
    prompt: PromptStep | None = None
    create_prompt: InjectedCallable | None = None
    calculate_score: InjectedCallable | None = None


_PROMPT_KEYWORDS = ("description", "output_schema", "create_prompt", "judge", "calculate_score")


def build_step(name: StepName, fn: Any, prompt_fields: Mapping[str, Any]) -> StepDefinition:
    """Validate what a step method received and compile it into a `StepDefinition`."""
    given = {k: v for k, v in prompt_fields.items() if v is not None}
    if fn is not None and given:
        raise ScorerDefinitionError(
            f'Step "{name}": give either a function / PromptStep or prompt keywords '
            f"({', '.join(sorted(given))}), not both"
        )
    if fn is None and not given:
        raise ScorerDefinitionError(
            f'Step "{name}": give a function, a PromptStep, or prompt keywords '
            "(description=..., create_prompt=..., output_schema=...)"
        )
    if isinstance(fn, Mapping):
        fn, given = None, dict(fn)
    if fn is not None and not isinstance(fn, PromptStep):
        function = inspect_callable(fn, STEP_KEYWORDS[name], what="function", step=name)
        return StepDefinition(name=name, kind="function", description=None, function=function)
    if isinstance(fn, PromptStep):
        prompt = fn
    else:
        unknown = sorted(set(given) - set(_PROMPT_KEYWORDS))
        if unknown:
            raise ScorerDefinitionError(f'Step "{name}": unknown prompt field(s) {unknown}')
        if "create_prompt" not in given:
            raise ScorerDefinitionError(f'Step "{name}": a prompt step needs create_prompt')
        if "description" not in given:
            raise ScorerDefinitionError(f'Step "{name}": a prompt step needs a description')
        prompt = PromptStep(**given)
    return _build_prompt_step(name, prompt)


def _build_prompt_step(name: StepName, prompt: PromptStep) -> StepDefinition:
    if name in ("preprocess", "analyze") and prompt.output_schema is None:
        raise ScorerDefinitionError(
            f'Step "{name}": a prompt-mode {name} needs an output_schema '
            "(a pydantic model class or a JSON Schema dict)"
        )
    if prompt.calculate_score is not None and name != "generate_score":
        raise ScorerDefinitionError(f'Step "{name}": calculate_score is only for generate_score')
    if name == "generate_reason" and prompt.output_schema is not None:
        raise ScorerDefinitionError(
            'Step "generate_reason": a prompt-mode generate_reason takes no output_schema '
            "(the judge answers in plain text)"
        )
    if name == "generate_score" and prompt.output_schema is not None and not prompt.calculate_score:
        raise ScorerDefinitionError(
            'Step "generate_score": output_schema needs calculate_score to turn the judge\'s '
            'answer into a number (without it the judge is asked for {"score": number})'
        )
    create_prompt = inspect_callable(
        prompt.create_prompt, STEP_KEYWORDS[name], what="create_prompt", step=name
    )
    calculate = None
    if prompt.calculate_score is not None:
        calculate = inspect_callable(
            prompt.calculate_score, CALCULATE_SCORE_KEYWORDS, what="calculate_score", step=name
        )
    return StepDefinition(
        name=name,
        kind="prompt",
        description=prompt.description,
        prompt=prompt,
        create_prompt=create_prompt,
        calculate_score=calculate,
    )
