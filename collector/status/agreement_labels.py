"""The human side of judge agreement (SPEC §11): labels read, grouped per item, resolved.

Of the labels of one annotator (source, annotator) of one scorer on one item the newest
counts. The labels of one item for one scorer become one human verdict: the majority of its
annotators' verdicts (a tie goes to the newest label's), its number the mean of their numbers.
A label that cannot be read as a verdict of its scorer is set aside with the reason.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from collector.common.labels import KeptScore, Label
from collector.status.agreement_stats import annotators_kappa
from collector.status.verdicts import HumanReading, ScorerRule, Unreadable, read_label, rule_for

__all__ = ["HumanItem", "LabelIndex"]


def _newest(label: Label) -> tuple[float, str, str, str]:
    return (label.at, label.source_id, label.source, label.annotator)


@dataclass
class HumanItem:
    """The human verdict on one item for one scorer, from every annotator's newest label.

    ``number`` is the mean of the labels as numbers (None for categories), ``value`` the mean
    of the numeric labels (None without any); ``shown`` is the newest label holding the
    verdict (the one a disagreement shows); ``matched`` whether a kept score met it.

    Example:
        >>> from collector.status.verdicts import read_label
        >>> rule = ScorerRule("relevancy", "Answer relevancy")
        >>> labels = [Label("Answer relevancy", "ab" * 16, None, None, v, "file", annotator=a, at=t)
        ...           for v, a, t in ((True, "ana", 1.0), (False, "bob", 2.0))]
        >>> item = HumanItem.of([(label, read_label(label.value, rule)) for label in labels])
        >>> item.verdict, item.number, item.shown.annotator  # a tie: the newest label's verdict
        ('fail', 0.5, 'bob')
    """

    labels: list[tuple[Label, HumanReading]]
    verdict: str
    number: float | None
    value: float | None
    shown: Label
    matched: bool = False

    @classmethod
    def of(cls, labels: Sequence[tuple[Label, HumanReading]]) -> HumanItem:
        """The item's verdict from its annotators' labels (at least one)."""
        counts = Counter(reading.verdict for _, reading in labels)
        top = max(counts.values())
        newest = max((pair for pair in labels if counts[pair[1].verdict] == top), key=lambda p: _newest(p[0]))
        verdict = newest[1].verdict
        numbers = [r.number for _, r in labels if r.number is not None]
        values = [r.value for _, r in labels if r.value is not None]
        return cls(list(labels), verdict, sum(numbers) / len(numbers) if numbers else None,
                   sum(values) / len(values) if values else None, newest[0])


@dataclass
class LabelIndex:
    """Every readable label, by (scorer name, item key), resolved to a `HumanItem`; the
    unreadable ones with their reasons; the scorer names and raw ids (span, trace, session)
    that have labels.

    Example:
        >>> labels = [Label("Answer relevancy", "ab" * 16, None, None, "yes", "file", at=1.0),
        ...           Label("Answer relevancy", "ab" * 16, None, None, "no", "file", at=2.0),
        ...           Label("Answer relevancy", "cd" * 16, None, None, "perhaps", "file")]
        >>> index = LabelIndex.of(labels, {})
        >>> item = index.items[("Answer relevancy", "trace:" + "ab" * 16)]
        >>> item.verdict, len(item.labels)  # the same annotator twice: the newest label counts
        ('fail', 1)
        >>> [reason for _, reason in index.unreadable]
        ["'perhaps' is not a pass/fail word (pass, fail, true, false, yes, no, 1, 0)"]
    """

    items: dict[tuple[str, str], HumanItem]
    unreadable: list[tuple[Label, str]]
    names: frozenset[str]
    ids: frozenset[str]
    by_annotator: dict[str, dict[tuple[str, str], dict[str, str]]] = field(default_factory=dict)
    _kappas: dict[str, float | None] = field(default_factory=dict)

    @classmethod
    def of(cls, labels: Sequence[Label], rules: Mapping[str, ScorerRule]) -> LabelIndex:
        """Read, deduplicate and group ``labels`` by the rules of their scorers (a name with no
        rule is read as a binary scorer's at 0.5)."""
        newest: dict[tuple[str, str, str, str], Label] = {}
        for label in labels:
            kept = newest.get(label.identity)
            if kept is None or _newest(label) >= _newest(kept):
                newest[label.identity] = label
        groups: dict[tuple[str, str], list[tuple[Label, HumanReading]]] = defaultdict(list)
        by_annotator: dict[str, dict[tuple[str, str], dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
        unreadable = []
        for label in newest.values():
            reading = read_label(label.value, rule_for(label.name, rules))
            if isinstance(reading, Unreadable):
                unreadable.append((label, reading.reason))
                continue
            groups[(label.name, label.item)].append((label, reading))
            by_annotator[label.name][(label.source, label.annotator)][label.item] = reading.verdict
        items = {key: HumanItem.of(group) for key, group in groups.items()}
        return cls(items, unreadable, frozenset(name for name, _ in items),
                   frozenset(item.partition(":")[2] for _, item in items),
                   {name: dict(per) for name, per in by_annotator.items()})

    def may_hold(self, score: KeptScore) -> bool:
        """Whether a label may be about the item of ``score`` (a quick test on its raw ids,
        before its item keys are made)."""
        ids = self.ids
        if score.session_id:
            return score.session_id in ids
        return score.trace_id.lower() in ids or bool(score.span_id and score.span_id.lower() in ids)

    def annotators_kappa(self, name: str) -> float | None:
        """The annotators' own mean kappa on the scorer named ``name`` (pairs of annotators
        with at least 10 shared items; None when none)."""
        if name not in self._kappas:
            self._kappas[name] = annotators_kappa(self.by_annotator.get(name, {}))
        return self._kappas[name]

    def unmatched(self, names: frozenset[str] | None = None) -> dict[str, int]:
        """Readable labels that met no kept score, per scorer name (only ``names``' when given)."""
        counts: Counter[str] = Counter()
        for (name, _), item in self.items.items():
            if not item.matched and (names is None or name in names):
                counts[name] += len(item.labels)
        return dict(sorted(counts.items()))
