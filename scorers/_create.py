"""`create_scorer`: the typed entry point that builds a `Scorer`.

The overloads only serve type checkers: ``type="agent"`` gives a
``Scorer[ScorerRunInputForAgent, ScorerRunOutputForAgent]`` (so does ``type="conversation"``,
whose run is a `ConversationRun`), ``input_type=A,
output_type=B`` a ``Scorer[A, B]``, and no type a ``Scorer[Any, Any]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
from scorers._builder import JudgeLike, Scorer, ScorerType

I2 = TypeVar("I2")
O2 = TypeVar("O2")


@overload
def create_scorer(
    id: str = ..., description: str = ..., *, name: str | None = ..., type: Literal["agent", "conversation"],
    judge: JudgeLike = ..., prepare_run: Callable[..., Any] | None = ...,
    version: str | None = ..., input_type: None = ..., output_type: None = ...,
) -> Scorer[ScorerRunInputForAgent, ScorerRunOutputForAgent]: ...  # fmt: skip
@overload
def create_scorer(
    id: str = ..., description: str = ..., *, name: str | None = ..., type: None = ...,
    judge: JudgeLike = ..., prepare_run: Callable[..., Any] | None = ...,
    version: str | None = ..., input_type: type[I2], output_type: type[O2],
) -> Scorer[I2, O2]: ...  # fmt: skip
@overload
def create_scorer(
    id: str = ..., description: str = ..., *, name: str | None = ..., type: None = ...,
    judge: JudgeLike = ..., prepare_run: Callable[..., Any] | None = ...,
    version: str | None = ..., input_type: type[I2], output_type: None = ...,
) -> Scorer[I2, Any]: ...  # fmt: skip
@overload
def create_scorer(
    id: str = ..., description: str = ..., *, name: str | None = ..., type: None = ...,
    judge: JudgeLike = ..., prepare_run: Callable[..., Any] | None = ...,
    version: str | None = ..., input_type: None = ..., output_type: type[O2],
) -> Scorer[Any, O2]: ...  # fmt: skip
@overload
def create_scorer(
    id: str = ..., description: str = ..., *, name: str | None = ..., type: None = ...,
    judge: JudgeLike = ..., prepare_run: Callable[..., Any] | None = ...,
    version: str | None = ..., input_type: None = ..., output_type: None = ...,
) -> Scorer[Any, Any]: ...  # fmt: skip
def create_scorer(
    id: str = "",
    description: str = "",
    *,
    name: str | None = None,
    type: ScorerType | None = None,
    judge: JudgeLike = None,
    prepare_run: Callable[..., Any] | None = None,
    version: str | None = None,
    input_type: Any = None,
    output_type: Any = None,
) -> Scorer[Any, Any]:
    """Create a scorer (Mastra's ``createScorer``); add steps with its step methods.

    Args:
        id: the scorer's unique id (required).
        description: what it measures (required).
        name: display name; defaults to ``id``.
        type: ``"agent"`` to coerce run.input / run.output into `ScorerRunInputForAgent` /
            `ScorerRunOutputForAgent` (from dicts, Mastra JSON, or plain strings);
            ``"conversation"`` for a scorer of whole sessions: its run is a `ConversationRun`
            (agent-typed input and output, plus ``turns``, ``conversation``, ``session_id``...).
        judge: the LLM judge for prompt steps (a `Judge` or a dict of its fields).
        prepare_run: ``run -> run`` (sync or async), applied once before the first step;
            e.g. `filter_run`. It may return a dict of `ScorerRun` fields (run_id,
            trace_id and span_id it leaves out are kept from the run). If it raises (or
            returns something else), the run fails with a `ScorerRunError` whose
            ``failed_step`` is ``"prepare_run"`` (Mastra lets that error propagate raw).
        version: part of a score's idempotency key in the daemon.
        input_type: a pydantic model (or any type pydantic validates) for run.input.
        output_type: the same for run.output.

    Raises:
        ScorerDefinitionError: a missing id or description, or inconsistent options.

    Example:
        >>> from pydantic import BaseModel
        >>> class Answer(BaseModel):
        ...     text: str
        >>> scorer = create_scorer(id="answer-length", description="Scores the answer length",
        ...                        output_type=Answer).generate_score(
        ...     lambda run: min(1.0, len(run.output.text) / 20))
        >>> scorer.run_sync(input="q", output={"text": "ten chars!"}).score
        0.5
        >>> from scorers.utils import make_agent_run
        >>> turns = create_scorer(id="turns", description="Counts the session's turns",
        ...                       type="conversation").generate_score(lambda run: len(run.turns))
        >>> turns.run_sync([make_agent_run("Hi", "Hello!"), make_agent_run("Bye", "Ciao.")], session_id="s1").score
        2.0
    """
    return Scorer(
        id=id, description=description, name=name, type=type, judge=judge,
        prepare_run=prepare_run, version=version, input_type=input_type, output_type=output_type,
    )  # fmt: skip
