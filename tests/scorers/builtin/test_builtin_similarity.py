"""Content similarity (Dice of character bigrams) and textual difference (difflib)."""

from __future__ import annotations

import difflib

import pytest

from scorers.builtin import content_similarity, dice_similarity, textual_difference
from scorers.utils import make_agent_run, make_message, make_tool_call


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("night", "nacht", 0.25),  # ni ig gh ht / na ac ch ht: 2*1/8
        ("healed", "sealed", 0.8),  # he ea al le ed / se ea al le ed: 2*4/10
        ("aaaa", "aa", 0.5),  # multiset: aa x3 vs aa x1 -> 2*1/(4+2-2)
        ("", "", 1.0),
        ("a", "a", 1.0),
        ("a", "ab", 0.0),
        ("a b c", "abc", 1.0),  # whitespace removed first
        ("abc", "xyz", 0.0),
    ],
)
def test_dice_similarity_hand_computed(first: str, second: str, expected: float) -> None:
    assert dice_similarity(first, second) == pytest.approx(expected)
    assert dice_similarity(second, first) == pytest.approx(expected)


def test_content_similarity_plain_strings_and_rounding() -> None:
    # "hello world" vs "hello world!" without spaces: 10 and 11 chars, 9 shared bigrams -> 18/19
    result = content_similarity().run_sync(input="Hello world", output="hello world!")
    assert result.score == 0.95
    assert result.preprocess_step_result.processed_input == "hello world"
    assert result.preprocess_step_result.processed_output == "hello world!"


def test_content_similarity_case_and_whitespace_options() -> None:
    assert content_similarity().run_sync(input="ABC", output="abc").score == 1.0
    assert content_similarity(ignore_case=False).run_sync(input="ABC", output="abc").score == 0.0
    kept = content_similarity(ignore_whitespace=False).run_sync(input="  a\n b ", output="ab")
    assert kept.preprocess_step_result.processed_input == "  a\n b "
    assert kept.score == 1.0  # the Dice comparison itself ignores whitespace


def test_content_similarity_agent_messages_join_inputs_and_assistant_texts() -> None:
    run = make_agent_run(
        [make_message("first"), make_message("second")],
        [make_message("", role="assistant", tool_calls=[make_tool_call("search", result="tool text")]),
         make_message("first", role="assistant"), make_message("second", role="assistant")],
    )
    result = content_similarity().run_sync(input=run.input, output=run.output)
    assert result.preprocess_step_result.processed_input == "first, second"
    assert result.preprocess_step_result.processed_output == "first, second"
    assert result.score == 1.0


def test_content_similarity_empty_texts() -> None:
    assert content_similarity().run_sync(input="", output="").score == 1.0
    assert content_similarity().run_sync(input="hello", output="").score == 0.0
    assert content_similarity().run_sync(input="hello", output=[]).score == 0.0


def test_content_similarity_is_a_normal_agent_scorer() -> None:
    scorer = content_similarity(id="sim")
    assert (scorer.id, scorer.type) == ("sim", "agent")
    assert [s["name"] for s in scorer.get_steps()] == ["preprocess", "generate_score"]


def test_textual_difference_hand_computed() -> None:
    result = textual_difference().run_sync(input="abcd", output="abxd")
    pre = result.preprocess_step_result
    assert (result.score, pre.ratio, pre.changes, pre.length_diff, pre.confidence) == (0.75, 0.75, 1, 0.0, 1.0)
    # "kitten" vs "sitting": matches "itt", "n" -> 2*4/13
    result = textual_difference().run_sync(input="kitten", output="sitting")
    assert result.preprocess_step_result.ratio == pytest.approx(8 / 13)
    assert result.score == 0.62
    assert result.preprocess_step_result.length_diff == pytest.approx(1 / 7)
    assert result.preprocess_step_result.confidence == pytest.approx(6 / 7)


def test_textual_difference_matches_difflib_and_direction() -> None:
    source, target = "The quick brown fox jumps", "The quick red fox leaps"
    result = textual_difference().run_sync(input=source, output=target)
    assert result.preprocess_step_result.ratio == difflib.SequenceMatcher(None, source, target).ratio()
    same = textual_difference().run_sync(input=source, output=source).score
    different = textual_difference().run_sync(input=source, output="zzzz").score
    assert same == 1.0 and different == 0.0


def test_textual_difference_empty_inputs() -> None:
    both = textual_difference().run_sync(input="", output="")
    assert (both.score, both.preprocess_step_result.length_diff, both.preprocess_step_result.changes) == (1.0, 0.0, 0)
    one = textual_difference().run_sync(input="abc", output="")
    assert (one.score, one.preprocess_step_result.length_diff, one.preprocess_step_result.confidence) == (0.0, 1.0, 0.0)


def test_step_results_are_json_objects() -> None:
    result = textual_difference().run_sync(input="a", output="b")
    assert result.preprocess_step_result.model_dump() == {
        "ratio": 0.0, "changes": 1, "length_diff": 0.0, "confidence": 1.0}
