"""The labelled items ``tracescore align`` works on (SPEC §11).

The deployment's labels of the scorer (by the name its scores carry) are resolved to one
human verdict per item (`collector.status.agreement_labels.LabelIndex`: the newest label of
each annotator, the majority of annotators). The runs come from FILEs or ``--from URL``, read
as ``tracescore score`` reads them (`collector.commands.inspect`, `collector.receive.pull`),
and meet the labels by item keys (`collector.common.labels.item_keys`): a span label its run,
a trace label the runs of its trace, a session label the session (a conversation scorer's
items are the sessions the runs make, `collector.commands.conversations`). Only the runs a
label may be about are kept from a backend's pages.

The split is by trace id (a session: its first turn's trace), with the hash the daemon samples
with (`collector.work.registry.sampled`): the same labels and runs always give the same train
and holdout, and the runs of one trace are never on both sides.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from adapters import AgentRun
from collector.commands.conversations import session_units
from collector.commands.inspect import Loaded, add_runs, load_runs
from collector.commands.progress_bar import progress
from collector.common.labels import Label, item_keys
from collector.config import Config
from collector.receive.pull import client_for, open_puller, parse_source, window_between
from collector.receive.pull.page import read_ahead
from collector.status.agreement_labels import HumanItem, LabelIndex
from collector.work.registry import sampled

__all__ = ["LabelledItem", "Readings", "label_sources", "labelled_items", "read_runs", "split", "too_few"]


@dataclass(frozen=True)
class LabelledItem:
    """A run (or a conversation) with the people's verdict on it for the scorer.

    ``key`` is the item key the label matched (``span:``, ``trace:`` or ``session:``);
    ``trace_id`` the trace it is split by; ``conversation`` the `ConversationRun` a
    conversation scorer is given (None for a run).
    """

    key: str
    trace_id: str
    run: AgentRun
    human: HumanItem
    conversation: Any = None

    @property
    def verdict(self) -> str:
        """The people's verdict."""
        return self.human.verdict

    @property
    def rationale(self) -> str | None:
        """The rationale of the label holding the verdict (the newest such)."""
        return self.human.shown.rationale

    @property
    def labelled_at(self) -> float:
        """When the newest label on it was given (epoch seconds)."""
        return max(label.at for label, _ in self.human.labels)


@dataclass
class Readings:
    """What was read: the runs kept, where from (for messages), files that failed."""

    loaded: Loaded
    where: str
    runs_read: int = 0
    failed_files: list[str] = field(default_factory=list)


def _wanted(run: AgentRun, index: LabelIndex, conversation: bool) -> bool:
    if conversation:
        return bool(run.session_id) and str(run.session_id) in index.ids
    return run.trace_id.lower() in index.ids or run.span_id.lower() in index.ids


def _keep(loaded: Loaded, into: Loaded, index: LabelIndex, conversation: bool) -> None:
    for run in loaded.runs:
        if _wanted(run, index, conversation):
            into.runs.append(run)
            key = (run.trace_id, run.span_id)
            into.span_attributes[key] = loaded.span_attributes.get(key, {})
    into.traces += loaded.traces


async def read_runs(args: argparse.Namespace, config: Config, index: LabelIndex, conversation: bool,
                    err: Console) -> Readings:
    """The runs of FILEs or ``--from URL`` that a label may be about (a conversation scorer: the
    turns of labelled sessions).

    Raises:
        collector.common.errors.ConfigError: a bad URL or time.
        collector.common.errors.PullError: the backend refused or failed.
    """
    keys = list(config.sessions.extra_keys)
    kept = Loaded()
    if not getattr(args, "source", None):
        loaded = await asyncio.to_thread(load_runs, args.files, err, keys)  # file reads, off the loop
        _keep(loaded, kept, index, conversation)
        return Readings(kept, f"{len(args.files)} FILE argument(s)", len(loaded.runs), loaded.failed_files)
    source = parse_source(args.source)
    window = window_between(getattr(args, "since", None), getattr(args, "until", None))
    readings = Readings(kept, str(source))
    async with client_for(source, config.sinks) as client:
        puller = open_puller(source, client, window, getattr(args, "filter", None), getattr(args, "page_size", None))
        await puller.check()
        with progress(err) as bar:
            task = bar.add_task(f"reading {source.backend}", total=None)
            async for page in read_ahead(puller.pages(None)):
                loaded = add_runs(Loaded(), page.traces, keys)
                readings.runs_read += len(loaded.runs)
                _keep(loaded, kept, index, conversation)
                bar.update(task, advance=len(page.traces), total=page.total)
    return readings


