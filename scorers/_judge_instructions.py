"""A scorer's one judge (SPEC §11, "Align").

``tracescore align`` rewrites the instructions of a scorer's judge (`Scorer.with_instructions`)
and measures the scorer with each rewrite. That is defined only for a scorer with exactly one
judge: every prompt step's effective judge (`Scorer.get_judges`) has the same model and
instructions. `single_judge` returns that judge or says why there is none.
"""

from __future__ import annotations

from typing import Any

from scorers._builder import Scorer
from scorers._judge_types import Judge
from scorers.errors import ScorerDefinitionError

__all__ = ["single_judge"]


def _prompt_steps(scorer: Any) -> list[tuple[str, Judge]]:
    """(step name, effective judge) of each prompt step, in execution order."""
    if not isinstance(scorer, Scorer):
        raise ScorerDefinitionError(f"scorer {getattr(scorer, 'id', scorer)!r} is not built with create_scorer: "
                                    "its judge cannot be read or rewritten")
    steps = [s for s in scorer.get_steps() if s["type"] == "prompt"]
    return [(str(step["name"]), judge) for step, judge in zip(steps, scorer.get_judges(), strict=True)]


def single_judge(scorer: Any) -> Judge:
    """The one judge of ``scorer``: every prompt step's effective judge, when they all have
    the same model and instructions.

    Raises:
        ScorerDefinitionError: the scorer has no prompt step (no judge), a prompt step's judge has
            no model or instructions, or its prompt steps' judges differ (the message names the steps).

    Example:
        >>> from scorers import create_scorer
        >>> s = create_scorer(id="tone", description="d", judge=Judge("openai/gpt-4o-mini", "Be fair.")
        ...                   ).generate_score(description="s", create_prompt=lambda run: "?")
        >>> single_judge(s).instructions
        'Be fair.'
        >>> two = s.analyze(description="a", output_schema={"type": "object"}, create_prompt=lambda run: "?",
        ...                 judge=Judge(instructions="Be strict."))
        >>> single_judge(two)
        Traceback (most recent call last):
        ...
        scorers.errors.ScorerDefinitionError: scorer 'tone' has several judges: its prompt steps' judges differ (analyze: openai/gpt-4o-mini 'Be strict.'; generate_score: openai/gpt-4o-mini 'Be fair.'); align rewrites the instructions of one judge only
        >>> single_judge(create_scorer(id="code", description="d").generate_score(lambda run: 1.0))
        Traceback (most recent call last):
        ...
        scorers.errors.ScorerDefinitionError: scorer 'code' has no judge: none of its steps is a prompt step
    """
    steps = _prompt_steps(scorer)
    if not steps:
        raise ScorerDefinitionError(f"scorer {scorer.id!r} has no judge: none of its steps is a prompt step")
    for name, judge in steps:
        if not judge.model or not judge.instructions:
            raise ScorerDefinitionError(f"scorer {scorer.id!r}: step {name}'s judge has no "
                                        + ("model" if not judge.model else "instructions"))
    if len({(judge.model, judge.instructions) for _, judge in steps}) > 1:
        shown = "; ".join(f"{name}: {judge.model} {_short(judge.instructions or '')!r}" for name, judge in steps)
        raise ScorerDefinitionError(f"scorer {scorer.id!r} has several judges: its prompt steps' judges differ "
                                    f"({shown}); align rewrites the instructions of one judge only")
    return steps[0][1]


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
