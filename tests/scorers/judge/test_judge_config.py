"""The Judge configuration object: SPEC's signature and field-by-field inheritance."""

from __future__ import annotations

import pytest

from scorers import Judge, merge_judges


def test_model_and_instructions_by_position() -> None:
    """SPEC §1.5: ``Judge(model, instructions, json_prompt_injection="auto", ...)``."""
    judge = Judge("openai/gpt-4o-mini", "You are an expert evaluator", json_prompt_injection="inline")
    assert (judge.model, judge.instructions, judge.json_prompt_injection) == (
        "openai/gpt-4o-mini", "You are an expert evaluator", "inline")
    assert Judge("openai/gpt-4o-mini") == Judge(model="openai/gpt-4o-mini")


def test_a_step_judge_by_position_overrides_only_what_it_names() -> None:
    base = Judge("openai/gpt-4o-mini", "Be strict.", max_processor_retries=2)
    step = merge_judges(base, Judge(None, "Be lenient."))
    assert (step.model, step.instructions, step.max_processor_retries) == (
        "openai/gpt-4o-mini", "Be lenient.", 2)


def test_a_field_given_twice_is_an_error() -> None:
    with pytest.raises(TypeError, match="model both by position and by keyword"):
        Judge("a/b", model="c/d")  # type: ignore[misc]
