"""Few-shot examples from people's labels in the daemon (SPEC §11, "Few-shot from labels").

A scorer with ``[[scorers]] few_shot = N`` gets, in its judge's system message after the
instructions, up to N examples made of its labelled items: the content its judge was shown on
the item (`shown_prompt`, kept beside the score: `collector.work.keeper`), the people's verdict
and rationale; balanced across verdicts, newest first (`collector.common.few_shot.balanced`).

One set per scorer for the whole deployment, held in the store under the label cursor
``@examples:<scorer id>`` (`ExampleSet`): the process that takes the label lease chooses it
(`FewShot.refresh` with ``choose``: when labels changed or every ``poll_s``, and a set is replaced
at most every ``poll_s``); every process reads it (every few seconds: `AgreementWatch` drives
both), so every replica gives its judge the same examples. A score carries the judge revision in
force when it was judged: the judges' models and instructions with the examples' keys
(`FewShot.in_force`), and the items of a revision's examples never count towards that revision's
agreement (`example_exclusions`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collector.common.few_shot import EXAMPLES_CURSOR, Example, ExampleSet, balanced, label_id
from collector.common.labels import Label, judge_revision
from collector.status.agreement_labels import LabelIndex
from collector.status.verdicts import ScorerRule
from collector.store.labels_interface import LabelStore
from collector.work.registry import RegisteredScorer

logger = logging.getLogger(__name__)

LEASE_S = 60.0
"""How long choosing the sets may hold the label lease."""

SCORE_STEPS = ("generate_score", "analyze", "preprocess", "generate_reason")
"""Whose judge call's prompt is what the judge was shown: the score step's, else the step nearest it."""


def shown_prompt(result: Any) -> str | None:
    """The user prompt of the judge call a score came from (a scorer result's ``judge`` record):
    the last successful execution of its generate_score step, else of the prompt step nearest it.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> ok, failed = NS(status="success", prompt="Answer: Paris"), NS(status="failed", prompt="retry")
        >>> shown_prompt(NS(judge={"analyze": NS(executions=[NS(status="success", prompt="facts")]),
        ...                        "generate_score": NS(executions=[ok, failed])}))
        'Answer: Paris'
        >>> shown_prompt(NS(judge={})) is None, shown_prompt(None) is None
        (True, True)
    """
    judge = getattr(result, "judge", None)
    if not isinstance(judge, dict):
        return None
    for step in SCORE_STEPS:
        record = judge.get(step)
        for execution in reversed(getattr(record, "executions", None) or ()):
            if getattr(execution, "status", None) == "success" and isinstance(getattr(execution, "prompt", None), str):
                return str(execution.prompt)
    return None


async def candidates(store: LabelStore, scorer_id: str, labels: Sequence[Label], rule: ScorerRule) -> list[Example]:
    """Every labelled item of the scorer (of ``rule``) whose content its judge was shown is kept,
    as an example: that content, the people's verdict on the item (`LabelIndex`: the majority of
    its annotators' newest labels) and the rationale of the label holding it; ``at``: its newest label."""
    index = LabelIndex.of([label for label in labels if label.name == rule.name], {rule.name: rule})
    items = {key: item for (name, key), item in index.items.items() if name == rule.name}
    contents = await store.shown(scorer_id, sorted(items))
    return [Example(label_id(item.shown), contents[key], item.verdict, item.shown.rationale,
                    max(label.at for label, _ in item.labels), key)
            for key, item in sorted(items.items()) if key in contents]


@dataclass(frozen=True)
class InForce:
    """What a few-shot scorer's judge is given now: the examples' text (`judge_examples`) and the
    judge revision it makes."""

    text: str
    revision: str


async def stored_set(store: LabelStore, scorer_id: str) -> ExampleSet | None:
    """The scorer's example set held in the store (None: none, or one that cannot be read)."""
    text = await store.label_cursor(EXAMPLES_CURSOR + scorer_id)
    if not text:
        return None
    try:
        return ExampleSet.from_json(text)
    except (ValueError, KeyError, TypeError) as err:
        logger.warning("the example set of %s in the store cannot be read (%s): ignored", scorer_id, err)
        return None


async def example_exclusions(store: LabelStore, scorer_ids: Iterable[str]) -> dict[tuple[str, str], frozenset[str]]:
    """(scorer id, revision) -> the items that revision's examples are about, for the scorers' sets
    in the store: `collector.status.agreement.measure`'s ``exclude``."""
    out: dict[tuple[str, str], frozenset[str]] = {}
    for scorer_id in sorted(set(scorer_ids)):
        found = await stored_set(store, scorer_id)
        if found is not None:
            out.update(found.exclusions())
    return out


async def revisions_in_force(store: LabelStore, entries: Iterable[RegisteredScorer]) -> dict[tuple[str, str | None], str]:
    """Each scorer's judge revision now, by (id, version): with the stored examples for a few-shot one."""
    out = {}
    for entry in entries:
        found = await stored_set(store, entry.scorer_id) if entry.config.few_shot > 0 else None
        out[(entry.scorer_id, entry.version)] = judge_revision(entry.judges, found.keys if found else ())
    return out


class FewShot:
    """The example sets of the few-shot scorers (``few_shot > 0``) as one process gives them.

    Args:
        store: the deployment's labels, what judges were shown, and the sets.
        entries: the registered scorers (those with ``few_shot > 0`` get examples).
        rules: `collector.work.agreement.scorer_rules` of the registered scorers.
        holder: this process's name for the label lease while it chooses.
        poll_s: a stored set is replaced at most this often (``[labels] poll_s``).
    """

    def __init__(self, store: LabelStore, entries: Sequence[RegisteredScorer], rules: Mapping[str, ScorerRule], *,
                 holder: str, poll_s: float) -> None:
        self._store = store
        self._entries = [entry for entry in entries if entry.config.few_shot > 0]
        self._rules = {rule.scorer_id: rule for rule in rules.values()}
        self._holder = holder
        self._poll_s = poll_s
        self._sets: dict[str, ExampleSet | None] = {}
        self._in_force = {(e.scorer_id, e.version): InForce("", e.judge_revision) for e in self._entries}

    def in_force(self, entry: RegisteredScorer) -> InForce | None:
        """The examples the scorer's judge is given now (None: not a few-shot scorer). No I/O."""
        return self._in_force.get((entry.scorer_id, entry.version))

    def exclusions(self) -> dict[tuple[str, str], frozenset[str]]:
        """`example_exclusions` of the sets last read (the few-shot scorers')."""
        out: dict[tuple[str, str], frozenset[str]] = {}
        for found in self._sets.values():
            if found is not None:
                out.update(found.exclusions())
        return out

    async def refresh(self, *, choose: bool = False) -> None:
        """Read the sets from the store (and, with ``choose``, choose them first if this process
        gets the label lease)."""
        if not self._entries:
            return
        if choose and await self._store.take_label_lease(self._holder, LEASE_S):
            try:
                for scorer_id in dict.fromkeys(e.scorer_id for e in self._entries):
                    await self._choose(scorer_id)
            finally:
                await self._store.release_label_lease(self._holder)
        for scorer_id in dict.fromkeys(e.scorer_id for e in self._entries):
            self._sets[scorer_id] = found = await stored_set(self._store, scorer_id)
            for entry in self._entries:
                if entry.scorer_id == scorer_id:
                    self._in_force[(scorer_id, entry.version)] = InForce(
                        found.text if found else "", judge_revision(entry.judges, found.keys if found else ()))

    async def _choose(self, scorer_id: str) -> None:
        """Choose the scorer's set from the store's labels and store it when it changed (a set
        is kept at least ``poll_s``)."""
        entries = [e for e in self._entries if e.scorer_id == scorer_id]
        rule = self._rules.get(scorer_id) or ScorerRule(scorer_id, str(getattr(entries[0].scorer, "name", scorer_id)))
        kept = await stored_set(self._store, scorer_id)
        now = time.time()
        if kept is not None and now - kept.chosen_at < self._poll_s:
            return
        n = max(e.config.few_shot for e in entries)
        chosen = balanced(await candidates(self._store, scorer_id, await self._store.labels(rule.name), rule), n,
                          rule.verdicts)
        if [e.key for e in chosen] == (kept.keys if kept else []):
            return
        revision = judge_revision(entries[0].judges, [e.key for e in chosen])
        new = (kept.followed_by(revision, chosen, now) if kept is not None
               else ExampleSet(scorer_id, revision, tuple(chosen), now))
        await self._store.set_label_cursor(EXAMPLES_CURSOR + scorer_id, new.to_json())
        logger.info("few-shot examples of %s: %d (%s), judge revision %s", scorer_id, len(chosen),
                    ", ".join(f"{v} {sum(e.verdict == v for e in chosen)}" for v in dict.fromkeys(e.verdict for e in chosen)),
                    revision)
