"""The deployment's judge governor (SPEC §8): budgets, shared rates and circuit breakers.

`JudgeGovernance` is the `scorers._judge_governor.JudgeGovernor` a worker runs its scorers
under. Every judge request, before it is sent:

1. **Breaker**: the (model, credentials) pair's breaker, when open, parks the job
   (``judge_unavailable``; taken again at the next probe, or after ``park_recheck_s`` if
   sooner, so that jobs run soon after a probe or ``tracescore judges resume`` closed it),
   except for the one probe call a replica claims when the probe is due: its success closes
   the breaker and wakes the parked jobs (as ``tracescore judges resume`` does), its failure
   re-opens it with the interval doubled (``probe_interval_s``, up to 3,600 s).
2. **Budgets**: its worst-case cost (prompt tokens and the call's output cap at the model's
   price) is reserved against every budget it falls under; a budget it would cross parks
   the job (``budget_exhausted``) until the window ends (asked again every
   ``park_recheck_s``). A limit raised by ``tracescore judges budget`` holds for every replica
   at once (the ledger's, in place of the configured one) and wakes the parked jobs. After
   the call the actual cost replaces the reservation; a crashed worker's reservations expire
   after `reservation_ttl_s`.
3. **Rates**: one request and its prompt tokens are taken from the model's shared
   requests- and tokens-per-minute limits (waiting while they or a cool-down say so: the
   ledger is asked even for a model without limits, since any replica's 429 cools it
   down); the output tokens are charged after the call.

Every call settled is added to the deployment's totals (`collector.store.totals`: calls,
errors, tokens, cost per model), so status counts every worker's calls, living or dead.

After a failed call: refused credentials, no quota or an unknown model
(`scorers._judge_governor.unavailable_reason`) open the breaker on every replica and park
the job; a 429 with Retry-After cools the model down on every replica.

The ledger is the store's (`collector.store.judge_interface.JudgeLedger`). Every call
admitted reads the breakers from it first (one ledger read, against a judge call's seconds
and cost): a breaker another replica opened holds here from that moment, not up to a cache's
age later. Status reports read them at most once a second per process.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.common.judge_types import PARK_REASONS, Breaker
from collector.common.metrics import Metrics
from collector.config import JudgeConfig, WorkersConfig
from collector.config.judge import MAX_PROBE_INTERVAL_S, now_s
from collector.store.judge_interface import JudgeLedger
from scorers._judge_governor import JudgeParked, JudgeRequest, JudgeTicket, unavailable_reason
from scorers._judge_types import JudgeUsage
from scorers._retry_after import parse_retry_after_ms
from scorers.errors import JudgeError

logger = logging.getLogger(__name__)

MAX_RATE_WAIT_S = 5.0
"""A request waiting for the shared rate asks the ledger again at least this often."""

BREAKERS_FRESH_S = 1.0
"""Breakers are read for status reports at most this often per process (a call admitted reads them fresh)."""


@dataclass
class _Ticket:
    """What one admitted request holds until it is settled."""

    breaker_key: str
    probe: bool = False
    reservation: str | None = None
    window: str = ""
    scopes: list[str] = field(default_factory=list)


class JudgeGovernance:
    """Governs every judge request of one process with the shared ledger (module docstring).

    Args:
        ledger: the store's judge ledger, shared by every replica.
        judge: ``[judge]`` (breakers, parking, unpriced models, budgets).
        workers: ``[workers]`` (``judge_rpm``, ``judge_tpm`` and their per-model overrides).
        metrics: spend, remaining budget, breakers and parked jobs are counted here.
        reservation_ttl_s: a reservation not settled within this (its worker died) expires.
        clock: the budget clock (epoch s); the default honours ``TRACESCORE_CLOCK_OFFSET_FILE``.
    """

    def __init__(self, ledger: JudgeLedger, judge: JudgeConfig, workers: WorkersConfig, metrics: Metrics, *,
                 reservation_ttl_s: float = 600.0, clock: Callable[[], float] = now_s) -> None:
        self.ledger = ledger
        self.judge = judge
        self.workers = workers
        self.metrics = metrics
        self.reservation_ttl_s = reservation_ttl_s
        self.clock = clock
        self._breakers: dict[str, Breaker] = {}
        self._breakers_read = float("-inf")
        self._breakers_lock = asyncio.Lock()
        self._gauged_models: set[str] = set()  # models with a breaker gauge (set back to 0 when closed)

    def rpm(self, model: str) -> int:
        """The shared requests-per-minute limit of ``model`` (0: none)."""
        w = self.workers
        return w.judge_rpm_by_model.get(model, w.judge_rpm)

    def tpm(self, model: str) -> int:
        """The shared tokens-per-minute limit of ``model`` (0: none)."""
        w = self.workers
        return w.judge_tpm_by_model.get(model, w.judge_tpm)

    async def breakers(self, *, fresh: bool = False) -> dict[str, Breaker]:
        """The open breakers by key, read from the ledger at most once a second (``fresh``: read
        after this call began; callers waiting together share one read)."""
        asked = time.monotonic()
        oldest = asked if fresh else asked - BREAKERS_FRESH_S  # a read started before this is too old
        if self._breakers_read < oldest:
            async with self._breakers_lock:
                if self._breakers_read < oldest:  # no read started since while this one waited
                    started = time.monotonic()
                    self._breakers = {b.key: b for b in await self.ledger.judge_breakers()}
                    self._breakers_read = started
        return self._breakers

    async def admit(self, request: JudgeRequest) -> JudgeTicket:
        """Admit one request (breaker, budgets, rates) or raise `JudgeParked` (module docstring)."""
        ticket = _Ticket(breaker_key=f"{request.model}#{request.credentials}")
        try:
            await self._check_breaker(request, ticket)
            await self._reserve(request, ticket)
            await self._take_rate(request)
        except (JudgeParked, JudgeError):
            raise
        except asyncio.CancelledError:
            await asyncio.shield(self._release(ticket))
            raise
        except Exception as exc:  # the ledger cannot be reached: a transient failure of the job
            await asyncio.shield(self._release(ticket))
            raise JudgeError(f"judge governance unavailable ({type(exc).__name__}: {exc})",
                             retryable=True) from exc
        return JudgeTicket(state=ticket)

    async def _check_breaker(self, request: JudgeRequest, ticket: _Ticket) -> None:
        breaker = (await self.breakers(fresh=True)).get(ticket.breaker_key)
        if breaker is None:
            return
        now = time.time()
        if breaker.probe_due(now) and await self.ledger.claim_judge_probe(breaker.key, now, breaker.interval_s):
            ticket.probe = True
            logger.info("judge %s: probing the open breaker (%s)", request.model, breaker.reason)
            return
        wait = max(0.1, min(breaker.next_probe - now, self.judge.park_recheck_s))  # a closed breaker is seen soon
        raise JudgeParked("judge_unavailable", f"judge {request.model} is unavailable ({breaker.reason}); "
                          f"next probe in {wait:.0f} s", wait)

    async def _reserve(self, request: JudgeRequest, ticket: _Ticket) -> None:
        budgets = self.judge.budgets
        limits = budgets.limits(request.scorer_id, request.model)
        if not limits:
            return
        if not request.priced and self.judge.unpriced == "refuse":
            raise JudgeError(f"judge model {request.model} has no known price; under a judge budget it is "
                             'refused (set [judge] unpriced = "allow" to call it anyway)')
        now = self.clock()
        window, ends = budgets.window_of(now)
        amount = request.worst_case_usd(budgets.default_output_tokens) if request.priced else 0.0
        reservation = uuid.uuid4().hex
        crossed = await self.ledger.reserve_judge_spend(reservation, window, limits, amount, now,
                                                        self.reservation_ttl_s)
        if crossed is not None:
            wait = max(0.1, min(ends - now, self.judge.park_recheck_s))
            raise JudgeParked("budget_exhausted", f"the {crossed} judge budget for {window} would be crossed by "
                              f"a call of up to {amount:.6f} USD (raise it: tracescore judges budget {crossed} "
                              "--usd N)", wait)
        ticket.reservation, ticket.window, ticket.scopes = reservation, window, [s for s, _ in limits]

    async def _take_rate(self, request: JudgeRequest) -> None:
        rpm, tpm = self.rpm(request.model), self.tpm(request.model)  # asked even with neither: a cool-down
        tokens = request.prompt_tokens if tpm else 0
        while True:  # the ledger says how long to wait; another replica may take the slot meanwhile
            wait = await self.ledger.take_judge_rate(request.model, rpm, tpm, tokens)
            if wait <= 0:
                return
            await asyncio.sleep(min(wait, MAX_RATE_WAIT_S))

    async def _release(self, ticket: _Ticket) -> None:
        """Give back a reservation whose call was never sent."""
        if ticket.reservation is not None:
            try:
                await self.ledger.settle_judge_spend(ticket.reservation, ticket.window, ticket.scopes, 0.0)
            except Exception:
                logger.debug("releasing a judge reservation failed; it expires", exc_info=True)
            ticket.reservation = None

    async def settle(self, ticket: JudgeTicket, request: JudgeRequest, usage: JudgeUsage | None,
                     cost_usd: float | None, error: BaseException | None) -> JudgeParked | None:
        """Count the call's actual cost and output tokens; after a failure, open the breaker
        (and park the job) or cool the model down, as the failure says."""
        state = ticket.state
        if not isinstance(state, _Ticket):
            return None
        cost = float(cost_usd or 0.0)
        await self._count(request, usage, cost, error)
        try:
            if state.reservation is not None:
                await self.ledger.settle_judge_spend(state.reservation, state.window, state.scopes, cost)
                state.reservation = None
            tpm = self.tpm(request.model)
            if tpm and usage is not None and usage.output_tokens:
                await self.ledger.add_judge_tokens(request.model, tpm, usage.output_tokens)
            if cost:
                self.metrics.judge_spend.labels(scorer=request.scorer_id or "", model=request.model).inc(cost)
            if error is None:
                if state.probe:
                    closed = await self.ledger.close_judge_breakers(key=state.breaker_key)
                    self._breakers.pop(state.breaker_key, None)
                    if closed:
                        woken = await self.ledger.wake_parked_jobs("judge_unavailable")
                        logger.warning("judge %s answers again: its breaker is closed; %d parked jobs run now",
                                       request.model, woken)
                return None
            return await self._learn(request, state, error)
        except Exception:
            logger.warning("settling a judge call with the ledger failed", exc_info=True)
            return None

    async def _count(self, request: JudgeRequest, usage: JudgeUsage | None, cost: float,
                     error: BaseException | None) -> None:
        """Add the call to the deployment's totals (a call a drain cut short is no judge error)."""
        try:
            await self.ledger.count_judge_call(
                request.model, failed=error is not None and not isinstance(error, asyncio.CancelledError),
                input_tokens=usage.input_tokens if usage is not None else 0,
                output_tokens=usage.output_tokens if usage is not None else 0, cost_usd=cost)
        except Exception:
            logger.warning("counting a judge call in the store's totals failed", exc_info=True)

    async def _learn(self, request: JudgeRequest, state: _Ticket, error: BaseException) -> JudgeParked | None:
        """What a failed call tells every replica: a breaker to open, or a model to cool down."""
        reason = unavailable_reason(error)
        if reason is not None:
            known = (await self.breakers(fresh=True)).get(state.breaker_key)
            interval = self.judge.probe_interval_s
            if state.probe and known is not None:
                interval = min(MAX_PROBE_INTERVAL_S, known.interval_s * 2)
            now = time.time()
            since = known.since if known is not None else now
            breaker = Breaker(state.breaker_key, request.model, reason, since, now + interval, interval)
            await self.ledger.open_judge_breaker(breaker)
            self._breakers[breaker.key] = breaker
            logger.warning("judge %s is unavailable (%s): breaker open, its jobs are parked; next probe in %.0f s",
                           request.model, reason, interval)
            return JudgeParked("judge_unavailable", f"judge {request.model} is unavailable ({reason})",
                               min(interval, self.judge.park_recheck_s))
        retry_after_ms = parse_retry_after_ms(error)
        if getattr(error, "status_code", None) == 429 and retry_after_ms:
            await self.ledger.cool_down_judge(request.model, retry_after_ms / 1000)
        return None

    async def refresh_gauges(self) -> None:
        """Set the remaining-budget, breaker and parked-job gauges from the ledger."""
        m = self.metrics
        budgets = self.judge.budgets
        if budgets.enabled:
            window, _ = budgets.window_of(self.clock())
            used = {u.scope: u.committed for u in await self.ledger.judge_spend(window, self.clock())}
            for scope, limit, _ in effective_limits(budgets.all_limits(), await self.ledger.judge_limits()):
                m.judge_budget_remaining.labels(scope=scope).set(max(0.0, limit - used.get(scope, 0.0)))
        open_models = {b.model for b in (await self.breakers(fresh=True)).values()}
        for model in open_models | self._gauged_models:
            m.judge_breaker_open.labels(model=model).set(1 if model in open_models else 0)
        self._gauged_models |= open_models
        parked = await self.ledger.parked_jobs()
        for reason in PARK_REASONS:
            m.jobs_parked.labels(reason=reason).set(parked.get(reason, 0))


