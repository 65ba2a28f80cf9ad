"""The store's judge-agreement role (`LabelStore`, SPEC §11), kept apart from
`collector.store.interface` so that each file stays one screenful of contracts.

Labels, the pull cursors and the pull lease belong to the deployment (every replica sees one
set); kept scores are what agreement needs of tracescore's own scores, bounded per scorer and
by age; so is the content the judges of few-shot scorers were shown (their examples' content).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from collector.common.few_shot import Shown
from collector.common.labels import KeptScore, Label

__all__ = ["LabelStore", "LabelStoreAdmin"]


class LabelStore(Protocol):
    """Human labels and kept scores shared by every replica (SPEC §11)."""

    async def put_labels(self, labels: Sequence[Label]) -> int:
        """Keep ``labels``: a label replaces the kept one of the same `Label.identity` when it is
        at least as new (``at``), and is ignored when older. Returns how many were new or
        changed (a label equal to the kept one counts nothing), so that a second pull of the same
        labels adds nothing."""
        ...

    async def labels(self, name: str | None = None) -> list[Label]:
        """Every kept label (of the scorer named ``name``), newest first."""
        ...

    async def label_counts(self) -> dict[tuple[str, str], int]:
        """How many labels are kept per (scorer name, source)."""
        ...

    async def label_cursor(self, source: str) -> str | None:
        """The cursor the last pull of ``source`` stored (None: never pulled)."""
        ...

    async def set_label_cursor(self, source: str, cursor: str) -> None:
        """Store ``source``'s cursor (a pull stores it after the labels it read are kept)."""
        ...

    async def take_label_lease(self, holder: str, ttl_s: float) -> bool:
        """Take or renew the pull lease for ``ttl_s`` seconds: True when it is free, expired or
        already ``holder``'s; False when another holder has it."""
        ...

    async def release_label_lease(self, holder: str) -> None:
        """Give the lease up if ``holder`` has it (a stopping daemon)."""
        ...

    async def keep_scores(self, scores: Sequence[KeptScore], *, max_per_scorer: int, retain_s: float) -> None:
        """Keep ``scores``: a score replaces the kept one of the same series and item
        (`KeptScore.series`, first of `KeptScore.keys`); a scorer keeps at most
        ``max_per_scorer`` scores (the oldest go first) and none older than ``retain_s`` before
        the newest written (``at``)."""
        ...

    def scan_kept_scores(self, since: float = 0.0, batch: int = 10_000) -> AsyncIterator[list[KeptScore]]:
        """Every kept score scored at or after ``since``, in batches of at most ``batch``
        (bounded memory over any number of kept scores), oldest first."""
        ...

    async def kept_score_count(self) -> int:
        """How many scores are kept."""
        ...

    async def keep_shown(self, shown: Sequence[Shown], *, max_per_scorer: int, retain_s: float) -> None:
        """Keep what judges were shown: per scorer, one content per item (`Shown.item`; a newer
        one, by ``at``, replaces it; an older one is ignored), at most ``max_per_scorer`` (the
        oldest go first) and none older than ``retain_s`` before the newest written."""
        ...

    async def shown(self, scorer_id: str, items: Sequence[str]) -> dict[str, str]:
        """The content kept for each of ``items`` that has one (a ``trace:`` key: the newest of a
        run of that trace): what a label on that item was judged from."""
        ...


class LabelStoreAdmin(LabelStore, Protocol):
    """The label store as a command beside the daemon opens it (``tracescore labels``, ``agreement``)."""

    async def close(self) -> None:
        """Release connections."""
        ...
