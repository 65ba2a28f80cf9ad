"""Running a judge over labelled items and measuring how far it agrees (``tracescore align``).

`judge_items` runs a scorer (the current one, or one with a candidate's instructions:
`scorers.Scorer.with_instructions`) on each item exactly as ``tracescore score``
does (`collector.commands.scoring.score_all`), with few-shot examples in its judge's system
message when given (`scorers._judge_examples.judge_examples`), and reads each result as a
verdict the way the daemon's kept scores are read (`collector.work.record.score_label`,
`collector.status.verdicts.judge_verdict`). `agreement_of` measures the verdicts against the
people's with the agreement statistics of ``tracescore agreement``
(`collector.status.agreement_stats`).

Every judge call goes through the spend governors of SPEC §8 (`Spending`): ``--max-usd``
(`collector.commands.spend_cap.SpendCap`, the governor of ``score --max-usd``) and the
deployment's own governance (`collector.work.governor.JudgeGovernance` on the store's judge
ledger: ``[judge.budgets]``, the shared rates, the circuit breakers), and is counted (calls,
USD). ``--estimate`` runs the same way under an `EstimatingGovernor` per phase (`Estimating`):
nothing is sent. A call a governor refuses, or a provider that fails for good, stops the
align (`AlignStopped`): measuring candidates on different items would compare nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from collector.commands.align.items import LabelledItem
from collector.commands.estimate import EstimatingGovernor, Tally
from collector.commands.scoring import Outcome, score_all
from collector.commands.spend_cap import RunSpend, SpendCap
from collector.common.labels import KeptScore
from collector.status.agreement_stats import accuracy, kappa, kappa_interval
from collector.status.verdicts import ScorerRule, judge_verdict
from collector.work.governor import JudgeGovernance
from collector.work.record import score_label
from collector.work.registry import RegisteredScorer
from scorers._judge_examples import judge_examples
from scorers._judge_governor import JudgeGovernor, JudgeParked, JudgeRequest, JudgeTicket
from scorers._judge_types import JudgeUsage
from scorers._run import STEP_ORDER
from scorers.errors import JudgeError, JudgeOutputError

__all__ = ["Agreement", "AlignStopped", "Estimating", "Judged", "Spending", "agreement_of", "judge_items",
           "provider_failure"]


class AlignStopped(Exception):
    """A judge call was refused (``--max-usd``, a ``[judge.budgets]`` budget, an open breaker) or
    the provider failed for good: the align stops (exit 1)."""


@dataclass(frozen=True)
class Judged:
    """What the judge made of one item: its score and verdict (None: no verdict), its reason,
    the prompt its first judge call was shown, or the scorer's error."""

    score: float | None
    verdict: str | None
    reason: Any = None
    prompt: str | None = None
    error: str | None = None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass(frozen=True)
class Agreement:
    """A judge's agreement with the people on a set of items: ``n`` items with a verdict of the
    judge (``failed`` without), Cohen's kappa with its 95% bootstrap interval, accuracy.

    Example:
        >>> Agreement(9, 0.61234, (0.2, 0.9), 0.8, 1).to_json()
        {'kappa': 0.6123, 'kappa_ci': [0.2, 0.9], 'accuracy': 0.8, 'n': 9, 'failed': 1}
    """

    n: int
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    accuracy: float | None
    failed: int = 0

    def to_json(self) -> dict[str, Any]:
        """The figures as ``align --json`` prints them (rounded to 4 places; null: undefined)."""
        return {"kappa": _r(self.kappa), "kappa_ci": [_r(x) for x in self.kappa_ci] if self.kappa_ci else None,
                "accuracy": _r(self.accuracy), "n": self.n, "failed": self.failed}

    def beats(self, other: Agreement) -> bool:
        """Whether this agrees better than ``other``: a higher kappa; where either kappa is
        undefined (one verdict only on both sides), a higher accuracy.

        Example:
            >>> Agreement(9, 0.8, None, 0.9).beats(Agreement(9, 0.1, None, 0.6)), Agreement(9, 0.1, None, 0.6).beats(Agreement(9, 0.1, None, 0.6))
            (True, False)
            >>> Agreement(9, None, None, 1.0).beats(Agreement(9, 0.5, None, 0.8))
            True
        """
        if self.kappa is not None and other.kappa is not None:
            return self.kappa > other.kappa
        return (self.accuracy or 0.0) > (other.accuracy or 0.0)


