"""Keyword coverage (stop-word filtered keywords) and completeness (word / base-form coverage)."""

from __future__ import annotations

from scorers.builtin import (
    completeness,
    element_covered,
    extract_elements,
    extract_keywords,
    keyword_coverage,
)
from scorers.utils import make_agent_run, make_message


def test_extract_keywords_drops_stop_words_numbers_duplicates_and_case() -> None:
    assert extract_keywords("The Cat and the cat, 42 cats in 3D!") == ["cat", "cats"]
    assert extract_keywords("") == []
    assert extract_keywords("it is what it is") == []
    assert extract_keywords("Don’t panic") == ["panic"]  # typographic apostrophe -> "don't", a stop word


def test_keyword_coverage_hand_computed() -> None:
    # keywords: explain, photosynthesis, green, plants; the answer has 2 of them
    result = keyword_coverage().run_sync(
        input="Explain photosynthesis in green plants",
        output="Photosynthesis lets plants turn light into sugar.")
    assert result.score == 0.5
    assert result.preprocess_step_result.reference_keywords == ["explain", "photosynthesis", "green", "plants"]
    analysis = result.analyze_step_result
    assert (analysis.total_keywords, analysis.matched_keywords, analysis.missing_keywords) == (
        4, 2, ["explain", "green"])


def test_keyword_coverage_rounds_to_two_decimals() -> None:
    result = keyword_coverage().run_sync(input="apples pears plums", output="apples")
    assert result.score == 0.33


def test_keyword_coverage_no_input_keywords_is_one() -> None:
    assert keyword_coverage().run_sync(input="", output="anything at all").score == 1.0
    assert keyword_coverage().run_sync(input="is it the", output="").score == 1.0
    assert keyword_coverage().run_sync(input="apples", output="").score == 0.0


def test_keyword_coverage_agent_messages() -> None:
    run = make_agent_run([make_message("apples"), make_message("pears")],
                         [make_message("I like pears.", role="assistant")])
    result = keyword_coverage().run_sync(input=run.input, output=run.output)
    assert result.score == 0.5
    assert result.analyze_step_result.missing_keywords == ["apples"]


def test_extract_elements_words_and_lemmas() -> None:
    assert extract_elements("The cats were running") == ["the", "cats", "cat", "were", "be", "running", "run"]
    assert extract_elements("myVariable Café") == ["my", "variable", "cafe"]
    assert extract_elements("") == []


def test_element_covered_rules() -> None:
    assert element_covered("cat", ["cat"]) and not element_covered("cat", ["cats"])
    assert element_covered("cats", ["cat"])  # 3/4 = 0.75 > 0.6
    assert not element_covered("photo", ["photosynthesis"])  # 5/14 < 0.6
    assert element_covered("colors", ["color"])  # 5/6
    assert not element_covered("apple", [])


def test_completeness_hand_computed() -> None:
    # input elements: list, the, primary, colors, color; all but "list" are in the output
    result = completeness().run_sync(input="List the primary colors",
                                     output="The primary colors are red, blue and yellow.")
    assert result.score == 0.8
    pre = result.preprocess_step_result
    assert pre.missing_elements == ["list"]
    assert pre.element_counts == {"input": 5, "output": 10}


def test_completeness_base_forms_match_inflections() -> None:
    # "running" in the output also gives "run"; "ran" in the input gives "run" too
    result = completeness().run_sync(input="ran", output="running")
    assert result.preprocess_step_result.input_elements == ["ran", "run"]
    assert result.score == 0.5  # "ran" (<= 3 chars, exact) is missing, "run" is covered


def test_completeness_direction_and_empty_inputs() -> None:
    full = completeness().run_sync(input="red apples", output="red apples are tasty").score
    none = completeness().run_sync(input="red apples", output="zebra").score
    assert (full, none) == (1.0, 0.0)
    assert completeness().run_sync(input="", output="").score == 1.0
    assert completeness().run_sync(input="", output="something").score == 0.0
    assert completeness().run_sync(input=None, output="something").score == 0.0
