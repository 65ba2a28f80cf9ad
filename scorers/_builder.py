"""The immutable `Scorer` builder (made by `create_scorer`, in ``_create.py``).

A `Scorer` is never mutated: each step method returns a new scorer holding one more step,
so a half-built scorer can be reused as a template. Steps run in the canonical order
(preprocess, analyze, generate_score, generate_reason) whatever order they were added in,
each at most once: adding a step twice is a `ScorerDefinitionError`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, TypeAdapter

from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
from scorers._execute import execute, make_run
from scorers._judge_types import Judge, merge_judges
from scorers._run import STEP_ORDER, ScorerResult, StepName
from scorers._steps import (
    InjectedCallable,
    PromptStep,
    StepDefinition,
    as_judge,
    build_step,
    positional_callable,
    type_adapter,
)
from scorers.errors import ScorerDefinitionError

InT = TypeVar("InT")
OutT = TypeVar("OutT")

StepFunction = Callable[..., Any]
"""A step function, called with the keywords it declares (``run``, ``results``, ``score``)."""

StepInput = StepFunction | PromptStep | Mapping[str, Any] | None
"""What a step method accepts positionally: a function, a `PromptStep`, or its fields as a dict."""
JudgeLike = Judge | Mapping[str, Any] | None
ScorerType = Literal["agent", "conversation"]
"""``"agent"``: agent-typed runs; ``"conversation"``: `ConversationRun`s (whole sessions)."""
OutputSchema = type[BaseModel] | dict[str, Any]


class Scorer(Generic[InT, OutT]):
    """A scorer: an immutable pipeline of up to four steps, built with `create_scorer`.

    Step methods (`preprocess`, `analyze`, `generate_score`, `generate_reason`) each take
    either a function (called with the keywords it declares: ``run``, ``results``, and
    ``score`` for generate_reason; sync or async), a `PromptStep`, or the prompt step's
    fields as keywords, and return a new scorer. Type checkers cannot infer the parameter
    types of such keyword-injected lambdas; annotate step functions with
    ``run: ScorerRun[MyInput, MyOutput]`` (the scorer's type parameters) for typed access.

    Example:
        >>> from scorers import create_scorer
        >>> base = create_scorer(id="exact", description="1 when the answer equals the ground truth",
        ...                      name="Exact match", version="2")
        >>> scorer = base.generate_score(lambda run: float(run.output == run.ground_truth))
        >>> scorer.run_sync(input="2+2?", output="4", ground_truth="4").score
        1.0
        >>> (scorer.id, scorer.name, scorer.description, scorer.type, scorer.judge, scorer.version)
        ('exact', 'Exact match', '1 when the answer equals the ground truth', None, None, '2')
        >>> base.get_steps()  # the template is unchanged
        []
    """

    __slots__ = (
        "_id", "_name", "_description", "_type", "_judge", "_version", "_prepare_run",
        "_input_type", "_output_type", "_input_adapter", "_output_adapter",
        "_steps",
    )  # fmt: skip

    _steps: Mapping[str, StepDefinition]
    _prepare_run: InjectedCallable | None
    _input_adapter: TypeAdapter[Any] | None
    _output_adapter: TypeAdapter[Any] | None

    def __init__(
        self,
        *,
        id: str,
        description: str,
        name: str | None = None,
        type: ScorerType | None = None,
        judge: JudgeLike = None,
        prepare_run: Callable[..., Any] | None = None,
        version: str | None = None,
        input_type: Any = None,
        output_type: Any = None,
    ) -> None:
        if not id or not isinstance(id, str):
            raise ScorerDefinitionError(
                "Scorers must have an ID field. Please provide an ID in the scorer config."
            )
        if not description or not isinstance(description, str):
            raise ScorerDefinitionError(
                f'Scorer "{id}" must have a description. Please provide a description in the '
                "scorer config."
            )
        if name is not None and not isinstance(name, str):
            raise ScorerDefinitionError(f'Scorer "{id}": name must be a string, got {name!r}')
        if type not in (None, "agent", "conversation"):
            raise ScorerDefinitionError(
                f'Scorer "{id}": type must be "agent", "conversation" or None, got {type!r} '
                "(use input_type / output_type for custom types)"
            )
        if type is not None and (input_type is not None or output_type is not None):
            raise ScorerDefinitionError(
                f'Scorer "{id}": give either type="{type}" or input_type / output_type, not both'
            )
        if version is not None and not isinstance(version, str | int):
            raise ScorerDefinitionError(f'Scorer "{id}": version must be a string, got {version!r}')
        self._id = id
        self._name = name or id
        self._description = description
        self._type = type
        self._judge = as_judge(judge, f'Scorer "{id}"')
        self._version = None if version is None else str(version)
        self._prepare_run = None
        if prepare_run is not None:
            if not callable(prepare_run):
                raise ScorerDefinitionError(f'Scorer "{id}": prepare_run must be callable')
            self._prepare_run = positional_callable(prepare_run, "run")
        if type is not None:  # a conversation's input and output are agent-typed too
            input_type, output_type = ScorerRunInputForAgent, ScorerRunOutputForAgent
        self._input_type = input_type
        self._output_type = output_type
        self._input_adapter = type_adapter(input_type, "input_type", id)
        self._output_adapter = type_adapter(output_type, "output_type", id)
        self._steps = MappingProxyType({})

    # -- introspection -------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The scorer's unique id."""
        return self._id

    @property
    def name(self) -> str:
        """The scorer's display name (defaults to the id)."""
        return self._name

    @property
    def description(self) -> str:
        """What the scorer measures."""
        return self._description

    @property
    def type(self) -> ScorerType | None:
        """``"agent"`` for agent-typed scorers, ``"conversation"`` for conversation scorers
        (run on a `ConversationRun`), else None."""
        return self._type

    @property
    def judge(self) -> Judge | None:
        """The scorer-level judge (steps may override it field by field)."""
        return self._judge

    @property
    def version(self) -> str | None:
        """The scorer's version (part of a score's idempotency key in the daemon)."""
        return self._version

    @property
    def input_type(self) -> Any:
        """The type run.input is validated into (None: not validated)."""
        return self._input_type

    @property
    def output_type(self) -> Any:
        """The type run.output is validated into (None: not validated)."""
        return self._output_type

    def get_steps(self) -> list[dict[str, str | None]]:
        """The scorer's steps in execution order: ``{"name", "type", "description"}``.

        ``type`` is ``"function"`` or ``"prompt"``; ``description`` is None for functions.

        Example:
            >>> from scorers import create_scorer
            >>> scorer = create_scorer(id="s", description="d").generate_score(lambda: 1.0)
            >>> scorer.analyze(lambda run: {}).get_steps()
            [{'name': 'analyze', 'type': 'function', 'description': None}, {'name': 'generate_score', 'type': 'function', 'description': None}]
        """
        return [
            {"name": s.name, "type": s.kind, "description": s.description}
            for s in (self._steps[n] for n in STEP_ORDER if n in self._steps)
        ]

    def get_judges(self) -> list[Judge]:
        """The effective judge of each prompt step, in execution order (the scorer's judge with
        the step's overrides, `merge_judges`): what ``tracescore check`` inspects for credentials.

        Example:
            >>> from scorers import Judge, create_scorer
            >>> scorer = create_scorer(id="s", description="d", judge=Judge(model="openai/gpt-4o-mini",
            ...                        instructions="Be strict.")).generate_score(
            ...     description="score", create_prompt=lambda run: "Score it.",
            ...     judge=Judge(model_settings={"api_base": "http://127.0.0.1:8000/v1"}))
            >>> [(j.model, j.model_settings) for j in scorer.get_judges()]
            [('openai/gpt-4o-mini', {'api_base': 'http://127.0.0.1:8000/v1'})]
            >>> scorer.analyze(lambda run: {}).get_judges() == scorer.get_judges()
            True
        """
        steps = (self._steps[n] for n in STEP_ORDER if n in self._steps)
        return [merge_judges(self._judge, s.prompt.judge) for s in steps if s.prompt is not None]

    def with_instructions(self, instructions: str) -> Scorer[InT, OutT]:
        """Return a new scorer whose judge gives ``instructions``: the scorer's judge and every prompt
        step's own judge that sets instructions get them, so each prompt step's effective judge
        (`get_judges`) has them (``[[scorers]] instructions_file`` adopts a file this way).

        Raises:
            ScorerDefinitionError: the scorer has no prompt step (no judge to instruct), or
                ``instructions`` is not a non-empty string.

        Example:
            >>> from scorers import Judge, create_scorer
            >>> scorer = create_scorer(id="s", description="d", judge=Judge("openai/gpt-4o-mini", "Be fair.")
            ...     ).generate_score(description="score", create_prompt=lambda run: "Score it.",
            ...                      judge=Judge(instructions="Be strict."))
            >>> [j.instructions for j in scorer.with_instructions("Be exact.").get_judges()]
            ['Be exact.']
            >>> [j.instructions for j in scorer.get_judges()]  # the scorer is unchanged
            ['Be strict.']
        """
        if not isinstance(instructions, str) or not instructions.strip():
            raise ScorerDefinitionError(f'Scorer "{self._id}": instructions must be a non-empty string')
        if not any(step.prompt is not None for step in self._steps.values()):
            raise ScorerDefinitionError(f'Scorer "{self._id}" has no prompt step: it has no judge to instruct')
        new = copy.copy(self)
        new._judge = (self._judge or Judge()).model_copy(update={"instructions": instructions})
        steps = dict(self._steps)
        for name, step in steps.items():
            judge = step.prompt.judge if step.prompt is not None else None
            if step.prompt is not None and judge is not None and judge.instructions is not None:
                prompt = dataclasses.replace(step.prompt, judge=judge.model_copy(update={"instructions": instructions}))
                steps[name] = dataclasses.replace(step, prompt=prompt)
        new._steps = MappingProxyType(steps)
        return new

    def __repr__(self) -> str:
        steps = [n for n in STEP_ORDER if n in self._steps]
        return f"Scorer(id={self._id!r}, name={self._name!r}, steps={steps})"

    # -- steps -----------------------------------------------------------------------------

    def _with_step(self, name: StepName, fn: Any, fields: dict[str, Any]) -> Scorer[InT, OutT]:
        if name in self._steps:
            raise ScorerDefinitionError(
                f'Scorer "{self._id}": step "{name}" is already defined; each step may be '
                "defined once"
            )
        try:
            step = build_step(name, fn, fields)
        except ScorerDefinitionError as exc:
            raise ScorerDefinitionError(f'Scorer "{self._id}": {exc}') from exc
        new = copy.copy(self)
        new._steps = MappingProxyType({**self._steps, name: step})
        return new

    def preprocess(
        self,
        fn: StepInput = None,
        /,
        *,
        description: str | None = None,
        output_schema: OutputSchema | None = None,
        create_prompt: StepFunction | None = None,
        judge: JudgeLike = None,
    ) -> Scorer[InT, OutT]:
        """Return a new scorer with a preprocess step (a function, a `PromptStep`, or keywords).

        A prompt-mode preprocess needs an ``output_schema``; the judge's answer is its result.

        Example:
            >>> from scorers import create_scorer
            >>> scorer = (create_scorer(id="words", description="Counts words")
            ...     .preprocess(lambda run: {"words": run.output.split()})
            ...     .generate_score(lambda results: len(results.preprocess_step_result["words"])))
            >>> scorer.run_sync(output="a b c").score
            3.0
        """
        fields = {"description": description, "output_schema": output_schema,
                  "create_prompt": create_prompt, "judge": judge}  # fmt: skip
        return self._with_step("preprocess", fn, fields)

    def analyze(
        self,
        fn: StepInput = None,
        /,
        *,
        description: str | None = None,
        output_schema: OutputSchema | None = None,
        create_prompt: StepFunction | None = None,
        judge: JudgeLike = None,
    ) -> Scorer[InT, OutT]:
        """Return a new scorer with an analyze step (a function, a `PromptStep`, or keywords).

        A prompt-mode analyze needs an ``output_schema``; the judge's answer is its result.

        Example:
            >>> from scorers import create_scorer
            >>> scorer = (create_scorer(id="polite", description="Says please")
            ...     .analyze(lambda run: {"polite": "please" in run.output.lower()})
            ...     .generate_score(lambda results: float(results.analyze_step_result["polite"])))
            >>> scorer.run_sync(output="Please hold.").score
            1.0
        """
        fields = {"description": description, "output_schema": output_schema,
                  "create_prompt": create_prompt, "judge": judge}  # fmt: skip
        return self._with_step("analyze", fn, fields)

    def generate_score(
        self,
        fn: StepInput = None,
        /,
        *,
        description: str | None = None,
        output_schema: OutputSchema | None = None,
        create_prompt: StepFunction | None = None,
        judge: JudgeLike = None,
        calculate_score: StepFunction | None = None,
    ) -> Scorer[InT, OutT]:
        """Return a new scorer with its generate_score step (required to run).

        A function must return a finite real number (or `not_scorable`). In prompt mode
        the judge is asked for ``{"score": number}``, or, with ``calculate_score``, for
        ``output_schema`` (default ``{"score": number}``) which
        ``calculate_score(run, results, judge_output)`` turns into the score.

        Example:
            >>> from scorers import create_scorer
            >>> scorer = create_scorer(id="short", description="Short answers score high")
            >>> scorer = scorer.generate_score(lambda run: max(0.0, 1 - len(run.output) / 100))
            >>> scorer.run_sync(output="x" * 25).score
            0.75
        """
        fields = {"description": description, "output_schema": output_schema,
                  "create_prompt": create_prompt, "judge": judge,
                  "calculate_score": calculate_score}  # fmt: skip
        return self._with_step("generate_score", fn, fields)

    def generate_reason(
        self,
        fn: StepInput = None,
        /,
        *,
        description: str | None = None,
        output_schema: OutputSchema | None = None,
        create_prompt: StepFunction | None = None,
        judge: JudgeLike = None,
    ) -> Scorer[InT, OutT]:
        """Return a new scorer with a generate_reason step; it may also declare ``score``.

        In prompt mode the judge answers in plain text (no ``output_schema``).

        Example:
            >>> from scorers import create_scorer
            >>> scorer = (create_scorer(id="len", description="Length")
            ...     .generate_score(lambda run: float(len(run.output)))
            ...     .generate_reason(lambda score: f"the answer has {score:.0f} characters"))
            >>> scorer.run_sync(output="Paris").reason
            'the answer has 5 characters'
        """
        fields = {"description": description, "output_schema": output_schema,
                  "create_prompt": create_prompt, "judge": judge}  # fmt: skip
        return self._with_step("generate_reason", fn, fields)

    async def run(
        self,
        input: Any = None,
        output: Any = None,
        ground_truth: Any = None,
        run_id: str | None = None,
        request_context: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
        expected_trajectory: Any = None,
        **extra: Any,
    ) -> ScorerResult[InT, OutT]:
        """Score one run; every scoring failure is a `ScorerRunError` (cancellation is not).

        ``input`` may also be a whole `ScorerRun` (e.g. from ``utils.make_agent_run``), then
        alone. A conversation scorer (``type="conversation"``) takes a `ConversationRun`, or
        its turns (a list of runs) as ``input``, made into one with `ConversationRun.from_turns`
        (other keywords, ``session_id=`` included, go to it); a single run is an error, as is a
        `ConversationRun` given to any other scorer (`ScorerRunError` caused by a
        `ScorerInputError`). Other keywords (``additional_context={...}``...) are kept on the run as extra
        fields, as Mastra's run object keeps them: every step reads them as
        ``run.additional_context`` (and in ``run.model_extra``), and the result keeps them.
        Agent scorers coerce input and output into `ScorerRunInputForAgent` /
        `ScorerRunOutputForAgent` (None becomes empty); ``input_type`` / ``output_type``
        validate them (failure: a `ScorerRunError` caused by a `ScorerInputError` naming
        the field). Then ``prepare_run`` runs once, then the steps in canonical order.

        Example:
            >>> import asyncio
            >>> from scorers import create_scorer
            >>> scorer = create_scorer(id="echo", description="d").generate_score(
            ...     lambda run: run.additional_context["weight"])
            >>> result = asyncio.run(scorer.run(input="q", output="a", run_id="r1",
            ...                                 additional_context={"weight": 0.5}))
            >>> (result.run_id, result.score, result.additional_context)
            ('r1', 0.5, {'weight': 0.5})
        """
        fields = {"output": output, "ground_truth": ground_truth, "run_id": run_id,
                  "request_context": request_context, "trace_id": trace_id, "span_id": span_id,
                  "expected_trajectory": expected_trajectory}  # fmt: skip
        return await execute(self, make_run(self._id, input, fields, extra, self._type == "conversation"))

    def run_sync(
        self,
        input: Any = None,
        output: Any = None,
        ground_truth: Any = None,
        run_id: str | None = None,
        request_context: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
        expected_trajectory: Any = None,
        **extra: Any,
    ) -> ScorerResult[InT, OutT]:
        """`run` for scripts and notebooks: blocks until the result is ready.

        Outside an event loop it runs its own; inside a running loop (a notebook cell,
        async code) it runs the scorer on a fresh loop in a helper thread, so the call
        still returns the result. Async code should prefer ``await scorer.run(...)``.

        Example:
            >>> from scorers import create_scorer
            >>> scorer = create_scorer(id="one", description="Always 1").generate_score(lambda: 1)
            >>> scorer.run_sync(input="q", output="a").score
            1.0
        """
        coroutine = self.run(input, output, ground_truth, run_id, request_context, trace_id,
                             span_id, expected_trajectory, **extra)  # fmt: skip
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coroutine)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracescore-run-sync") as pool:
            return pool.submit(asyncio.run, coroutine).result()
