"""Properties of the code-based scorers: ranges, symmetry, identity, JSON step results."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scorers.builtin import (
    checks,
    completeness,
    content_similarity,
    dice_similarity,
    keyword_coverage,
    textual_difference,
    tone_consistency,
    tool_call_accuracy_code,
)
from scorers.utils import make_message, make_tool_call

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@given(TEXT, TEXT)
def test_dice_is_symmetric_bounded_and_one_on_identity(first: str, second: str) -> None:
    value = dice_similarity(first, second)
    assert 0.0 <= value <= 1.0
    assert value == dice_similarity(second, first)
    assert dice_similarity(first, first) == 1.0


@settings(max_examples=30, deadline=None)
@given(TEXT, TEXT)
def test_code_scorers_stay_in_range(input_text: str, output_text: str) -> None:
    for scorer in (completeness(), content_similarity(), keyword_coverage(), textual_difference(), tone_consistency()):
        score = scorer.run_sync(input=input_text, output=output_text).score
        assert score is not None and 0.0 <= score <= 1.0, scorer.id


def test_identical_texts_score_best() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    for scorer in (completeness(), content_similarity(), keyword_coverage(), textual_difference()):
        assert scorer.run_sync(input=text, output=text).score == 1.0, scorer.id


OUTPUT = [make_message("", role="assistant", tool_calls=[make_tool_call("search", result="ok")]),
          make_message("I love it.", role="assistant")]
SCORERS: list[Any] = [
    completeness(), content_similarity(), keyword_coverage(), textual_difference(), tone_consistency(),
    tool_call_accuracy_code(expected_tool="search"), checks.includes("love"), checks.no_tool_errors(),
    checks.similarity("I love it."), checks.tool_order(["search"]),
]


def test_step_results_serialise_as_json_objects() -> None:
    for scorer in SCORERS:
        result = scorer.run_sync(input="Do you love it?", output=OUTPUT)
        data = json.loads(result.model_dump_json())
        for key in ("preprocess_step_result", "analyze_step_result"):
            assert data[key] is None or isinstance(data[key], dict), (scorer.id, key)
        assert data["preprocess_step_result"] is not None, scorer.id
