"""``tracescore score ... --max-usd N``: stop spending before N USD.

A judge governor (`scorers._judge_governor`) that keeps this invocation's spend. Before
each judge call it reserves the call's worst case (its prompt tokens and its output cap,
``max_tokens`` of the judge's settings or ``--default-output-tokens`` (1024), at litellm's
prices), and after the call the actual cost (the provider's usage at litellm's prices)
replaces the reservation. A call is admitted only while spent + reserved + its worst case
stays within N. When it would not, but would once the calls in flight settle (spent + its
worst case is within N), it waits for them (the calls of runs already started go first, so
the money goes to finishing runs rather than to starting new ones); when even that passes
N it is refused (it raises `JudgeParked`: nothing is sent). So what is spent never passes N, and the spend
stops within one call's worst-case cost of it, at any ``--concurrency``.

Once a call has been refused, runs that have not yet made a judge call are refused too
(their spend would be wasted on a run that may not finish); runs already started may go
on while their calls fit. A run whose call was refused is not scored: ``tracescore score``
reports it as "not scored: --max-usd reached" (not a failure of its scorer), leaves it
out of ``--export``, says what was spent and how many scores were left, and exits 1.

A model litellm has no price for cannot be counted: under ``--max-usd`` it is refused
before any call (exit 2) unless ``--allow-unpriced``, with which its calls count 0 USD.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from collector.commands.estimate import EstimatingGovernor
from scorers._judge_governor import (
    JudgeGovernor,
    JudgeParked,
    JudgeRequest,
    JudgeTicket,
)
from scorers._judge_types import JudgeUsage

REFUSED = "--max-usd reached"
"""The message of a refused call (a run it stops is reported "not scored: --max-usd reached")."""


@dataclass
class _Reservation:
    """A call's reserved worst case (USD)."""

    usd: float