def agreement_of(items: Sequence[LabelledItem], judged: Sequence[Judged]) -> Agreement:
    """The agreement of the judge's verdicts with the people's over the items it gave one for.

    Example:
        >>> from types import SimpleNamespace as I
        >>> items = [I(verdict=v) for v in ("pass", "pass", "fail", "fail", "pass")]
        >>> judged = [Judged(1.0, "pass"), Judged(0.0, "fail"), Judged(0.0, "fail"), Judged(0.0, "fail"),
        ...           Judged(None, None, error="boom")]
        >>> a = agreement_of(items, judged)
        >>> (a.n, a.kappa, a.accuracy, a.failed)
        (4, 0.5, 0.75, 1)
    """
    pairs = [(item.verdict, j.verdict) for item, j in zip(items, judged, strict=True) if j.verdict is not None]
    human, judge = [h for h, _ in pairs], [v for _, v in pairs]
    return Agreement(len(pairs), kappa(human, judge), kappa_interval(human, judge), accuracy(human, judge),
                     len(items) - len(pairs))


def provider_failure(err: BaseException | None) -> JudgeError | None:
    """The judge error down ``err``'s cause chain that says the provider failed (not a reply
    that did not parse: that is the judge's answer, counted as an item without a verdict).

    Example:
        >>> from scorers.errors import ScorerRunError
        >>> failed = JudgeError("Judge call to openai/gpt-4o-mini failed: 500", status_code=500)
        >>> provider_failure(ScorerRunError("q", "generate_score", [], cause=failed)) is failed
        True
        >>> provider_failure(JudgeOutputError("not JSON")) is None, provider_failure(ValueError("x")) is None
        (True, True)
    """
    seen: set[int] = set()
    cause = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, JudgeError) and not isinstance(cause, JudgeOutputError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def shown_prompt(result: Any) -> str | None:
    """The prompt the first judge call of a scorer's result was shown (`JudgeExecution.prompt`)."""
    records = getattr(result, "judge", None) or {}
    for step in STEP_ORDER:
        record = records.get(step)
        if record is not None and record.executions:
            return str(record.executions[0].prompt)
    return None


def _judged(outcome: Outcome, entry: RegisteredScorer, rule: ScorerRule, item: LabelledItem) -> Judged:
    if outcome.not_scored is not None:
        raise AlignStopped(f"a judge call was not made: {outcome.not_scored}")
    failure = provider_failure(outcome.exception)
    if failure is not None:
        raise AlignStopped(f"the judge failed on trace {item.trace_id}: {failure}")
    prompt = shown_prompt(outcome.result)
    if outcome.score is None:
        return Judged(None, None, outcome.reason, prompt, outcome.error or str(outcome.reason or "no score"))
    kept = KeptScore(entry.scorer_id, "", "", "", item.trace_id, None, None, float(outcome.score),
                     score_label(entry, outcome.score), 0.0)
    return Judged(outcome.score, judge_verdict(kept, rule), outcome.reason, prompt)


async def judge_items(scorer: Any, items: Sequence[LabelledItem], *, entry: RegisteredScorer, rule: ScorerRule,
                      examples: str, concurrency: int, err: Console,
                      governor_for_run: Callable[[], JudgeGovernor | None]) -> list[Judged]:
    """Run ``scorer`` on every item (``examples``: the few-shot text after its judge's
    instructions, "" for none), each scorer run under ``governor_for_run()``; the judged items
    in order. ``entry`` and ``rule`` are the configured scorer's: how a score becomes a verdict.

    Raises:
        AlignStopped: a judge call was refused, or the provider failed for good.
    """
    runs = [item.run for item in items]
    conversations = {i: item.conversation for i, item in enumerate(items) if item.conversation is not None}
    with judge_examples(examples):  # the tasks score_all creates inherit it
        outcomes = await score_all(runs, [scorer], concurrency, err, conversations,
                                   governor_for_run=governor_for_run)
    return [_judged(o, entry, rule, items[o.run_index]) for o in outcomes]


class Spending:
    """The real spend of an align: ``--max-usd`` (``cap``), the deployment's governance, and
    the count of every judge and proposer call made and what it cost.

    Example:
        >>> Spending(None, None).usd_value()
        0.0
    """

    def __init__(self, cap: SpendCap | None, governance: JudgeGovernance | None) -> None:
        self.cap, self.governance = cap, governance
        self.calls = 0
        self.usd = 0.0
        self.unpriced: set[str] = set()

    def for_run(self, phase: str) -> JudgeGovernor:
        """The governor of one scorer run (or one proposer call) of ``phase``."""
        return _RunGovernor(self)

    def usd_value(self) -> float | None:
        """What was spent, in USD (None when a call's model has no known price)."""
        return None if self.unpriced else round(self.usd, 9)


class _RunGovernor:
    """One run's governor: its ``--max-usd`` reservation first, then the deployment's; counted."""

    def __init__(self, spending: Spending) -> None:
        self.spending = spending
        self.run_spend = RunSpend(spending.cap) if spending.cap is not None else None

    async def admit(self, request: JudgeRequest) -> JudgeTicket:
        """Reserve under ``--max-usd``, then under the deployment's budgets and rates (or refuse)."""
        mine = await self.run_spend.admit(request) if self.run_spend is not None else None
        try:
            theirs = await self.spending.governance.admit(request) if self.spending.governance is not None else None
        except BaseException:
            if mine is not None and self.run_spend is not None:  # give back the reservation: nothing is sent
                with contextlib.suppress(Exception):
                    await self.run_spend.settle(mine, request, None, 0.0, None)
            raise
        return JudgeTicket(state=(mine, theirs))

    async def settle(self, ticket: JudgeTicket, request: JudgeRequest, usage: JudgeUsage | None,
                     cost_usd: float | None, error: BaseException | None) -> JudgeParked | None:
        """Count the call and its cost, and settle it with both governors."""
        mine, theirs = ticket.state
        spending = self.spending
        spending.calls += 1
        if cost_usd is None and usage is not None and request.priced:
            cost_usd = usage.input_tokens * (request.input_price or 0.0) + \
                usage.output_tokens * (request.output_price or 0.0)
        if not request.priced and cost_usd is None:
            spending.unpriced.add(request.model)
        spending.usd += cost_usd or 0.0
        if mine is not None and self.run_spend is not None:
            await self.run_spend.settle(mine, request, usage, cost_usd, error)
        if theirs is not None and spending.governance is not None:
            return await spending.governance.settle(theirs, request, usage, cost_usd, error)
        return None


class Estimating:
    """``--estimate``: an `EstimatingGovernor` per phase (each judge and proposer request answered
    with a made-up reply and counted, nothing sent), and the items each phase judged.

    Example:
        >>> e = Estimating(None, 1024)
        >>> e.for_run("proposer") is e.for_run("proposer"), list(e.phases)
        (True, ['proposer'])
    """

    def __init__(self, output_tokens: int | None, default_output_tokens: int) -> None:
        self.output_tokens, self.default_output_tokens = output_tokens, default_output_tokens
        self.phases: dict[str, EstimatingGovernor] = {}
        self.runs: dict[str, int] = {}

    def for_run(self, phase: str) -> JudgeGovernor:
        """The estimating governor of ``phase``."""
        if phase not in self.phases:
            self.phases[phase] = EstimatingGovernor(self.output_tokens, self.default_output_tokens)
        return self.phases[phase]

    def tally(self, phase: str) -> Tally:
        """What ``phase``'s calls would cost."""
        total = Tally()
        for tally in self.phases[phase].tallies.values() if phase in self.phases else ():
            total.merge(tally)
        return total