def effective_limits(configured: list[tuple[str, float]],
                     set_by_hand: dict[str, tuple[float, float]]) -> list[tuple[str, float, float]]:
    """Each configured budget as ``(scope, limit in force, configured limit)``: the limit
    ``tracescore judges budget`` set over that same configured limit, else the configured one.

    Example:
        >>> effective_limits([("global", 5.0), ("model:m", 1.0)], {"global": (8.0, 5.0), "model:m": (3.0, 0.5)})
        [('global', 8.0, 5.0), ('model:m', 1.0, 1.0)]
    """
    found = []
    for scope, limit in configured:
        usd, over = set_by_hand.get(scope, (limit, limit))
        found.append((scope, usd if over == limit else limit, limit))
    return found


async def judge_report(ledger: JudgeLedger, judge: JudgeConfig, now: float | None = None) -> dict[str, Any]:
    """What ``tracescore judges``, ``status`` and ``/status`` show of judge governance: every
    budget (scope, window, spent, reserved, limit in force, the configured limit, remaining,
    reset time), every open breaker (model, reason, since, next probe) and the parked jobs per
    reason. Times are epoch s.

    Example:
        >>> import asyncio
        >>> class Quiet:  # a ledger with nothing to say
        ...     async def judge_spend(self, window, now): return []
        ...     async def judge_limits(self): return {}
        ...     async def judge_breakers(self): return []
        ...     async def parked_jobs(self): return {}
        >>> from collector.config import BudgetsConfig
        >>> report = asyncio.run(judge_report(Quiet(), JudgeConfig(budgets=BudgetsConfig(usd=2.0)), now=0.0))
        >>> report["budgets"][0]["scope"], report["budgets"][0]["remaining"], report["budgets"][0]["reset"]
        ('global', 2.0, 86400.0)
        >>> report["parked"]
        {'budget_exhausted': 0, 'judge_unavailable': 0}
    """
    budgets = judge.budgets
    now = now_s() if now is None else now
    window, ends = budgets.window_of(now)
    rows: list[dict[str, Any]] = []
    if budgets.enabled:
        used = {u.scope: u for u in await ledger.judge_spend(window, now)}
        for scope, limit, configured in effective_limits(budgets.all_limits(), await ledger.judge_limits()):
            spent = used[scope].spent if scope in used else 0.0
            reserved = used[scope].reserved if scope in used else 0.0
            rows.append({"scope": scope, "window": window, "spent": round(spent, 9), "reserved": round(reserved, 9),
                         "limit": limit, "configured": configured,
                         "remaining": round(max(0.0, limit - spent - reserved), 9), "reset": ends})
    breakers = [{"model": b.model, "key": b.key, "state": "open", "reason": b.reason, "since": b.since,
                 "next_probe": b.next_probe, "interval_s": b.interval_s} for b in await ledger.judge_breakers()]
    parked = await ledger.parked_jobs()
    return {"budgets": rows, "breakers": breakers,
            "parked": {reason: int(parked.get(reason, 0)) for reason in PARK_REASONS}}


