"""Shared pieces of the LLM-judged built-in scorers: verdict models, context, prompts.

Every LLM-judged factory takes ``judge`` (a `Judge`, a dict of its fields, or a model
string such as ``"openai/gpt-4o-mini"``); the scorer's default instructions are used when
the judge gives none. Steps that ask the judge are `PromptStep`s with pydantic output
schemas, so every step result is a JSON object. When a run lacks what the scorer needs
(no answer, no ground truth, no context), the first prompt step returns `not_scorable`
with the reason instead of spending judge calls on an empty prompt (Mastra scores 0 or
throws there; each factory documents which).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scorers._create import create_scorer
from scorers._steps import PromptStep
from scorers.builtin._common import JudgeOption, check_scale, resolve_judge
from scorers.errors import ScorerDefinitionError
from scorers.utils import round_to_two_decimals

ContextOption = Sequence[str] | None
ContextExtractor = Callable[[Any], Sequence[str]]


def _without_our_titles(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Drop the title and the docstring description pydantic puts in a model's JSON schema."""
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in (schema.get("properties") or {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)


class JudgeSchema(BaseModel):
    """Base of the built-in scorers' judge output schemas.

    The judge receives the schema without pydantic's titles and without the class
    docstrings, which are written for Python readers (SPEC §1.5: no title or description of
    ours reaches the judge).

    Example:
        >>> class Answer(JudgeSchema):
        ...     '''Internal notes.'''
        ...     ok: bool
        >>> Answer.model_json_schema()
        {'properties': {'ok': {'type': 'boolean'}}, 'required': ['ok'], 'type': 'object'}
    """

    model_config = ConfigDict(json_schema_extra=_without_our_titles)


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


class Statements(JudgeSchema):
    """Statements extracted from a text by the judge."""

    statements: list[str] = Field(default_factory=list)


class Claims(JudgeSchema):
    """Factual claims extracted from a text by the judge."""

    claims: list[str] = Field(default_factory=list)


class Verdict(JudgeSchema):
    """One yes / no / unsure verdict of the judge, with its reason (case-insensitive)."""

    verdict: Literal["yes", "no", "unsure"]
    reason: str = ""

    _normalise = field_validator("verdict", mode="before")(lambda cls, v: _lower(v))


class Verdicts(JudgeSchema):
    """The judge's verdicts, one per statement, claim, opinion or context piece."""

    verdicts: list[Verdict] = Field(default_factory=list)


def count(verdicts: Sequence[Verdict], value: str) -> int:
    """How many verdicts are ``value``."""
    return sum(1 for v in verdicts if v.verdict == value)


def scaled(value: float, scale: float) -> float:
    """``value * scale`` rounded to two decimals (Mastra's final score)."""
    return round_to_two_decimals(value * scale)


def bullet(items: Sequence[Any]) -> str:
    """``items`` as a JSON list (what the prompts show the judge)."""
    return json.dumps(list(items), ensure_ascii=False, default=str)


def verdict_lines(verdicts: Sequence[Verdict], subjects: Sequence[str] | None = None) -> str:
    """One line per verdict: ``- <subject>: <verdict> (<reason>)``."""
    lines = []
    for i, v in enumerate(verdicts):
        subject = subjects[i] if subjects is not None and i < len(subjects) else f"#{i + 1}"
        lines.append(f"- {subject}: {v.verdict}" + (f" ({v.reason})" if v.reason else ""))
    return "\n".join(lines) or "(no verdicts)"


def check_context(context: ContextOption, extractor: ContextExtractor | None, scorer: str) -> list[str] | None:
    """Validate a static context (a non-empty list of strings) and/or an extractor."""
    if extractor is not None and not callable(extractor):
        raise ScorerDefinitionError(f"{scorer}: context_extractor must be callable")
    if context is None:
        return None
    if isinstance(context, str) or not all(isinstance(c, str) for c in context):
        raise ScorerDefinitionError(f"{scorer}: context must be a list of strings")
    if not context:
        raise ScorerDefinitionError(f"{scorer}: context cannot be empty if provided")
    return list(context)


def run_context(run: Any, context: list[str] | None, extractor: ContextExtractor | None) -> list[str]:
    """The context of one run: the extractor's (when given), else the static context."""
    if extractor is not None:
        return [str(c) for c in extractor(run) or []]
    return list(context or [])


def reason_prompt(what: str, scale: float, details: str) -> str:
    """The common generate_reason prompt: explain ``score`` from ``details``."""
    return (
        f"Explain the {what} score, where 0 is the lowest and {scale:g} is the highest.\n"
        "Base the explanation only on the verdicts and facts below; be concise (one or two sentences)"
        ' and start with "The score is <score> because".\n\n'
        f"{details}"
    )


def builder(
    id: str, name: str, description: str, judge: JudgeOption | None, instructions: str, scale: float = 1.0,
    type: Literal["agent", "conversation"] = "agent",
) -> Any:
    """``create_scorer`` for an LLM-judged built-in (agent or conversation type, resolved judge)."""
    check_scale(scale, name)
    return create_scorer(
        id=id, name=name, description=description, type=type,
        judge=resolve_judge(judge, instructions, name),
    )  # fmt: skip


def prompt(description: str, create_prompt: Callable[..., Any], schema: Any = None) -> PromptStep:
    """A `PromptStep` (shorthand)."""
    return PromptStep(description=description, create_prompt=create_prompt, output_schema=schema)
