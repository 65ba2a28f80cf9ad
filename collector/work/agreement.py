"""Judge agreement kept current for ``/status`` and ``/metrics`` (SPEC §11).

`AgreementWatch` measures, every ``poll_s`` and soon after any process pulled or imported labels, every scorer's
agreement with the labels in the store (`collector.status.agreement.measure` over the kept
scores of the window), sets ``tracescore_judge_agreement`` and ``tracescore_labels_total``,
and keeps the summary `collector.status` shows. Every replica measures the same store, so
every replica reports the same figures. Nothing here is on the scoring path. It also drives the
few-shot example sets (`collector.work.few_shot.FewShot`): chosen before each measure, read
every `CHECK_S`; a few-shot revision's own examples are left out of its agreement.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import time
from collections.abc import Iterable, Mapping
from numbers import Real
from typing import Any

from collector.common.aio import LoopTask
from collector.common.labels import IMPORTED, PULLED
from collector.common.metrics import Metrics
from collector.status.agreement import AgreementReport, agreement_figures, measure
from collector.status.verdicts import ScorerRule, rules_from_config
from collector.store.labels_interface import LabelStore
from collector.work.few_shot import FewShot, example_exclusions
from collector.work.registry import RegisteredScorer

logger = logging.getLogger(__name__)

CHECK_S = 5.0
"""How often a replica looks whether labels were pulled or imported (by any process), to
measure again at once rather than at the next ``poll_s``."""


_refrozen = False


def refreeze_once() -> None:
    """After a process's first measure, which imported numpy, scipy and scikit-learn (some 67,000
    objects): if the daemon froze what its start made (``gc.freeze``, `collector.commands.serve`),
    freeze these too, once, so that every full garbage collection does not walk them again (one
    took 55 ms more; the end-to-end bench's worker CPU per run rose with it)."""
    global _refrozen
    if not _refrozen and gc.get_freeze_count() > 0:
        gc.freeze()
        _refrozen = True


def scorer_rules(entries: Iterable[RegisteredScorer]) -> dict[str, ScorerRule]:
    """How each registered scorer's scores compare with labels, by the name its scores carry
    (`collector.status.verdicts.rules_from_config`): a scorer that sets its own ``pass_threshold``
    keeps it when the config gives none.

    Example:
        >>> from collector.config import ScorerConfig
        >>> class S:
        ...     id = "tone"; name = "Tone"; version = None; pass_threshold = 0.7
        >>> scorer_rules([RegisteredScorer(S(), ScorerConfig(ref="m:S"))])["Tone"]
        ScorerRule(scorer_id='tone', name='Tone', pass_threshold=0.7, categories=())
    """
    triples = []
    for entry in entries:
        config, own = entry.config, getattr(entry.scorer, "pass_threshold", None)
        if config.pass_threshold is None and not config.labels and isinstance(own, Real) and not isinstance(own, bool):
            config = config.model_copy(update={"pass_threshold": float(own)})
        triples.append((str(getattr(entry.scorer, "name", None) or entry.scorer_id), entry.scorer_id, config))
    return rules_from_config(triples)


def scorer_of(name: str, rules: Mapping[str, ScorerRule]) -> str:
    """The scorer id a label's name belongs to (the name itself for a scorer not configured)."""
    rule = rules.get(name)
    return rule.scorer_id if rule is not None else name


class AgreementWatch(LoopTask):
    """Measures agreement from the store every ``poll_s`` (and on `wake`).

    Args:
        store: the deployment's labels and kept scores.
        rules: `scorer_rules` of the registered scorers.
        metrics: the service's instruments.
        window_s: the kept scores measured (``[labels] retain``).
        poll_s: how often it measures.
        examples: the few-shot example sets to choose and read (None: none).
    """

    loop_name = "agreement-watch"

    def __init__(self, store: LabelStore, rules: Mapping[str, ScorerRule], metrics: Metrics, *,
                 window_s: float, poll_s: float, examples: FewShot | None = None) -> None:
        self.examples = examples
        self._store = store
        self._rules = dict(rules)
        self._metrics = metrics
        self._window_s = window_s
        self._poll_s = poll_s
        self._wake = asyncio.Event()
        self._figures: set[tuple[str, str, str, str]] = set()
        self._marks: tuple[str | None, str | None] = (None, None)
        self.summary: dict[str, Any] | None = None

    async def refresh(self) -> AgreementReport | None:
        """Measure now (the few-shot examples chosen first); set the gauges and `summary` (None: no label yet)."""
        if self.examples is not None:
            await self.examples.refresh(choose=True)
        counts = await self._store.label_counts()
        for (name, source), count in counts.items():
            self._metrics.labels_total.labels(scorer_of(name, self._rules), source).set(count)
        last_pull = await self._store.label_cursor(PULLED)  # the deployment's, whoever pulled
        if not counts:
            self.summary = {"labels": {}, "series": [], "last_pull": json.loads(last_pull) if last_pull else None}
            return None
        labels = await self._store.labels()
        exclude = await example_exclusions(self._store, {rule.scorer_id for rule in self._rules.values()})
        report = await measure(self._store.scan_kept_scores(since=time.time() - self._window_s), labels,
                               self._rules, since=time.time() - self._window_s, exclude=exclude)
        self._set_gauges(report)
        refreeze_once()
        by_scorer: dict[str, dict[str, int]] = {}
        for (name, source), count in counts.items():
            by_scorer.setdefault(scorer_of(name, self._rules), {})[source] = count
        self.summary = {
            "labels": by_scorer, "unmatched": dict(report.unmatched), "unreadable": len(report.unreadable),
            "series": [{k: row.to_json()[k] for k in ("scorer", "version", "revision", "n", "n_scored",
                                                      "kappa", "accuracy", "mae")} for row in report.series],
            "measured_at": time.time(), "last_pull": json.loads(last_pull) if last_pull else None,
        }
        return report

    def _set_gauges(self, report: AgreementReport) -> None:
        figures = agreement_figures(report)
        figures.update({(s.scorer, s.version, s.revision, "n"): float(s.n) for s in report.series})
        for key, value in figures.items():
            self._metrics.judge_agreement.labels(*key).set(value)
        for key in self._figures - figures.keys():  # gone: a series left the window, or its MAE
            with contextlib.suppress(KeyError):
                self._metrics.judge_agreement.remove(*key)
        self._figures = set(figures)

    def wake(self, *_: Any) -> None:
        """Measure again soon (labels were pulled)."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop measuring."""
        await self.stop_loop()

    async def _changed(self) -> bool:
        """Whether labels were pulled or imported since the last measure (by any process)."""
        marks = (await self._store.label_cursor(PULLED), await self._store.label_cursor(IMPORTED))
        changed, self._marks = marks != self._marks, marks
        return changed

    async def _loop(self) -> None:
        measured = -float("inf")
        while True:
            try:
                if await self._changed() or time.monotonic() - measured >= self._poll_s:
                    measured = time.monotonic()
                    await self.refresh()
                elif self.examples is not None:  # the sets another process chose
                    await self.examples.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                logger.warning("measuring judge agreement failed: %s: %s", type(err).__name__, err)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(self._poll_s, CHECK_S))
            if self._wake.is_set():
                self._wake.clear()
                measured = -float("inf")
