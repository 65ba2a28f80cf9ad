"""Few-shot examples from people's labels (SPEC §11, "Few-shot from labels"): what a judge was
shown (`Shown`), what an example is (`Example`), how a set is chosen (`balanced`), how it reads
after the judge's instructions (`examples_text`), and the set one deployment holds in its
store (`ExampleSet`). Pure: the daemon (`collector.work.few_shot`) and ``tracescore align`` both
build on it, so that a set reads the same wherever it is used.

The examples' text, after the judge's instructions and a blank line (`examples_text`)::

    Examples judged by people: each gives the content a judge was shown, then the people's verdict and rationale.

    <example n="1">
    <content>
    Answer: Paris is the capital of France.
    Rate it from 0 to 1.
    </content>
    <verdict>pass</verdict>
    <rationale>names the right city</rationale>
    </example>

Each example's key (`Example.key`: its label's id and a digest of its content, verdict and
rationale) goes into the judge revision (`collector.common.labels.judge_revision`): a set that
changes in any way is a new revision.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from collector.common.labels import Label, item_keys

__all__ = ["EXAMPLES_CURSOR", "EXAMPLES_HEADER", "PAST_SETS", "SHOWN_CHARS", "Example", "ExampleSet", "Shown",
           "balanced", "examples_text", "label_id"]

SHOWN_CHARS = 4_000
"""The content a judge was shown is kept cut to this many characters."""

EXAMPLES_CURSOR = "@examples:"
"""The label cursor (`LabelStore.label_cursor`) under which a scorer's `ExampleSet` is kept,
followed by the scorer id: one set for every replica."""

PAST_SETS = 50
"""Earlier sets of a scorer whose revisions and items an `ExampleSet` remembers (their items
stay out of those revisions' agreement)."""

EXAMPLES_HEADER = ("Examples judged by people: each gives the content a judge was shown, "
                   "then the people's verdict and rationale.")


@dataclass(frozen=True)
class Shown:
    """The content one judge call of a scorer was shown (the user prompt of its score step), for the
    run or conversation it judged, and when (epoch seconds).

    Example:
        >>> s = Shown("q", "AB" * 16, "cd" * 8, None, "Answer: Paris", 5.0)
        >>> s.item, s.trace
        ('span:cdcdcdcdcdcdcdcd', 'abababababababababababababababab')
        >>> Shown("q", "ab" * 16, None, "chat-7", "...", 5.0).trace  # a conversation: no trace of its own
        ''
    """

    scorer_id: str
    trace_id: str
    span_id: str | None
    session_id: str | None
    content: str
    at: float

    @property
    def item(self) -> str:
        """The key a label of the same run or conversation is matched by (`item_keys`' first)."""
        keys = item_keys(self.trace_id, self.span_id, self.session_id)
        return keys[0] if keys else ""

    @property
    def trace(self) -> str:
        """The trace a label on a whole trace finds it by ("" for a conversation)."""
        return "" if self.session_id else self.trace_id.lower()


def label_id(label: Label) -> str:
    """A label's id: its source's own (``source_id``), else its identity.

    Example:
        >>> label_id(Label("Q", "ab" * 16, None, None, True, "file", source_id="labels.jsonl:3"))
        'labels.jsonl:3'
        >>> label_id(Label("Q", "ab" * 16, None, None, True, "phoenix", annotator="ana"))
        '["Q","trace:abababababababababababababababab","phoenix","ana"]'
    """
    return label.source_id or json.dumps(label.identity, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Example:
    """One labelled example: the content the judge was shown, the people's verdict on it and the
    rationale given (``at``: when it was labelled; ``item``: the item it is about).

    Example:
        >>> a = Example("lbl-1", "Answer: Paris", "pass", "right city", at=2.0, item="span:cdcdcdcdcdcdcdcd")
        >>> a.key.startswith("lbl-1#"), a.key == Example("lbl-1", "Answer: Paris", "fail", "right city").key
        (True, False)
    """

    id: str
    content: str
    verdict: str
    rationale: str | None = None
    at: float = 0.0
    item: str = ""

    @property
    def key(self) -> str:
        """What the judge revision holds of it: its id and a digest of what the judge reads of it."""
        text = json.dumps([self.content, self.verdict, self.rationale], ensure_ascii=False)
        return f"{self.id}#{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def balanced(candidates: Iterable[Example], n: int, verdicts: Sequence[str] = ()) -> list[Example]:
    """Up to ``n`` examples balanced across verdicts: one of each verdict in turn (``verdicts``'
    order first, then any other verdict alphabetically), the newest first within each (ties by id);
    a verdict that runs out leaves its turns to the others.

    Example:
        >>> ex = [Example(f"p{i}", "...", "pass", at=float(i)) for i in range(5)] + [
        ...       Example("f0", "...", "fail", at=9.0)]
        >>> [e.id for e in balanced(ex, 3, ("pass", "fail"))]
        ['p4', 'f0', 'p3']
        >>> [e.id for e in balanced(ex, 4, ("fail", "pass"))], balanced(ex, 0)
        (['f0', 'p4', 'p3', 'p2'], [])
    """
    by_verdict: dict[str, list[Example]] = {}
    for example in candidates:
        by_verdict.setdefault(example.verdict, []).append(example)
    order = [v for v in dict.fromkeys(verdicts) if v in by_verdict]
    order += sorted(v for v in by_verdict if v not in order)
    queues = [sorted(by_verdict[v], key=lambda e: (-e.at, e.id)) for v in order]
    chosen: list[Example] = []
    for turn in range(max((len(q) for q in queues), default=0)):
        for queue in queues:
            if turn < len(queue) and len(chosen) < n:
                chosen.append(queue[turn])
    return chosen


def examples_text(examples: Sequence[Example]) -> str:
    """The examples as the judge's system message shows them after its instructions (the module
    docstring's format); "" for none.

    Example:
        >>> print(examples_text([Example("l1", "Answer: Paris", "pass", "right city")]))
        Examples judged by people: each gives the content a judge was shown, then the people's verdict and rationale.
        <BLANKLINE>
        <example n="1">
        <content>
        Answer: Paris
        </content>
        <verdict>pass</verdict>
        <rationale>right city</rationale>
        </example>
        >>> examples_text([])
        ''
    """
    if not examples:
        return ""
    parts = [EXAMPLES_HEADER]
    for n, example in enumerate(examples, 1):
        parts.append(f'<example n="{n}">\n<content>\n{example.content}\n</content>\n'
                     f"<verdict>{example.verdict}</verdict>\n<rationale>{example.rationale or ''}</rationale>\n"
                     "</example>")
    return "\n\n".join(parts)


@dataclass(frozen=True)
class ExampleSet:
    """The examples a scorer's judge is given, as the deployment's store holds them: the judge
    revision they make, when they were chosen, and the revisions and example items of the sets
    before (``past``, newest last, at most `PAST_SETS`).

    Example:
        >>> s = ExampleSet("q", "1a2b3c4d", (Example("l1", "c", "pass", item="span:cdcdcdcdcdcdcdcd"),), 7.0)
        >>> ExampleSet.from_json(s.to_json()) == s, s.items
        (True, ('span:cdcdcdcdcdcdcdcd',))
        >>> t = s.followed_by("9f8e7d6c", (), 9.0)
        >>> t.past, t.exclusions()
        ((('1a2b3c4d', ('span:cdcdcdcdcdcdcdcd',)),), {('q', '1a2b3c4d'): frozenset({'span:cdcdcdcdcdcdcdcd'})})
    """

    scorer_id: str
    revision: str
    examples: tuple[Example, ...]
    chosen_at: float
    past: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    @property
    def keys(self) -> list[str]:
        """The examples' keys (`Example.key`): what the judge revision holds."""
        return [example.key for example in self.examples]

    @property
    def items(self) -> tuple[str, ...]:
        """The items the examples are about."""
        return tuple(example.item for example in self.examples)

    @property
    def text(self) -> str:
        """The examples as the judge reads them (`examples_text`)."""
        return examples_text(self.examples)

    def followed_by(self, revision: str, examples: Sequence[Example], at: float) -> ExampleSet:
        """The set that replaces this one, remembering this one's revision and items."""
        past = (*self.past, (self.revision, self.items))[-PAST_SETS:] if self.examples else self.past
        return replace(self, revision=revision, examples=tuple(examples), chosen_at=at, past=past)

    def exclusions(self) -> dict[tuple[str, str], frozenset[str]]:
        """(scorer id, revision) -> the items that revision's examples are about, this set's and
        the past ones': items that never count towards that revision's agreement."""
        out: dict[tuple[str, str], frozenset[str]] = {}
        for revision, items in (*self.past, (self.revision, self.items)):
            if items:
                out[(self.scorer_id, revision)] = out.get((self.scorer_id, revision), frozenset()) | frozenset(items)
        return out

    def to_json(self) -> str:
        """The set as the store keeps it."""
        return json.dumps({"scorer": self.scorer_id, "revision": self.revision, "chosen_at": self.chosen_at,
                           "examples": [asdict(e) for e in self.examples],
                           "past": [[revision, list(items)] for revision, items in self.past]},
                          separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> ExampleSet:
        """A set from `to_json` output."""
        data: dict[str, Any] = json.loads(text)
        return cls(str(data["scorer"]), str(data["revision"]), tuple(Example(**e) for e in data["examples"]),
                   float(data["chosen_at"]), tuple((str(r), tuple(items)) for r, items in data.get("past", ())))