class SpendCap:
    """This invocation's judge spend against ``max_usd`` (see the module docstring).

    Use one `for_run` governor per scorer run: it knows whether its run already made a call.

    Example:
        >>> import asyncio
        >>> cap = SpendCap(0.001)
        >>> def request(prompt):
        ...     r = JudgeRequest("openai/gpt-4o-mini", "c", "q", [], None, max_output_tokens=100,
        ...                      input_price=1e-6, output_price=2e-6)
        ...     r.prompt_tokens = prompt
        ...     return r
        >>> async def two_runs():
        ...     first, second = cap.for_run(), cap.for_run()
        ...     big = request(500)  # worst case 500 * 1e-6 + 100 * 2e-6 = 0.0007 USD
        ...     ticket = await first.admit(big)
        ...     waiting = asyncio.create_task(second.admit(big))  # 0.0007 reserved + 0.0007 > 0.001: it waits
        ...     await asyncio.sleep(0)
        ...     assert not waiting.done() and round(cap.reserved, 6) == 0.0007
        ...     await first.settle(ticket, big, JudgeUsage(input_tokens=500, output_tokens=40), 0.00058, None)
        ...     try:  # 0.00058 spent + 0.0007 > 0.001: it can never fit
        ...         await waiting
        ...     except JudgeParked as refused:
        ...         return str(refused), round(cap.spent, 6), cap.reserved, cap.calls, cap.refused
        >>> asyncio.run(two_runs())
        ('--max-usd reached', 0.00058, 0.0, 1, 1)
        >>> _ = asyncio.run(cap.for_run().admit(request(100)))  # a new run does not start after a refusal
        Traceback (most recent call last):
        ...
        scorers._judge_governor.JudgeParked: --max-usd reached
        >>> started = cap.for_run(); started.started = True  # a started run goes on while it fits
        >>> asyncio.run(started.admit(request(100))).state
        _Reservation(usd=0.0003)
    """

    def __init__(self, max_usd: float, default_output_tokens: int = 1024, allow_unpriced: bool = False) -> None:
        self.max_usd = max_usd
        self.default_output_tokens = default_output_tokens
        self.allow_unpriced = allow_unpriced
        self.spent = 0.0
        self.reserved = 0.0
        self.calls = 0
        self.refused = 0
        self.stopped = False
        self.first_refused_usd: float | None = None  # the worst case of the first call refused
        self._settled: asyncio.Condition | None = None  # made in the scoring's event loop
        self._waiting_started = 0  # calls of started runs waiting for room: new runs wait behind them
        self.unpriced: set[str] = set()

    def for_run(self) -> RunSpend:
        """The governor of one scorer run (`govern_judge_calls` around the run)."""
        return RunSpend(self)

    async def admit(self, request: JudgeRequest, started: bool) -> JudgeTicket:
        """Reserve the call's worst case, once it fits beside the calls in flight; or refuse it
        (`JudgeParked`). ``started``: its run already made a call."""
        if not request.priced:
            if not self.allow_unpriced:
                self.unpriced.add(request.model)
                raise JudgeParked("budget_exhausted", f"judge model {request.model} has no known price", 0.0)
            return JudgeTicket(state=_Reservation(0.0))
        worst = request.worst_case_usd(self.default_output_tokens)
        if self._settled is None:
            self._settled = asyncio.Condition()
        async with self._settled:
            self._waiting_started += started
            try:
                while True:
                    if (self.stopped and not started) or self.spent + worst > self.max_usd:
                        self.stopped = True
                        self.refused += 1
                        if self.first_refused_usd is None:
                            self.first_refused_usd = worst
                        raise JudgeParked("budget_exhausted", REFUSED, 0.0)
                    fits = self.spent + self.reserved + worst <= self.max_usd
                    if fits and (started or not self._waiting_started):  # started runs first
                        self.reserved += worst
                        return JudgeTicket(state=_Reservation(worst))
                    await self._settled.wait()  # a call in flight settles and wakes this
            finally:
                self._waiting_started -= started

    async def settle(self, ticket: JudgeTicket, request: JudgeRequest, usage: JudgeUsage | None,
                     cost_usd: float | None) -> None:
        """Replace the call's reservation by its actual cost (its usage at the model's prices), and
        wake the calls waiting for room."""
        reservation: _Reservation = ticket.state
        self.reserved = max(0.0, self.reserved - reservation.usd)
        self.calls += 1
        if cost_usd is None and usage is not None and request.priced:
            cost_usd = usage.input_tokens * (request.input_price or 0.0) + \
                usage.output_tokens * (request.output_price or 0.0)
        self.spent += cost_usd or 0.0
        if self._settled is not None:
            async with self._settled:
                self._settled.notify_all()

    def summary(self, not_scored: int, total: int) -> str:
        """The line printed after the scores: what was spent, and what was left unscored.

        Example:
            >>> cap = SpendCap(0.05); cap.spent, cap.calls = 0.0493, 120
            >>> cap.summary(7, 40)
            '--max-usd 0.05: spent 0.049300 USD on 120 judge call(s); 7 of 40 score(s) not scored (--max-usd reached)'
            >>> cap.summary(0, 40)
            '--max-usd 0.05: spent 0.049300 USD on 120 judge call(s); every score done'
            >>> cap = SpendCap(0.0005); cap.refused, cap.first_refused_usd = 1, 0.00063
            >>> print(cap.summary(1, 1))  # not one call fits
            --max-usd 0.0005: spent 0.000000 USD on 0 judge call(s); 1 of 1 score(s) not scored (--max-usd reached);
            a judge call may cost up to 0.000630 USD (its prompt and output cap): raise --max-usd, or lower the
            output cap (max_tokens in the judge's model_settings, or --default-output-tokens)
        """
        left = f"{not_scored} of {total} score(s) not scored ({REFUSED})" if not_scored else "every score done"
        line = f"--max-usd {self.max_usd:g}: spent {self.spent:.6f} USD on {self.calls} judge call(s); {left}"
        if self.calls == 0 and self.first_refused_usd is not None:  # not one call fits
            line += (f"; a judge call may cost up to {self.first_refused_usd:.6f} USD (its prompt and output cap): "
                     "raise --max-usd, or lower the output cap (max_tokens in the judge's model_settings, or "
                     "--default-output-tokens)")
        return line


