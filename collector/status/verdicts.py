"""Verdicts (SPEC §11): what a human's label and a judge's kept score say, in one vocabulary.

A scorer is **binary** (its scores pass at ``pass_threshold``) or **categorical** (its
``[[scorers]] labels``: the kept score's label is its verdict). A human's label is read
against the scorer's `ScorerRule`:

- binary scorer: ``true``/``false``, and the words pass/fail, true/false, yes/no, 1/0 (any
  case, trimmed) are pass or fail; a number (not a boolean) passes at ``pass_threshold`` and is
  kept as a number too (MAE, RMSE and Spearman's rho compare it with the score);
- categorical scorer: a string naming one of the categories (any case, trimmed);
- anything else (another string, NaN, infinity, None, a list, ...) is `Unreadable`, with the
  reason ``tracescore labels list`` shows; it takes no part in agreement.

Pure functions over `collector.common` types; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from collector.common.labels import KeptScore
from collector.config.sections import ScorerConfig

__all__ = ["PASS", "FAIL", "HumanReading", "ScorerRule", "Unreadable", "judge_verdict", "read_label", "rule_for",
           "rules_from_config"]

PASS, FAIL = "pass", "fail"
_WORDS = {"pass": PASS, "fail": FAIL, "true": PASS, "false": FAIL, "yes": PASS, "no": FAIL, "1": PASS, "0": FAIL}


@dataclass(frozen=True)
class ScorerRule:
    """How one scorer's scores and labels become verdicts.

    ``name`` is the name its scores and labels carry (§5); ``categories`` are its
    ``[[scorers]] labels`` (the scorer is categorical when there are any).

    Example:
        >>> ScorerRule("relevancy", "Answer relevancy").categorical
        False
        >>> ScorerRule("tone", "Tone", categories=("polite", "rude")).categorical
        True
    """

    scorer_id: str
    name: str
    pass_threshold: float = 0.5
    categories: tuple[str, ...] = ()

    @property
    def categorical(self) -> bool:
        """Whether verdicts are the scorer's labels rather than pass/fail."""
        return bool(self.categories)

    @property
    def verdicts(self) -> tuple[str, ...]:
        """Every verdict, in the order a confusion matrix shows them."""
        return self.categories or (PASS, FAIL)


def rules_from_config(scorers: Iterable[tuple[str, str, ScorerConfig]]) -> dict[str, ScorerRule]:
    """The rules of the configured scorers, keyed by name, from (name, scorer id, config)
    triples (a scorer's id and name are known once it is loaded).

    Categories are the config's ``labels``, from the highest lowest-score down.

    Example:
        >>> rules = rules_from_config([
        ...     ("Answer relevancy", "relevancy", ScorerConfig(ref="m:r", pass_threshold=0.7)),
        ...     ("Tone", "tone", ScorerConfig(ref="m:t", labels={"rude": 0.0, "polite": 0.5}))])
        >>> rules["Answer relevancy"].pass_threshold, rules["Tone"].categories
        (0.7, ('polite', 'rude'))
    """
    rules = {}
    for name, scorer_id, config in scorers:
        threshold = 0.5 if config.pass_threshold is None else config.pass_threshold
        categories = tuple(label for label, _ in sorted(config.labels.items(), key=lambda kv: (-kv[1], kv[0])))
        rules[name] = ScorerRule(scorer_id, name, threshold, categories)
    return rules


@dataclass(frozen=True)
class HumanReading:
    """A label read as a verdict.

    ``number`` is the label as a number for the corrected mean (the value of a numeric label,
    1 or 0 for pass or fail; None for a category); ``value`` is set for numeric labels only.
    """

    verdict: str
    number: float | None
    value: float | None = None


@dataclass(frozen=True)
class Unreadable:
    """A label that cannot be read as a verdict of its scorer, and why."""

    reason: str


def read_label(value: object, rule: ScorerRule) -> HumanReading | Unreadable:
    """A label's value (`Label.value`) as a verdict of the scorer of ``rule``.

    Example:
        >>> binary = ScorerRule("relevancy", "Answer relevancy", pass_threshold=0.7)
        >>> read_label(True, binary), read_label(" No ", binary)
        (HumanReading(verdict='pass', number=1.0, value=None), HumanReading(verdict='fail', number=0.0, value=None))
        >>> read_label(0.8, binary)
        HumanReading(verdict='pass', number=0.8, value=0.8)
        >>> read_label("maybe", binary)
        Unreadable(reason="'maybe' is not a pass/fail word (pass, fail, true, false, yes, no, 1, 0)")
        >>> read_label(float("nan"), binary)
        Unreadable(reason='nan is not a finite number')
        >>> tone = ScorerRule("tone", "Tone", categories=("polite", "rude"))
        >>> read_label("Polite", tone), read_label("angry", tone).reason
        (HumanReading(verdict='polite', number=None, value=None), "'angry' is not one of the categories polite, rude")
    """
    if rule.categorical:
        if isinstance(value, str):
            wanted = value.strip().casefold()
            for category in rule.categories:
                if category.strip().casefold() == wanted:
                    return HumanReading(category, None)
        return Unreadable(f"{value!r} is not one of the categories {', '.join(rule.categories)}")
    if isinstance(value, bool):
        return HumanReading(PASS if value else FAIL, 1.0 if value else 0.0)
    if isinstance(value, (int, float)):
        number = float(value)
        if not math.isfinite(number):
            return Unreadable(f"{value!r} is not a finite number")
        return HumanReading(PASS if number >= rule.pass_threshold else FAIL, number, number)
    if isinstance(value, str):
        verdict = _WORDS.get(value.strip().casefold())
        if verdict is None:
            return Unreadable(f"{value!r} is not a pass/fail word ({', '.join(_WORDS)})")
        return HumanReading(verdict, 1.0 if verdict == PASS else 0.0)
    if value is None:
        return Unreadable("no value")
    return Unreadable(f"a {type(value).__name__} is not a verdict: {value!r}"[:200])


def judge_verdict(score: KeptScore, rule: ScorerRule) -> str | None:
    """The verdict of one of the judge's kept scores: pass at ``pass_threshold`` (binary), its
    label (categorical; None when it has none).

    Example:
        >>> k = KeptScore("tone", "Tone", "1", "", "ab" * 16, None, None, 0.3, "rude", 1.0)
        >>> judge_verdict(k, ScorerRule("tone", "Tone")), judge_verdict(k, ScorerRule("tone", "Tone", categories=("rude",)))
        ('fail', 'rude')
    """
    if rule.categorical:
        return score.label.strip() if score.label else None
    return PASS if score.score >= rule.pass_threshold else FAIL


def rule_for(name: str, rules: Mapping[str, ScorerRule]) -> ScorerRule:
    """The rule of the scorer named ``name``; a scorer no longer configured is binary at 0.5.

    Example:
        >>> rule_for("Gone", {}).pass_threshold
        0.5
    """
    return rules.get(name) or ScorerRule("", name)
