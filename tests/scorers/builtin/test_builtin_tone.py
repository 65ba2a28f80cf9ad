"""Tone consistency with AFINN-165 sentiment (the JS `sentiment` algorithm)."""

from __future__ import annotations

import pytest

from scorers.builtin import analyze_sentiment, tone_consistency
from scorers.utils import make_agent_run, make_message


def test_analyze_sentiment_afinn_scores_and_comparative() -> None:
    s = analyze_sentiment("I love it")  # love = 3, three tokens
    assert (s.score, s.tokens, s.comparative, s.positive, s.negative) == (3, 3, 1.0, ["love"], [])
    s = analyze_sentiment("This is terrible!!")  # terrible = -3; "!!" is punctuation
    assert (s.score, s.tokens, s.comparative, s.negative) == (-3, 3, -1.0, ["terrible"])


def test_analyze_sentiment_negation_flips_the_next_word() -> None:
    s = analyze_sentiment("not good")  # good = 3, negated
    assert (s.score, s.negative) == (-3, ["good"])
    assert analyze_sentiment("don't like").score == -2  # like = 2


def test_analyze_sentiment_empty_text_is_neutral() -> None:
    s = analyze_sentiment("")
    assert (s.score, s.tokens, s.comparative) == (0, 1, 0.0)


def test_tone_with_reference_hand_computed() -> None:
    # answer "good job": good 3 -> 3/2 = 1.5; reference "great": 3/1 = 3.0; diff 1.5 -> 0
    result = tone_consistency(reference_tone="great").run_sync(input="q", output="good job")
    pre = result.preprocess_step_result
    assert (pre.response_sentiment, pre.reference_sentiment, pre.difference) == (1.5, 3.0, 1.5)
    assert result.score == 0.0
    # answer "a good day today": 3/4 = 0.75; reference "happy day": 3/2 = 1.5; diff 0.75
    result = tone_consistency(reference_tone="happy day").run_sync(input="q", output="a good day today")
    assert result.preprocess_step_result.difference == pytest.approx(0.75)
    assert result.score == 0.25


def test_tone_without_reference_is_sentence_stability() -> None:
    # "I love this." -> 3/3 = 1; "It is okay." -> 0/3 = 0; mean 0.5, variance 0.25
    result = tone_consistency().run_sync(input="q", output="I love this. It is okay.")
    pre = result.preprocess_step_result
    assert (pre.avg_sentiment, pre.sentiment_variance) == (0.5, 0.25)
    assert result.score == 0.75
    assert tone_consistency().run_sync(input="q", output="I love this. I hate that.").score == 0.0


def test_tone_direction_consistent_beats_mixed() -> None:
    consistent = tone_consistency().run_sync(input="q", output="Great work. Great result.").score
    mixed = tone_consistency().run_sync(input="q", output="Great work. Awful result.").score
    assert consistent == 1.0 and mixed < consistent


def test_tone_text_without_sentence_end_is_one_sentence_and_empty_is_one() -> None:
    result = tone_consistency().run_sync(input="q", output="love it")
    assert (result.score, result.preprocess_step_result.sentiment_variance) == (1.0, 0.0)
    assert tone_consistency().run_sync(input="q", output="").score == 1.0


def test_tone_reads_every_assistant_message() -> None:
    run = make_agent_run("q", [make_message("I love this.", role="assistant"),
                               make_message("I hate that.", role="assistant")])
    assert tone_consistency().run_sync(input=run.input, output=run.output).score == 0.0
