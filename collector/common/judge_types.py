"""What governing judge spend and rate keeps (SPEC §8): parked jobs, budget use, breakers.

The store keeps them (`collector.store.interface.JudgeLedger`) so that every worker replica
shares one view; `collector.work.governor` decides with them.
"""

from __future__ import annotations

from dataclasses import dataclass

PARK_REASONS = ("budget_exhausted", "judge_unavailable")
"""Why a job is parked: a budget its judge call would cross is spent, or its judge's breaker is open."""


@dataclass(frozen=True)
class Park:
    """Hand a job back without counting this take as an attempt: its scorer's judge calls are
    not allowed now (``reason`` in `PARK_REASONS`); it is taken again ``delay_s`` from now.
    The store remembers when the job was first parked (`LeasedJob.parked_since`) until it is
    settled otherwise.

    Example:
        >>> Park(60.0, "budget_exhausted").reason
        'budget_exhausted'
    """

    delay_s: float
    reason: str


@dataclass(frozen=True)
class BudgetUse:
    """One budget scope's use in one window: ``spent`` (settled calls) and ``reserved`` (calls in
    flight, at their worst case), in USD. ``scope`` is ``global``, ``scorer:<id>`` or ``model:<model>``.

    Example:
        >>> BudgetUse("global", 0.04, 0.01).committed
        0.05
    """

    scope: str
    spent: float
    reserved: float

    @property
    def committed(self) -> float:
        """Spent plus reserved: what a new reservation is added to."""
        return self.spent + self.reserved


@dataclass(frozen=True)
class Breaker:
    """The circuit breaker of one (model, credentials) pair (``key`` is ``model#digest``).

    An open breaker parks its scorers' jobs; one probe call is allowed at ``next_probe`` (epoch
    s), after which the breaker closes (the call succeeded) or stays open with ``interval_s``
    doubled (up to 3,600 s). ``reason`` is the provider's answer that opened it (no key).

    Example:
        >>> b = Breaker("openai/gpt-4o#c0ffee", "openai/gpt-4o", "401 invalid api key", 10.0, 70.0, 60.0)
        >>> b.probe_due(69.0), b.probe_due(70.0)
        (False, True)
    """

    key: str
    model: str
    reason: str
    since: float
    next_probe: float
    interval_s: float

    def probe_due(self, now: float) -> bool:
        """Whether a probe call may be made at ``now``."""
        return now >= self.next_probe