def _human(index: LabelIndex, name: str, keys: Sequence[str]) -> tuple[str, HumanItem] | None:
    for key in keys:  # the most precise key that has labels
        item = index.items.get((name, key))
        if item is not None:
            return key, item
    return None


def labelled_items(loaded: Loaded, index: LabelIndex, name: str, conversation: bool,
                   min_turns: int = 1) -> list[LabelledItem]:
    """The runs (a conversation scorer: the sessions) of ``loaded`` that have a verdict of the
    scorer named ``name``, in the order read.

    Example:
        >>> from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
        >>> run = AgentRun("ab" * 16, "cd" * 8, "agent", "bot", "genai", 1, 2,
        ...                ScorerRunInputForAgent.model_validate({"input_messages": []}), ScorerRunOutputForAgent([]))
        >>> index = LabelIndex.of([Label("Tone", "ab" * 16, None, None, False, "file", rationale="rude")], {})
        >>> [(i.key, i.verdict, i.rationale) for i in labelled_items(Loaded(runs=[run]), index, "Tone", False)]
        [('trace:abababababababababababababababab', 'fail', 'rude')]
    """
    items = []
    if conversation:
        for unit in session_units(loaded.runs, loaded.span_attributes, None, min_turns).units:
            found = _human(index, name, item_keys("", None, unit.conversation.session_id))
            if found is not None:
                first = (unit.record.conversation or {}).get("first_trace_id") or unit.unit.trace_id
                items.append(LabelledItem(found[0], str(first), unit.unit, found[1], unit.conversation))
        return items
    for run in loaded.runs:
        found = _human(index, name, item_keys(run.trace_id, run.span_id, None))
        if found is not None:
            items.append(LabelledItem(found[0], run.trace_id, run, found[1]))
    return items


def split(items: Sequence[LabelledItem], holdout: float) -> tuple[list[LabelledItem], list[LabelledItem]]:
    """(train, holdout): an item is in the holdout when its trace id hashes below ``holdout``
    (`collector.work.registry.sampled`), the same way every time.

    Example:
        >>> from types import SimpleNamespace as I
        >>> items = [I(trace_id=f"{n:032x}") for n in range(1000)]
        >>> train, held = split(items, 0.3)
        >>> len(train) + len(held), 250 < len(held) < 350, split(items, 0.3) == (train, held)
        (1000, True, True)
    """
    train: list[LabelledItem] = []
    held: list[LabelledItem] = []
    for item in items:
        (held if sampled(item.trace_id, holdout) else train).append(item)
    return train, held


def label_sources(labels: Sequence[Label]) -> str:
    """How many labels each source gave, for messages.

    Example:
        >>> label_sources([Label("T", "a" * 32, None, None, 1, "file"), Label("T", "b" * 32, None, None, 1, "langfuse"),
        ...                Label("T", "c" * 32, None, None, 1, "file")])
        'file 2, langfuse 1'
        >>> label_sources([])
        'none'
    """
    counts = Counter(label.source for label in labels)
    return ", ".join(f"{source} {n}" for source, n in sorted(counts.items())) or "none"


def too_few(scorer_id: str, name: str, items: Sequence[LabelledItem], labels: Sequence[Label],
            index: LabelIndex, readings: Readings, min_labels: int) -> str:
    """The message when fewer than ``--min-labels`` labelled items were found: how many, where
    their labels came from, and where the other labels went.

    Example:
        >>> labels = [Label("Tone", f"{n:032x}", None, None, True, "file") for n in range(3)]
        >>> index = LabelIndex.of(labels, {})
        >>> print(too_few("tone", "Tone", [], labels, index, Readings(Loaded(), "2 FILE argument(s)", 5), 20))
        tracescore: align tone: 0 labelled item(s) (labels: none) among the 5 run(s) read from 2 FILE argument(s), fewer than --min-labels 20; the store holds 3 label(s) of 'Tone' (file 3): 3 of them on no run read (read more files, or a wider --since/--until window)
    """
    used = [label for item in items for label, _ in item.human.labels]
    text = (f"tracescore: align {scorer_id}: {len(items)} labelled item(s) (labels: {label_sources(used)}) among "
            f"the {readings.runs_read} run(s) read from {readings.where}, fewer than --min-labels {min_labels}; "
            f"the store holds {len(labels)} label(s) of {name!r} ({label_sources(labels)})")
    matched = {item.key for item in items}
    elsewhere = sum(len(item.labels) for (_, key), item in index.items.items() if key not in matched)
    if elsewhere:
        text += f": {elsewhere} of them on no run read (read more files, or a wider --since/--until window)"
    if index.unreadable:
        text += f"; {len(index.unreadable)} cannot be read as a verdict (`tracescore labels list` says why)"
    return text
