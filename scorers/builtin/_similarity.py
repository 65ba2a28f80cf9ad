"""Code-based text similarity: content similarity (Dice) and textual difference (difflib)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel

from scorers._builder import Scorer
from scorers._create import create_scorer
from scorers.builtin._common import input_text, output_text
from scorers.utils import round_to_two_decimals

_WHITESPACE = re.compile(r"\s+")


def dice_similarity(first: str, second: str) -> float:
    """Dice coefficient of the character bigrams of two strings (``string-similarity``'s
    ``compareTwoStrings``, v4).

    Whitespace is removed first; identical strings (including two empty ones) give 1, a
    string shorter than two characters against a different one gives 0. Bigrams are
    counted as a multiset. Characters are Unicode code points (JavaScript uses UTF-16 units,
    which differ only outside the Basic Multilingual Plane).

    Example:
        >>> (dice_similarity("night", "nacht"), dice_similarity("abc", "abc"), dice_similarity("a", "b"))
        (0.25, 1.0, 0.0)
    """
    first = _WHITESPACE.sub("", first)
    second = _WHITESPACE.sub("", second)
    if first == second:
        return 1.0
    if len(first) < 2 or len(second) < 2:
        return 0.0
    bigrams: dict[str, int] = {}
    for i in range(len(first) - 1):
        bigram = first[i : i + 2]
        bigrams[bigram] = bigrams.get(bigram, 0) + 1
    intersection = 0
    for i in range(len(second) - 1):
        bigram = second[i : i + 2]
        if bigrams.get(bigram, 0) > 0:
            bigrams[bigram] -= 1
            intersection += 1
    return 2.0 * intersection / (len(first) + len(second) - 2)


class ContentSimilarityPreprocess(BaseModel):
    """The texts compared by `content_similarity`, after case and whitespace normalisation."""

    processed_input: str
    processed_output: str


def content_similarity(
    *, ignore_case: bool = True, ignore_whitespace: bool = True, id: str = "content-similarity"
) -> Scorer[Any, Any]:
    """Dice similarity of the input text and the output text (Mastra's content similarity).

    Input text: every input message's text joined with ``", "``; output text: every
    assistant message's text joined the same way. With ``ignore_case`` both are lowercased,
    with ``ignore_whitespace`` runs of whitespace become one space and the ends are
    stripped. Score: `dice_similarity` of the two, rounded to two decimals; 0-1, higher
    means more similar. Two empty texts give 1.

    Args:
        ignore_case: compare lowercased texts.
        ignore_whitespace: collapse whitespace before comparing.
        id: the scorer id.

    Example:
        >>> content_similarity().run_sync(input="The quick brown fox", output="the quick brown fox").score
        1.0
        >>> content_similarity(ignore_case=False).run_sync(input="ABC", output="abc").score
        0.0
    """

    def preprocess(run: Any) -> ContentSimilarityPreprocess:
        processed_input, processed_output = input_text(run.input), output_text(run.output)
        if ignore_case:
            processed_input, processed_output = processed_input.lower(), processed_output.lower()
        if ignore_whitespace:
            processed_input = _WHITESPACE.sub(" ", processed_input).strip()
            processed_output = _WHITESPACE.sub(" ", processed_output).strip()
        return ContentSimilarityPreprocess(
            processed_input=processed_input, processed_output=processed_output
        )

    def score(results: Any) -> float:
        pre = results.preprocess_step_result
        return round_to_two_decimals(dice_similarity(pre.processed_input, pre.processed_output))

    return (
        create_scorer(
            id=id,
            name="Content Similarity",
            description="Character-bigram (Dice) similarity between the input and the output text",
            type="agent",
        )
        .preprocess(preprocess)
        .generate_score(score)
    )


class TextualDifferencePreprocess(BaseModel):
    """What `textual_difference` measured: the difflib ratio, change ops, length difference."""

    ratio: float
    changes: int
    length_diff: float
    confidence: float


def textual_difference(*, id: str = "textual-difference") -> Scorer[Any, Any]:
    """How much of the input text the output keeps (Mastra's textual difference).

    ``difflib.SequenceMatcher(None, input, output).ratio()`` over the input text (input
    messages joined with ``", "``) and the output text (assistant messages joined the same
    way), rounded to two decimals: 0-1, higher means more alike. The preprocess result also
    reports the number of non-equal opcodes (``changes``), the length difference relative
    to the longer text (``length_diff``), and ``confidence = 1 - length_diff``. Two empty
    texts give 1.

    Args:
        id: the scorer id.

    Example:
        >>> result = textual_difference().run_sync(input="abcd", output="abxd")
        >>> (result.score, result.preprocess_step_result.changes)
        (0.75, 1)
    """

    def preprocess(run: Any) -> TextualDifferencePreprocess:
        source, target = input_text(run.input), output_text(run.output)
        matcher = difflib.SequenceMatcher(None, source, target)
        changes = sum(1 for op in matcher.get_opcodes() if op[0] != "equal")
        longest = max(len(source), len(target))
        length_diff = abs(len(source) - len(target)) / longest if longest else 0.0
        return TextualDifferencePreprocess(
            ratio=matcher.ratio(), changes=changes, length_diff=length_diff,
            confidence=1 - length_diff,
        )  # fmt: skip

    return (
        create_scorer(
            id=id,
            name="Textual Difference",
            description="difflib similarity ratio between the input and the output text",
            type="agent",
        )
        .preprocess(preprocess)
        .generate_score(lambda results: round_to_two_decimals(results.preprocess_step_result.ratio))
    )
