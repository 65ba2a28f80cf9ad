"""``tracescore score`` as a CI gate: the per-scorer summary and the exit status it sets.

The summary has, per scorer: runs (pairs scored or attempted), scored, not scorable,
failed, and the mean, median (p50) and minimum of its scores. The gate fails (exit 1)
when a ``--fail-under SCORER=VALUE`` scorer's mean is below VALUE (or it has no score
at all), when more than ``--max-failures N`` scores failed, or when every score failed.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rich.table import Table


class Scored(Protocol):
    """One (run, scorer) outcome as the summary reads it."""

    @property
    def scorer_id(self) -> str: ...

    @property
    def score(self) -> float | None: ...

    @property
    def failed(self) -> bool: ...

    @property
    def not_scorable(self) -> bool: ...


@dataclass(frozen=True)
class ScorerSummary:
    """One scorer's line of the summary.

    Example:
        >>> ScorerSummary("q", 3, 2, 0, 1, 0.5, 0.5, 0.25).cells()
        ['q', '3', '2', '0', '1', '0.500', '0.500', '0.250']
    """

    scorer: str
    runs: int
    scored: int
    not_scorable: int
    failed: int
    mean: float | None
    p50: float | None
    min: float | None

    def cells(self) -> list[str]:
        """The row as table cells ("-" where there is no score).

        Example:
            >>> ScorerSummary("q", 1, 0, 1, 0, None, None, None).cells()[-3:]
            ['-', '-', '-']
        """
        numbers = [self.mean, self.p50, self.min]
        return [self.scorer, str(self.runs), str(self.scored), str(self.not_scorable), str(self.failed),
                *("-" if n is None else f"{n:.3f}" for n in numbers)]

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON object.

        Example:
            >>> ScorerSummary("q", 1, 1, 0, 0, 1.0, 1.0, 1.0).as_dict()["p50"]
            1.0
        """
        return dict(self.__dict__)


def summarize(scorer_ids: Sequence[str], outcomes: Sequence[Scored]) -> list[ScorerSummary]:
    """The summary line of each scorer, in the order given.

    Example:
        >>> from types import SimpleNamespace as O
        >>> rows = summarize(["q"], [O(scorer_id="q", score=s, failed=False, not_scorable=False) for s in (1, 0, 0.5)])
        >>> rows[0].mean, rows[0].p50, rows[0].min
        (0.5, 0.5, 0)
    """
    rows = []
    for scorer in scorer_ids:
        mine = [o for o in outcomes if o.scorer_id == scorer]
        scores = [o.score for o in mine if o.score is not None]
        rows.append(ScorerSummary(
            scorer=scorer, runs=len(mine), scored=len(scores), not_scorable=sum(o.not_scorable for o in mine),
            failed=sum(o.failed for o in mine), mean=statistics.fmean(scores) if scores else None,
            p50=statistics.median(scores) if scores else None, min=min(scores) if scores else None,
        ))
    return rows


def summary_table(rows: Sequence[ScorerSummary]) -> Table:
    """The summary as a rich table.

    Example:
        >>> summary_table([ScorerSummary("q", 1, 1, 0, 0, 1.0, 1.0, 1.0)]).row_count
        1
    """
    table = Table(title="scores per scorer")
    for name in ("scorer", "runs", "scored", "not scorable", "failed", "mean", "p50", "min"):
        table.add_column(name, justify="left" if name == "scorer" else "right")
    for row in rows:
        table.add_row(*row.cells())
    return table


def gate_failures(rows: Sequence[ScorerSummary], fail_under: Mapping[str, float],
                  max_failures: int | None) -> list[str]:
    """Why the gate fails (empty: it passes).

    Example:
        >>> rows = [ScorerSummary("q", 2, 1, 0, 1, 0.4, 0.4, 0.4)]
        >>> gate_failures(rows, {"q": 0.5}, max_failures=0)
        ['q: mean score 0.400 is below 0.5', '1 score(s) failed, more than --max-failures 0']
        >>> gate_failures(rows, {}, None)
        []
    """
    problems = []
    by_id = {row.scorer: row for row in rows}
    for scorer, least in fail_under.items():
        mean = by_id[scorer].mean
        if mean is None:
            problems.append(f"{scorer}: no score to compare with {least:g}")
        elif mean < least:
            problems.append(f"{scorer}: mean score {mean:.3f} is below {least:g}")
    failed = sum(row.failed for row in rows)
    if max_failures is not None and failed > max_failures:
        problems.append(f"{failed} score(s) failed, more than --max-failures {max_failures}")
    attempted = sum(row.runs for row in rows)
    if attempted and failed == attempted:
        problems.append(f"every score failed ({failed})")
    return problems
