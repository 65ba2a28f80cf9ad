"""What judge agreement is measured from (SPEC §11): people's labels and tracescore's own kept scores.

A `Label` is a human's verdict on one run or one conversation for one scorer (by the name
tracescore writes for that scorer's scores), read from Phoenix, MLflow, Langfuse or a JSONL
file. A `KeptScore` is what agreement needs of one of tracescore's own scores. Both name the
item they are about with `item_keys`, so that a label and a score of the same run or
conversation meet: a label on a span meets the score of that span, a label on a whole trace
(MLflow's and Langfuse's trace-level feedback) meets the scores of that trace's runs, a label
on a session meets the session's conversation score.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "LABEL_SOURCES",
    "IMPORTED",
    "PULLED",
    "KeptScore",
    "Label",
    "LabelValue",
    "item_keys",
    "judge_revision",
]

PULLED = "@pulled"
"""The label cursor under which a label pull records the deployment's last pull (JSON: when,
by which process, what each source gave), read by every replica's status."""

IMPORTED = "@imported"
"""The label cursor ``labels import`` sets to the time of its last import (every replica's
agreement is measured again when it changes)."""

LABEL_SOURCES = ("phoenix", "mlflow", "langfuse", "file")
"""Where labels come from: the three backends' own human feedback, and ``labels import``."""

LabelValue = float | bool | str | None
"""A label's value as its source gave it (a number, a boolean, a category; None: none given)."""


def item_keys(trace_id: str, span_id: str | None, session_id: str | None) -> tuple[str, ...]:
    """The keys an item is known by, most precise first: ``session:<id>`` for a conversation,
    else ``span:<span id>`` (when the span is known) and ``trace:<trace id>``.

    A label's first key is the one it is matched by; a score is found under each of its keys,
    so that a label on a whole trace finds the score of a run in it.

    Example:
        >>> item_keys("ab" * 16, "cd" * 8, None)
        ('span:cdcdcdcdcdcdcdcd', 'trace:abababababababababababababababab')
        >>> item_keys("ab" * 16, None, None)
        ('trace:abababababababababababababababab',)
        >>> item_keys("", None, "chat-7")
        ('session:chat-7',)
    """
    if session_id:
        return (f"session:{session_id}",)
    keys = [f"span:{span_id.lower()}"] if span_id else []
    if trace_id:
        keys.append(f"trace:{trace_id.lower()}")
    return tuple(keys)


@dataclass(frozen=True)
class Label:
    """One human's verdict on one run (``span_id``, or a whole trace when None) or one
    conversation (``session_id``) for the scorer named ``name``.

    ``at`` is when it was given or last changed (epoch seconds); ``source_id`` is the source's
    own id of it (an annotation or assessment id, or ``<file>:<line>``). Of the labels of one
    annotator of one source on one item for one scorer, the newest wins (`Label.identity`).

    Example:
        >>> a = Label("Answer relevancy", "ab" * 16, "cd" * 8, None, True, "phoenix", annotator="ana", at=5.0)
        >>> a.item, a.identity
        ('span:cdcdcdcdcdcdcdcd', ('Answer relevancy', 'span:cdcdcdcdcdcdcdcd', 'phoenix', 'ana'))
        >>> Label.from_dict(a.to_dict()) == a
        True
    """

    name: str
    trace_id: str
    span_id: str | None
    session_id: str | None
    value: LabelValue
    source: str
    annotator: str = ""
    rationale: str | None = None
    at: float = 0.0
    source_id: str = ""

    @property
    def item(self) -> str:
        """The key of the run or conversation the label is about (`item_keys`' first)."""
        keys = item_keys(self.trace_id, self.span_id, self.session_id)
        return keys[0] if keys else ""

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """What a newer label of the same annotator replaces: (scorer name, item, source, annotator)."""
        return (self.name, self.item, self.source, self.annotator)

    def to_dict(self) -> dict[str, Any]:
        """The label as JSON-ready fields."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Label:
        """A label from `to_dict` output (unknown keys are ignored)."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class KeptScore:
    """What judge agreement keeps of one of tracescore's own scores (SPEC §11): which scorer,
    version and judge revision gave it, on which run or conversation, its value and label,
    and when (epoch seconds). A later score of the same series on the same item replaces it.

    Example:
        >>> k = KeptScore("relevancy", "Answer relevancy", "1", "3f2a9c1e", "ab" * 16, "cd" * 8, None, 0.75, "pass", 9.0)
        >>> k.keys[0], k.series
        ('span:cdcdcdcdcdcdcdcd', ('relevancy', '1', '3f2a9c1e'))
        >>> KeptScore.from_row(k.to_row()) == k
        True
    """

    scorer_id: str
    name: str
    version: str
    revision: str
    trace_id: str
    span_id: str | None
    session_id: str | None
    score: float
    label: str | None
    at: float

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key a label can find this score under (`item_keys`)."""
        return item_keys(self.trace_id, self.span_id, self.session_id)

    @property
    def series(self) -> tuple[str, str, str]:
        """The agreement series the score belongs to: (scorer id, version, judge revision)."""
        return (self.scorer_id, self.version, self.revision)

    def to_row(self) -> str:
        """The score as one compact JSON array (how both stores keep it)."""
        return json.dumps([self.scorer_id, self.name, self.version, self.revision, self.trace_id,
                           self.span_id, self.session_id, self.score, self.label, round(self.at, 3)],
                          separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_row(cls, row: str | bytes) -> KeptScore:
        """A kept score from `to_row` output."""
        return cls(*json.loads(row))


def judge_revision(judges: Iterable[tuple[str | None, str | None]], example_ids: Sequence[str] = ()) -> str:
    """A short hash naming a judge as it judges (SPEC §11): its model and instructions (one pair
    per prompt step) and the ids of its few-shot examples. A new revision starts a new
    agreement series; a scorer without a judge has the revision ``""``.

    Example:
        >>> a = judge_revision([("openai/gpt-4o-mini", "Is the answer relevant?")])
        >>> len(a), a == judge_revision([("openai/gpt-4o-mini", "Is the answer relevant?")])
        (8, True)
        >>> a == judge_revision([("openai/gpt-4o", "Is the answer relevant?")])
        False
        >>> a == judge_revision([("openai/gpt-4o-mini", "Is the answer relevant?")], ["lbl-1"])
        False
        >>> judge_revision([])
        ''
    """
    pairs = [[model or "", instructions or ""] for model, instructions in judges]
    if not pairs and not example_ids:
        return ""
    text = json.dumps({"judges": pairs, "examples": sorted(example_ids)}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:8]
