"""Keep what judge agreement needs of each score (SPEC §11), off the scoring path.

The worker hands every settled score to `ScoreKeeper.add` (no I/O: a list append); a task
writes what gathered to the store (`collector.store.labels_interface.LabelStore.keep_scores`)
once a second, in one call per batch, so scoring never waits on it. A store that cannot take a
batch keeps it for the next flush; past ``max_buffer`` waiting scores the newest are dropped
and counted (agreement is a statistic: a score the store never got is one sample fewer, never
a lost score: the score itself went out through the outbox). The content a few-shot scorer's
judge was shown goes with its score (`LabelStore.keep_shown`, in the same flush), cut to
`SHOWN_CHARS` and at most `SHOWN_PER_SCORER` per scorer: what its examples are made of.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from collector.common.aio import LoopTask
from collector.common.few_shot import SHOWN_CHARS, Shown
from collector.common.labels import KeptScore
from collector.common.types import ScoreRecord
from collector.store.labels_interface import LabelStore

logger = logging.getLogger(__name__)

SHOWN_PER_SCORER = 5_000
"""What judges were shown is kept for this many items per few-shot scorer at most (the newest)."""


def kept_score(record: ScoreRecord) -> KeptScore | None:
    """What agreement keeps of a score record: None for a scorer failure (no score).

    A conversation's score is about its session (the label of a session meets it); a run's
    about its span.

    Example:
        >>> rec = ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", scorer_version="2",
        ...                   score=0.8, label="pass", end_ns=5_000_000_000, judge_revision="1a2b3c4d")
        >>> kept_score(rec)
        KeptScore(scorer_id='q', name='Quality', version='2', revision='1a2b3c4d', trace_id='abababababababababababababababab', span_id='cdcdcdcdcdcdcdcd', session_id=None, score=0.8, label='pass', at=5.0)
        >>> kept_score(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", error_type="ValueError")) is None
        True
    """
    if record.score is None:
        return None
    session = record.session or {}
    session_id = session.get("session_id") or None
    return KeptScore(
        scorer_id=record.scorer_id, name=record.scorer_name, version=record.scorer_version or "",
        revision=record.judge_revision, trace_id=session.get("first_trace_id") or record.trace_id,
        span_id=None if session_id else record.span_id, session_id=session_id,
        score=record.score, label=record.label, at=record.end_ns / 1e9,
    )


class ScoreKeeper(LoopTask):
    """Batches kept scores into the store.

    Args:
        store: where kept scores live (every replica's agreement reads them there).
        max_per_scorer: scores kept per scorer at most (`LabelsConfig.keep_scores`).
        retain_s: scores older than this are forgotten (`LabelsConfig.retain_s`).
        flush_s: how often gathered scores are written.
        max_buffer: scores waiting at most (a store that is down); the newest are dropped past it.
    """

    loop_name = "score-keeper"

    def __init__(self, store: LabelStore, *, max_per_scorer: int, retain_s: float, flush_s: float = 1.0,
                 max_buffer: int = 50_000) -> None:
        self._store = store
        self._max_per_scorer = max_per_scorer
        self._retain_s = retain_s
        self._flush_s = flush_s
        self._max_buffer = max_buffer
        self._waiting: list[KeptScore] = []
        self._shown: list[Shown] = []
        self.kept = 0
        self.dropped = 0

    def add(self, record: ScoreRecord, shown: str | None = None) -> None:
        """Keep ``record``'s score at the next flush (a failure record keeps nothing), and ``shown``,
        what its judge was shown (a few-shot scorer's)."""
        score = kept_score(record)
        if score is None:
            return
        if len(self._waiting) >= self._max_buffer:
            self.dropped += 1
            return
        self._waiting.append(score)
        if shown is not None and len(self._shown) < self._max_buffer:
            self._shown.append(Shown(score.scorer_id, score.trace_id, score.span_id, score.session_id,
                                     shown[:SHOWN_CHARS], score.at))

    async def stop(self) -> None:
        """Stop flushing, then write what is waiting (once; a store that fails then loses it)."""
        await self.stop_loop()
        await self.flush()

    async def flush(self) -> None:
        """Write the waiting scores in one store call, then what judges were shown in another; on
        failure they wait for the next flush."""
        if self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                await self._store.keep_scores(batch, max_per_scorer=self._max_per_scorer, retain_s=self._retain_s)
                self.kept += len(batch)
            except Exception as err:
                logger.warning("keeping %d scores for judge agreement failed (%s: %s); retried in %gs",
                               len(batch), type(err).__name__, err, self._flush_s)
                self._waiting = self._requeue(batch)
        if self._shown:
            shown, self._shown = self._shown, []
            try:
                await self._store.keep_shown(shown, max_per_scorer=min(self._max_per_scorer, SHOWN_PER_SCORER),
                                             retain_s=self._retain_s)
            except Exception as err:
                logger.warning("keeping what %d judge calls were shown failed (%s: %s); retried in %gs",
                               len(shown), type(err).__name__, err, self._flush_s)
                self._shown = [*shown, *self._shown][: self._max_buffer]

    def _requeue(self, batch: Sequence[KeptScore]) -> list[KeptScore]:
        """``batch`` back before the scores added since, within ``max_buffer`` (the newest go)."""
        merged = [*batch, *self._waiting]
        self.dropped += max(0, len(merged) - self._max_buffer)
        return merged[: self._max_buffer]

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._flush_s)
            await self.flush()
