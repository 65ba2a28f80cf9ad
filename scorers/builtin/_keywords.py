"""Code-based keyword coverage and completeness (word-level coverage of the input)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from scorers._builder import Scorer
from scorers._create import create_scorer
from scorers.builtin._common import input_text, output_text
from scorers.utils import round_to_two_decimals

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from stop_words import get_stop_words

    return frozenset(w.lower() for w in get_stop_words("en"))


def extract_keywords(text: str) -> list[str]:
    """English keywords of ``text``: lowercased words that are not stop words or numbers,
    without duplicates, in order of first appearance.

    Stop words are the English list of the ``stop-words`` package (bundled data). This is
    the job ``keyword-extractor`` does for Mastra (``remove_digits``,
    ``return_changed_case``, ``remove_duplicates``).

    Example:
        >>> extract_keywords("The cat sat on the mat; the cat was happy in 2024.")
        ['cat', 'sat', 'mat', 'happy']
    """
    stop = _stop_words()
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        word = word.replace("’", "'")
        if word in stop or any(ch.isdigit() for ch in word):
            continue
        seen.setdefault(word, None)
    return list(seen)


class KeywordCoveragePreprocess(BaseModel):
    """The keywords of the input (reference) and of the output (response)."""

    reference_keywords: list[str]
    response_keywords: list[str]


class KeywordCoverageAnalysis(BaseModel):
    """How many reference keywords there are and how many the response has."""

    total_keywords: int
    matched_keywords: int
    missing_keywords: list[str]


def keyword_coverage(*, id: str = "keyword-coverage") -> Scorer[Any, Any]:
    """The share of the input's keywords found in the output (Mastra's keyword coverage).

    Keywords come from `extract_keywords` over the input text (all input messages) and the
    output text (all assistant messages). Score = matched / input keywords, rounded to two
    decimals: 0-1, higher is better. An input with no keywords (empty, or only stop words)
    gives 1: there was nothing to cover.

    Args:
        id: the scorer id.

    Example:
        >>> result = keyword_coverage().run_sync(
        ...     input="Explain photosynthesis in green plants",
        ...     output="Photosynthesis lets plants turn light into sugar.")
        >>> (result.score, result.analyze_step_result.missing_keywords)
        (0.5, ['explain', 'green'])
    """

    def preprocess(run: Any) -> KeywordCoveragePreprocess:
        return KeywordCoveragePreprocess(
            reference_keywords=extract_keywords(input_text(run.input)),
            response_keywords=extract_keywords(output_text(run.output)),
        )

    def analyze(results: Any) -> KeywordCoverageAnalysis:
        pre = results.preprocess_step_result
        response = set(pre.response_keywords)
        missing = [k for k in pre.reference_keywords if k not in response]
        total = len(pre.reference_keywords)
        return KeywordCoverageAnalysis(
            total_keywords=total, matched_keywords=total - len(missing), missing_keywords=missing
        )

    def score(results: Any) -> float:
        analysis = results.analyze_step_result
        if not analysis.total_keywords:
            return 1.0
        return round_to_two_decimals(analysis.matched_keywords / analysis.total_keywords)

    return (
        create_scorer(
            id=id,
            name="Keyword Coverage",
            description="Share of the input's keywords that the output mentions",
            type="agent",
        )
        .preprocess(preprocess)
        .analyze(analyze)
        .generate_score(score)
    )


def _normalize(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()


_CAMEL = re.compile(r"([a-z])([A-Z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def extract_elements(text: str) -> list[str]:
    """The elements `completeness` compares: every word of ``text`` and its base form.

    Words are normalised like Mastra does (accents removed, camelCase split, lowercased,
    anything not ``a-z0-9`` a separator). Where Mastra adds the infinitive of each verb
    (``compromise``), we add each word's lemma from ``simplemma`` (bundled English data),
    so "running" also gives "run" and "cities" also gives "city". Duplicates removed, in
    order of first appearance.

    Example:
        >>> extract_elements("The cats were running")
        ['the', 'cats', 'cat', 'were', 'be', 'running', 'run']
    """
    import simplemma

    seen: dict[str, None] = {}
    words = _NON_ALNUM.sub(" ", _normalize(_CAMEL.sub(r"\1 \2", text))).split()
    for word in words:
        seen.setdefault(word, None)
        lemma = _NON_ALNUM.sub("", _normalize(simplemma.lemmatize(word, lang="en")))
        if lemma:
            seen.setdefault(lemma, None)
    return list(seen)


def element_covered(element: str, candidates: list[str]) -> bool:
    """Mastra's match rule: exact for elements of 3 characters or fewer; otherwise one
    string contains the other and the shorter is more than 60% of the longer's length.

    Example:
        >>> (element_covered("cat", ["cats"]), element_covered("cats", ["cat"]), element_covered("photo", ["photosynthesis"]))
        (False, True, False)
    """
    for candidate in candidates:
        if len(element) <= 3:
            if element == candidate:
                return True
            continue
        longer, shorter = (element, candidate) if len(element) > len(candidate) else (candidate, element)
        if shorter in longer and len(shorter) / len(longer) > 0.6:
            return True
    return False


class CompletenessPreprocess(BaseModel):
    """The elements of the input and of the output, and the input elements not covered."""

    input_elements: list[str]
    output_elements: list[str]
    missing_elements: list[str]
    element_counts: dict[str, int]


def completeness(*, id: str = "completeness") -> Scorer[Any, Any]:
    """How much of the input the output covers, word by word (Mastra's completeness).

    Elements (`extract_elements`) of the input text (input messages joined with ``", "``)
    and of the output text (assistant messages). Score = covered input elements / input
    elements (`element_covered`), rounded to two decimals: 0-1, higher is more complete.
    An input with no elements gives 1 when the output has none either, else 0. A missing
    input or output is coerced to an empty one (so Mastra's "Inputs cannot be null or
    undefined" error cannot happen: a missing input scores like an empty one).

    Args:
        id: the scorer id.

    Example:
        >>> result = completeness().run_sync(input="List the primary colors",
        ...                                  output="The primary colors are red, blue and yellow.")
        >>> (result.score, result.preprocess_step_result.missing_elements)
        (0.8, ['list'])
    """

    def preprocess(run: Any) -> CompletenessPreprocess:
        inputs = extract_elements(input_text(run.input).strip())
        outputs = extract_elements(output_text(run.output).strip())
        missing = [e for e in inputs if e not in outputs]
        return CompletenessPreprocess(
            input_elements=inputs, output_elements=outputs, missing_elements=missing,
            element_counts={"input": len(inputs), "output": len(outputs)},
        )  # fmt: skip

    def score(results: Any) -> float:
        pre = results.preprocess_step_result
        if not pre.input_elements:
            return 1.0 if not pre.output_elements else 0.0
        covered = sum(1 for e in pre.input_elements if element_covered(e, pre.output_elements))
        return round_to_two_decimals(covered / len(pre.input_elements))

    return (
        create_scorer(
            id=id,
            name="Completeness",
            description="Share of the input's words (and their base forms) that the output covers",
            type="agent",
        )
        .preprocess(preprocess)
        .generate_score(score)
    )
