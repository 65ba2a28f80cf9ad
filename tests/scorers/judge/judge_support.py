"""Shared helpers of the judge tests (a uniquely named module: ``from conftest import`` would
pick whichever conftest.py comes first on sys.path)."""

from __future__ import annotations

import os
from typing import Any, TypeVar

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server

Reply = llm_server.Reply
E = TypeVar("E", bound=BaseException)

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number"}},
    "required": ["score"],
}


def score_it(scorer_id: str, settings: dict[str, Any], **judge_kw: Any) -> Any:
    """A scorer whose generate_score asks the judge (``openai/gpt-4o-mini`` with ``settings``)
    "Score it"."""
    from scorers import Judge, create_scorer

    judge = Judge(model="openai/gpt-4o-mini", instructions="Judge.", model_settings=settings, **judge_kw)
    return create_scorer(id=scorer_id, description="d", judge=judge).generate_score(
        description="score", create_prompt=lambda run: "Score it")


def failed_judge_call(caught: Any, kind: type[E]) -> E:
    """The judge error (of ``kind``, with its execution record) behind a `ScorerRunError`."""
    cause = caught.value.__cause__
    assert isinstance(cause, kind) and getattr(cause, "execution", None) is not None
    return cause
