"""Code-based tone consistency, with an AFINN sentiment analyser (the JS ``sentiment`` library's)."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel

from scorers._builder import Scorer
from scorers._create import create_scorer
from scorers.builtin._common import output_text
from scorers.utils import round_to_two_decimals

# The JS `sentiment` library's English negators: a negator right before a word flips its score.
_NEGATORS = frozenset(
    "cant can't dont don't doesnt doesn't not non wont won't isnt isn't".split()
)
_PUNCTUATION = re.compile(r"[.,/#!?$%^&*;:{}=_`\"~()]")
_SPACES = re.compile(r"\s+")
_SENTENCE = re.compile(r"[^.!?]+[.!?]+")


@lru_cache(maxsize=1)
def _afinn() -> dict[str, int]:
    data = resources.files("afinn").joinpath("data", "AFINN-en-165.txt").read_text("utf-8")
    lexicon: dict[str, int] = {}
    for line in data.splitlines():
        word, _, value = line.rpartition("\t")
        if word:
            lexicon[word] = int(value)
    return lexicon


class Sentiment(BaseModel):
    """The sentiment of a text: total AFINN score, per-token mean, and the scored words."""

    score: int
    comparative: float
    tokens: int
    positive: list[str]
    negative: list[str]


def analyze_sentiment(text: str) -> Sentiment:
    """AFINN-165 sentiment of ``text``, as the JS ``sentiment`` library computes it.

    Tokens: lowercased, punctuation (``.,/#!?$%^&*;:{}=_`"~()``) replaced by spaces, split
    on whitespace. Each token in the AFINN-165 lexicon (from the ``afinn`` package) adds
    its valence (-5..5), negated when the token before it is a negator ("not", "don't"...).
    ``comparative`` = score / number of tokens (an empty text counts as one empty token).
    Emoji are not scored (the JS library also scores them).

    Example:
        >>> s = analyze_sentiment("I love it. Not bad!")
        >>> (s.score, s.tokens, s.comparative, s.positive, s.negative)
        (6, 5, 1.2, ['love', 'bad'], [])
    """
    lexicon = _afinn()
    tokens = _SPACES.sub(" ", _PUNCTUATION.sub(" ", text.lower())).strip().split(" ")
    score = 0
    positive: list[str] = []
    negative: list[str] = []
    for i, token in enumerate(tokens):
        value = lexicon.get(token)
        if value is None:
            continue
        if i > 0 and tokens[i - 1] in _NEGATORS:
            value = -value
        score += value
        (positive if value > 0 else negative).append(token)
    return Sentiment(
        score=score, comparative=score / len(tokens), tokens=len(tokens),
        positive=positive, negative=negative,
    )  # fmt: skip


class ToneAnalysis(BaseModel):
    """What `tone_consistency` measured.

    With a reference tone: both comparatives and their difference. Without: the mean and
    the (population) variance of the per-sentence comparatives.
    """

    score: float
    response_sentiment: float | None = None
    reference_sentiment: float | None = None
    difference: float | None = None
    avg_sentiment: float | None = None
    sentiment_variance: float | None = None


def tone_consistency(*, reference_tone: str | None = None, id: str = "tone-consistency") -> Scorer[Any, Any]:
    """Tone consistency of the answer (Mastra's tone scorer), with AFINN sentiment.

    The answer is every assistant message's text joined with ``", "``. With
    ``reference_tone`` (a text whose tone the answer should match): score =
    max(0, 1 - |comparative(answer) - comparative(reference)|). Without: the answer is
    split into sentences (runs ending in ``.``, ``!`` or ``?``; the whole text when there is
    none) and score = max(0, 1 - variance of the sentences' comparatives), i.e. stability.
    Rounded to two decimals; 0-1, higher is more consistent. An empty answer gives 1.

    Args:
        reference_tone: a text with the expected tone, or None to score stability.
        id: the scorer id.

    Example:
        >>> tone_consistency().run_sync(input="Hi", output="I love this. I love that.").score
        1.0
        >>> tone_consistency(reference_tone="This is great").run_sync(input="Hi", output="This is bad").score
        0.0
    """

    def preprocess(run: Any) -> ToneAnalysis:
        answer = output_text(run.output)
        if reference_tone is not None:
            response = analyze_sentiment(answer).comparative
            reference = analyze_sentiment(reference_tone).comparative
            difference = abs(response - reference)
            return ToneAnalysis(
                score=max(0.0, 1 - difference), response_sentiment=response,
                reference_sentiment=reference, difference=difference,
            )  # fmt: skip
        sentences = _SENTENCE.findall(answer) or [answer]
        values = [analyze_sentiment(s).comparative for s in sentences]
        mean = sum(values) / len(values)
        variance = sum((v - mean) ** 2 for v in values) / len(values)
        return ToneAnalysis(
            score=max(0.0, 1 - variance), avg_sentiment=mean, sentiment_variance=variance
        )

    return (
        create_scorer(
            id=id,
            name="Tone Consistency",
            description="Sentiment consistency of the answer (with a reference tone, or across sentences)",
            type="agent",
        )
        .preprocess(preprocess)
        .generate_score(lambda results: round_to_two_decimals(results.preprocess_step_result.score))
    )