class RunSpend:
    """The `SpendCap` governor of one scorer run (a `scorers._judge_governor.JudgeGovernor`)."""

    def __init__(self, cap: SpendCap) -> None:
        self.cap = cap
        self.started = False

    async def admit(self, request: JudgeRequest) -> JudgeTicket:
        """Reserve the call's worst case, or refuse it."""
        ticket = await self.cap.admit(request, self.started)
        self.started = True
        return ticket

    async def settle(self, ticket: JudgeTicket, request: JudgeRequest, usage: JudgeUsage | None,
                     cost_usd: float | None, error: BaseException | None) -> None:
        """Count the call's actual cost (a failed call: its usage, if the provider billed any)."""
        await self.cap.settle(ticket, request, usage, cost_usd)


async def unpriced_models(scorers: Sequence[Any]) -> list[str]:
    """The judge models of ``scorers``' prompt steps that litellm has no price for (loads
    litellm; a scorer outside the engine, or a model litellm cannot route, is left to its
    first call).

    Example:
        >>> import asyncio
        >>> from scorers.builtin import answer_relevancy
        >>> asyncio.run(unpriced_models([answer_relevancy("openai/gpt-4o-mini"),
        ...                              answer_relevancy("hosted_vllm/my-own-model", id="mine")]))
        ['hosted_vllm/my-own-model']
    """
    from scorers._judge_transport import ensure_litellm, route_for

    models: dict[str, bool] = {}
    for scorer in scorers:
        get_judges = getattr(scorer, "get_judges", None)
        if not callable(get_judges):
            continue
        for judge in get_judges():
            if not judge.model or judge.model in models:
                continue
            await ensure_litellm()
            try:
                models[judge.model] = route_for(judge.model, judge.model_settings).unit_prices() is None
            except Exception:
                models[judge.model] = False
    return [model for model, unpriced in models.items() if unpriced]


def unpriced_message(models: Sequence[str]) -> str:
    """The one-line error of ``--max-usd`` with a model litellm has no price for.

    Example:
        >>> unpriced_message(["hosted_vllm/mine"])
        'tracescore: --max-usd: no price in litellm for judge model hosted_vllm/mine, so its spend cannot be counted; pass --allow-unpriced to score anyway (its calls count 0 USD)'
    """
    return (f"tracescore: --max-usd: no price in litellm for judge model {', '.join(models)}, so its spend "
            "cannot be counted; pass --allow-unpriced to score anyway (its calls count 0 USD)")


def judge_governor(args: argparse.Namespace) -> EstimatingGovernor | SpendCap | None:
    """The governor of the judge calls ``--estimate`` or ``--max-usd`` asks for (None: neither).

    Example:
        >>> judge_governor(argparse.Namespace(estimate=True, estimate_output_tokens=None,
        ...                                   default_output_tokens=1024)).__class__.__name__
        'EstimatingGovernor'
        >>> judge_governor(argparse.Namespace(max_usd=None)) is None
        True
    """
    if getattr(args, "estimate", False):
        return EstimatingGovernor(args.estimate_output_tokens, args.default_output_tokens)
    if getattr(args, "max_usd", None) is not None:
        return SpendCap(args.max_usd, args.default_output_tokens, args.allow_unpriced)
    return None


def governor_for_run(governor: EstimatingGovernor | SpendCap | None) -> Callable[[], JudgeGovernor | None] | None:
    """What gives each scorer run its governor: a spend cap's own per run, else the one governor.

    Example:
        >>> governor_for_run(None) is None
        True
        >>> estimate = EstimatingGovernor()
        >>> governor_for_run(estimate)() is estimate
        True
    """
    if isinstance(governor, SpendCap):
        return governor.for_run
    return None if governor is None else (lambda: governor)
