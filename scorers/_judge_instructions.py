"""A scorer's one judge, and the same scorer with other instructions for it (SPEC §11, "Align").

``tracescore align`` rewrites the instructions of a scorer's judge and measures the scorer
with each rewrite. That is defined only for a scorer with exactly one judge: every prompt
step's effective judge (`Scorer.get_judges`) has the same model and instructions.
`single_judge` returns that judge or says why there is none; `with_instructions` returns a
copy of the scorer whose every prompt step's judge has the new instructions (the model, its
settings and every step are unchanged; the scorer itself is immutable, as always).
"""

from __future__ import annotations

import copy
import dataclasses
from types import MappingProxyType
from typing import Any

from scorers._builder import Scorer
from scorers._judge_types import Judge
from scorers._run import STEP_ORDER
from scorers.errors import ScorerDefinitionError

__all__ = ["single_judge", "with_instructions"]


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


def with_instructions(scorer: Scorer[Any, Any], instructions: str) -> Scorer[Any, Any]:
    """A copy of ``scorer`` whose every prompt step's judge has ``instructions`` (the scorer's
    judge and each step judge that sets its own instructions get them; nothing else changes).

    Example:
        >>> from scorers import create_scorer
        >>> s = create_scorer(id="tone", description="d", judge=Judge("openai/gpt-4o-mini", "Be fair.")
        ...                   ).generate_score(description="s", create_prompt=lambda run: "?",
        ...                                    judge=Judge(instructions="Be fair."))
        >>> new = with_instructions(s, "Be kind.")
        >>> [j.instructions for j in new.get_judges()], [j.instructions for j in s.get_judges()]
        (['Be kind.'], ['Be fair.'])
        >>> (new.id, new.judge.model, new.get_steps() == s.get_steps())
        ('tone', 'openai/gpt-4o-mini', True)
        >>> own = create_scorer(id="own", description="d").generate_score(  # no scorer judge: the step's own
        ...     description="s", create_prompt=lambda run: "?", judge=Judge("openai/gpt-4o-mini", "Be fair."))
        >>> [(j.model, j.instructions) for j in with_instructions(own, "Be kind.").get_judges()]
        [('openai/gpt-4o-mini', 'Be kind.')]
    """
    if not isinstance(scorer, Scorer):
        raise ScorerDefinitionError(f"scorer {getattr(scorer, 'id', scorer)!r} is not built with create_scorer")
    new = copy.copy(scorer)
    base = scorer._judge
    new._judge = (base or Judge()).model_copy(update={"instructions": instructions})
    steps: dict[str, Any] = {}
    for name in STEP_ORDER:
        if name not in scorer._steps:
            continue
        step = scorer._steps[name]
        own = step.prompt.judge if step.prompt is not None else None
        if step.prompt is not None and own is not None and own.instructions is not None:
            prompt = dataclasses.replace(step.prompt, judge=own.model_copy(update={"instructions": instructions}))
            step = dataclasses.replace(step, prompt=prompt)
        steps[name] = step
    new._steps = MappingProxyType(steps)
    return new
