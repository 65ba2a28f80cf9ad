"""The store's judge-governance role (`JudgeLedger`), kept apart from `collector.store.interface`
(which re-exports it) so that each file stays one screenful of contracts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from collector.common.judge_types import Breaker, BudgetUse

__all__ = ["AMOUNT_TOLERANCE", "WINDOW_RETENTION_S", "JudgeLedger", "JudgeLedgerAdmin"]

AMOUNT_TOLERANCE = 1e-12
"""USD a reservation may pass a limit by (sums of float amounts are not exact: five
reservations of 0.01 fit a limit of 0.05)."""

WINDOW_RETENTION_S = 40 * 86400.0
"""How long a budget window's spend is kept after it was last written (the longest window
is 31 days), by the store's own clock; then it is forgotten, so nothing grows for ever."""


class JudgeLedger(Protocol):
    """Judge spend, rates and breakers shared by every replica (SPEC §8).

    Amounts are USD. A budget window is named by the caller (``window``, e.g. ``1d:2026-12-05``);
    a scope is ``global``, ``scorer:<id>`` or ``model:<model>``. Budget time (``now``) is
    always given by the caller; rates and cool-downs use the store's own clock.
    """

    async def reserve_judge_spend(self, reservation: str, window: str, limits: Sequence[tuple[str, float]],
                                  amount: float, now: float, ttl_s: float) -> str | None:
        """Atomically: forget reservations that expired (their ``now + ttl_s`` passed), then,
        if for every ``(scope, limit)`` spent + reserved + ``amount`` <= limit in ``window``,
        reserve ``amount`` against each scope under the id ``reservation`` and return None;
        else reserve nothing and return the first scope it would cross. A ``limit`` (the
        configured one) that `set_judge_limit` set a limit over is replaced by that one."""
        ...

    async def settle_judge_spend(self, reservation: str, window: str, scopes: Sequence[str], actual: float) -> None:
        """Drop the reservation (if still there) and add ``actual`` to the spend of ``scopes`` in ``window``."""
        ...

    async def judge_spend(self, window: str, now: float) -> list[BudgetUse]:
        """Every scope's spent and live reserved amounts in ``window``."""
        ...

    async def take_judge_rate(self, model: str, rpm: int, tpm: int, tokens: int) -> float:
        """Take one request and ``tokens`` tokens from ``model``'s shared limits (0: no limit)
        and return 0.0; or, when either limit (or a cool-down) does not allow it now, take
        nothing and return the seconds to wait before asking again. Requests are evenly
        spaced (``60 / rpm`` s apart); tokens burst one second's worth (at least ``tokens``)."""
        ...

    async def add_judge_tokens(self, model: str, tpm: int, tokens: int) -> None:
        """Charge ``tokens`` more to the model's tokens-per-minute limit (a call's output,
        known after it), without waiting."""
        ...

    async def cool_down_judge(self, model: str, seconds: float) -> None:
        """No request to ``model`` for ``seconds`` on any replica (a 429's Retry-After); a
        longer cool-down already set is kept."""
        ...

    async def open_judge_breaker(self, breaker: Breaker) -> None:
        """Open (or re-open, replacing its state) the breaker ``breaker.key``."""
        ...

    async def claim_judge_probe(self, key: str, now: float, hold_s: float) -> bool:
        """Atomically: if breaker ``key`` is open and its probe is due at ``now``, push its next
        probe to ``now + hold_s`` (no other replica probes meanwhile) and return True."""
        ...

    async def close_judge_breakers(self, model: str | None = None, key: str | None = None) -> int:
        """Close the breaker ``key``, or every breaker of ``model``; returns how many closed."""
        ...

    async def judge_breakers(self) -> list[Breaker]:
        """Every open breaker."""
        ...

    async def count_judge_call(self, model: str, *, failed: bool, input_tokens: int, output_tokens: int,
                               cost_usd: float) -> None:
        """Add one settled judge call of ``model`` to the deployment's totals
        (`collector.store.totals.judge_tally`)."""
        ...

    async def set_judge_limit(self, scope: str, usd: float, configured: float) -> None:
        """Set the limit of the budget ``scope`` to ``usd`` for every replica, over its
        ``configured`` limit: `reserve_judge_spend` uses it wherever it is given that configured
        limit (a configuration changed since brings its own limit back). ``usd == configured``
        removes it."""
        ...

    async def judge_limits(self) -> dict[str, tuple[float, float]]:
        """The limits `set_judge_limit` set: scope -> (usd, the configured limit it was set over)."""
        ...

    async def wake_parked_jobs(self, reason: str) -> int:
        """Make every job parked for ``reason`` and waiting for its delay due now (a breaker was
        closed, a budget raised), so that the workers take it at once; returns how many."""
        ...

    async def parked_jobs(self) -> dict[str, int]:
        """Jobs parked now (handed back with `collector.common.judge_types.Park`), per reason: a job is
        parked from its park until it is settled otherwise (`Retry`, `Done`, `Dead`) or
        dead-lettered, whether it waits for its delay or was taken again meanwhile; counted
        under the reason of its last park."""
        ...


class JudgeLedgerAdmin(JudgeLedger, Protocol):
    """The ledger as a command beside the daemon opens it (``tracescore judges``)."""

    async def close(self) -> None:
        """Release connections."""
        ...
