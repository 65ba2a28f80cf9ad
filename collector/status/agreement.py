"""Judge agreement (SPEC §11): tracescore's kept scores joined with people's labels, one
series per (scorer id, version, judge revision).

`measure` reads the kept scores once, in the batches the store scans them in (there may be a
million; labels are thousands): the labels are indexed first by (scorer name, item key), and
each score adds to its series' running count, mean and variance (Welford) and, when a label
is about its item, to the series' pairs. Memory stays bounded by the labels, not the scores.

A label meets the kept scores carrying its name whose item keys hold its item: a span label
meets that span's score, a trace label the scores of that trace's runs, a session label the
session's score; a score is found by its most precise key that has labels. A label no score
in the window meets is unmatched (it may be scored later), as is a label for no known scorer.
A few-shot revision's own examples are not judged by it: ``exclude`` names, per (scorer id,
revision), the items whose scores of that revision are not paired with their labels.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.common.labels import KeptScore, Label
from collector.status.agreement_labels import HumanItem, LabelIndex
from collector.status.agreement_stats import (
    Running,
    accuracy,
    confusion,
    corrected_mean,
    kappa,
    kappa_interval,
    numeric_errors,
)
from collector.status.verdicts import ScorerRule, judge_verdict, rule_for

__all__ = ["AgreementReport", "SeriesAgreement", "agreement_figures", "measure", "measure_scores"]

BATCH = 10_000
"""Scores per batch of `measure_scores` (the batches `measure` is given are the store's)."""

FIGURES = ("kappa", "accuracy", "mae")
"""What ``tracescore_judge_agreement{scorer,version,revision,metric}`` shows of a series."""


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass(frozen=True)
class SeriesAgreement:
    """How one series of a scorer (id, version, judge revision) agrees with the humans.

    ``n`` items have both a score and a label, of ``n_scored`` scored in the window (a score
    of a categorical scorer with no label of its own has no verdict and is not among the
    ``n``). ``annotators_kappa`` is the humans' own agreement over every label of the scorer
    (in the window or not). ``disagreements`` name the judged item (the kept score's ids) and
    show the label holding the item's verdict. Figures that cannot be computed are None
    (null in JSON).
    """

    scorer: str
    version: str
    revision: str
    name: str
    n: int
    n_scored: int
    accuracy: float | None
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    confusion: dict[str, dict[str, int]]
    mae: float | None
    rmse: float | None
    spearman: float | None
    annotators_kappa: float | None
    judge_mean: float | None
    corrected_mean: float | None
    corrected_ci: tuple[float, float] | None
    disagreements: tuple[dict[str, Any], ...] = ()

    def to_json(self, disagreements: bool = False) -> dict[str, Any]:
        """The series as ``tracescore agreement --json`` prints it (SPEC §11); with
        ``disagreements``, the list of them too."""
        out: dict[str, Any] = {
            "scorer": self.scorer, "version": self.version, "revision": self.revision,
            "n": self.n, "n_scored": self.n_scored, "accuracy": _r(self.accuracy), "kappa": _r(self.kappa),
            "kappa_ci": [_r(x) for x in self.kappa_ci] if self.kappa_ci else None,
            "confusion": self.confusion, "mae": _r(self.mae), "rmse": _r(self.rmse),
            "spearman": _r(self.spearman), "annotators_kappa": _r(self.annotators_kappa),
            "judge_mean": _r(self.judge_mean), "corrected_mean": _r(self.corrected_mean),
            "corrected_ci": [_r(x) for x in self.corrected_ci] if self.corrected_ci else None,
        }
        if disagreements:
            out["disagreements"] = [dict(d) for d in self.disagreements]
        return out


@dataclass(frozen=True)
class AgreementReport:
    """Every series in the window (sorted by scorer, version, revision), the labels no score
    met per scorer name, and the labels that could not be read, with the reason."""

    series: list[SeriesAgreement]
    unmatched: dict[str, int]
    unreadable: list[tuple[Label, str]]


@dataclass
class _Series:
    name: str
    running: Running = field(default_factory=Running)
    pairs: dict[str, tuple[KeptScore, HumanItem]] = field(default_factory=dict)


class _Join:
    """One pass over the kept scores: running figures per series, pairs with labelled items."""

    def __init__(self, labels: Sequence[Label], rules: Mapping[str, ScorerRule], since: float,
                 scorer: str | None, exclude: Mapping[tuple[str, str], frozenset[str]] | None = None) -> None:
        self.index = LabelIndex.of(labels, rules)
        self.rules, self.since, self.scorer, self.exclude = rules, since, scorer, dict(exclude or {})
        self.series: dict[tuple[str, str, str], _Series] = {}

    def add(self, batch: Iterable[KeptScore]) -> None:
        """Take one batch of kept scores."""
        index, series, since, scorer, exclude = self.index, self.series, self.since, self.scorer, self.exclude
        items, names, isfinite = index.items, index.names, math.isfinite
        for score in batch:
            if score.at < since or (scorer is not None and score.scorer_id != scorer) or not isfinite(score.score):
                continue
            key = (score.scorer_id, score.version, score.revision)
            one = series.get(key)
            if one is None:
                one = series[key] = _Series(score.name)
            one.running.add(score.score)
            if score.name in names and index.may_hold(score):
                keys = score.keys
                for item_key in keys:
                    item = items.get((score.name, item_key))
                    if item is not None:
                        item.matched = True
                        skip = exclude.get((score.scorer_id, score.revision)) if exclude else None
                        if skip is not None and not skip.isdisjoint(keys):
                            break  # an example of this revision's judge: not judged by it
                        seen = one.pairs.get(keys[0])
                        if seen is None or seen[0].at <= score.at:  # a later score of an item replaces it
                            one.pairs[keys[0]] = (score, item)
                        break

    def report(self) -> AgreementReport:
        """The figures of every series, once every batch is in."""
        out = [self._series(key, one) for key, one in sorted(self.series.items())]
        names = None
        if self.scorer is not None:
            names = frozenset({r.name for r in self.rules.values() if r.scorer_id == self.scorer}
                              | {one.name for one in self.series.values()})
        unreadable = [(label, why) for label, why in self.index.unreadable if names is None or label.name in names]
        return AgreementReport(out, self.index.unmatched(names), unreadable)

    def _series(self, key: tuple[str, str, str], one: _Series) -> SeriesAgreement:
        rule = rule_for(one.name, self.rules)
        pairs = sorted(one.pairs.values(), key=lambda p: (p[0].trace_id, p[0].span_id or "", p[0].session_id or ""))
        judged = [(score, item, verdict) for score, item in pairs
                  if (verdict := judge_verdict(score, rule)) is not None]
        human = [item.verdict for _, item, _ in judged]
        judge = [verdict for _, _, verdict in judged]
        numeric = [(score.score, item.value) for score, item, _ in judged if item.value is not None]
        mae, rmse, rho = numeric_errors([s for s, _ in numeric], [v for _, v in numeric])
        worth = [] if rule.categorical else [(s.score, i.number) for s, i, _ in judged if i.number is not None]
        mean, interval = corrected_mean(one.running, [s for s, _ in worth], [h for _, h in worth])
        return SeriesAgreement(
            scorer=key[0], version=key[1], revision=key[2], name=one.name, n=len(judged),
            n_scored=one.running.count, accuracy=accuracy(human, judge), kappa=kappa(human, judge),
            kappa_ci=kappa_interval(human, judge), confusion=confusion(human, judge, rule.verdicts),
            mae=mae, rmse=rmse, spearman=rho, annotators_kappa=self.index.annotators_kappa(one.name),
            judge_mean=one.running.mean if one.running.count else None, corrected_mean=mean,
            corrected_ci=interval,
            disagreements=tuple(_disagreement(score, item) for score, item, verdict in judged
                                if verdict != item.verdict))


def _disagreement(score: KeptScore, item: HumanItem) -> dict[str, Any]:
    shown = item.shown
    return {"trace_id": score.trace_id, "span_id": score.span_id, "session_id": score.session_id,
            "score": score.score, "label": shown.value, "rationale": shown.rationale, "annotator": shown.annotator}


async def measure(batches: AsyncIterable[list[KeptScore]], labels: Sequence[Label], rules: Mapping[str, ScorerRule],
                  *, since: float = 0.0, scorer: str | None = None,
                  exclude: Mapping[tuple[str, str], frozenset[str]] | None = None) -> AgreementReport:
    """Judge agreement over the kept scores scored at or after ``since`` (epoch seconds; of the
    scorer with id ``scorer`` only, when given), read once from ``batches``. Labels are not
    windowed: a label counts when a score in the window meets it, else it is unmatched.
    ``exclude``: (scorer id, revision) -> item keys whose scores of that series are not paired
    (a few-shot revision's examples, `collector.common.few_shot.ExampleSet.exclusions`).

    ``rules`` are the scorers' `ScorerRule` by name; a score or label of a name with none is
    read as a binary scorer's at 0.5. The work runs in a thread, a batch at a time, so the
    event loop keeps serving.
    """
    join = await asyncio.to_thread(_Join, labels, rules, since, scorer, exclude)
    async for batch in batches:
        await asyncio.to_thread(join.add, batch)
    return await asyncio.to_thread(join.report)


def measure_scores(scores: Iterable[KeptScore], labels: Sequence[Label], rules: Mapping[str, ScorerRule],
                   *, since: float = 0.0, scorer: str | None = None,
                   exclude: Mapping[tuple[str, str], frozenset[str]] | None = None) -> AgreementReport:
    """`measure` over scores at hand, in this thread.

    Example:
        >>> trace = "ab" * 16
        >>> scores = [KeptScore("relevancy", "Answer relevancy", "1", "", trace, span, None, x, None, 1.0)
        ...           for span, x in (("cd" * 8, 0.9), ("ef" * 8, 0.2), ("12" * 8, 0.7))]
        >>> labels = [Label("Answer relevancy", trace, "cd" * 8, None, True, "file"),
        ...           Label("Answer relevancy", trace, "ef" * 8, None, "pass", "file"),
        ...           Label("Faithfulness", trace, None, None, False, "file")]
        >>> report = measure_scores(scores, labels, {})
        >>> s = report.series[0]
        >>> s.n, s.n_scored, s.accuracy, s.confusion["pass"], report.unmatched
        (2, 3, 0.5, {'pass': 1, 'fail': 1}, {'Faithfulness': 1})
        >>> mine = measure_scores(scores, labels, {}, exclude={("relevancy", ""): frozenset({"span:" + "cd" * 8})})
        >>> mine.series[0].n, mine.series[0].n_scored  # span cd's label was an example of this revision
        (1, 3)
    """
    join = _Join(labels, rules, since, scorer, exclude)
    batch: list[KeptScore] = []
    for score in scores:
        batch.append(score)
        if len(batch) >= BATCH:
            join.add(batch)
            batch = []
    join.add(batch)
    return join.report()


def agreement_figures(report: AgreementReport) -> dict[tuple[str, str, str, str], float]:
    """The figures of ``tracescore_judge_agreement{scorer,version,revision,metric}``: each
    series' kappa, accuracy and MAE (those that exist).

    Example:
        >>> s = SeriesAgreement("relevancy", "1", "3f2a9c1e", "Answer relevancy", 20, 90, 0.85, 0.7, (0.5, 0.9), {},
        ...                     None, None, None, None, 0.6, 0.55, (0.5, 0.6))
        >>> agreement_figures(AgreementReport([s], {}, []))
        {('relevancy', '1', '3f2a9c1e', 'kappa'): 0.7, ('relevancy', '1', '3f2a9c1e', 'accuracy'): 0.85}
    """
    figures = {}
    for s in report.series:
        for metric in FIGURES:
            value = getattr(s, metric)
            if value is not None:
                figures[(s.scorer, s.version, s.revision, metric)] = float(value)
    return figures