async def close_unused_breakers(ledger: JudgeLedger, models: frozenset[str] | None) -> list[Breaker]:
    """Close the open breakers of judge models no registered scorer calls (``models``; None:
    unknown, nothing is closed), and return them. Run when a worker starts: a breaker opened for
    a model the configuration no longer names (a typo since fixed, a model replaced) would never
    be probed again, and would stay in ``status`` and ``tracescore judges`` for ever. The jobs
    parked on a breaker are woken, as after ``tracescore judges resume``. A replica that still
    calls the model re-opens its breaker on its next failure.

    Example:
        >>> import asyncio
        >>> class Ledger:
        ...     open = [Breaker("gpt-4o-mni#k", "gpt-4o-mni", "404 unknown model", 0.0, 60.0, 60.0)]
        ...     async def judge_breakers(self): return list(self.open)
        ...     async def close_judge_breakers(self, model=None, key=None):
        ...         self.open = [b for b in self.open if b.key != key]; return 1
        ...     async def wake_parked_jobs(self, reason): return 2
        >>> ledger = Ledger()
        >>> [b.model for b in asyncio.run(close_unused_breakers(ledger, frozenset({"openai/gpt-4o-mini"})))]
        ['gpt-4o-mni']
        >>> ledger.open
        []
    """
    if models is None:
        return []
    stale = [b for b in await ledger.judge_breakers() if b.model not in models]
    for breaker in stale:
        await ledger.close_judge_breakers(key=breaker.key)
        logger.info("judge %s: its circuit breaker (%s) is closed: no registered scorer calls this model",
                    breaker.model, breaker.reason)
    if stale:
        await ledger.wake_parked_jobs("judge_unavailable")
    return stale
