"""The measuring of ``tracescore align`` (SPEC §11), once the labelled items are split.

1. The current judge runs on every train and holdout item (fresh judge calls): its holdout
   agreement is the one to beat; its train verdicts say where it disagrees, and the prompts
   its train calls were shown are the few-shot examples' content.
2. The proposer is asked ``--candidates`` times (concurrently) for rewritten instructions
   from the train disagreements; each reply is a candidate or a failed candidate
   (`collector.commands.align.propose.usable`).
3. Each candidate is measured on the holdout without few-shot examples, then with up to
   ``--few-shot`` examples from train (`collector.common.few_shot`: balanced across verdicts,
   newest first; the holdout never holds an example's item).
4. The best measurement (the highest kappa, the first on a tie: without examples before
   with) is adopted when it beats the current judge (`judging.Agreement.beats`).

Under ``--estimate`` (`judging.Estimating`) the same steps run with made-up replies: every
train item counts as a disagreement (the proposer's prompt at its largest) and every
candidate as usable, with the current instructions' length.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from collector.commands.align.items import LabelledItem
from collector.commands.align.judging import (
    Agreement,
    AlignStopped,
    Estimating,
    Judged,
    Spending,
    agreement_of,
    judge_items,
)
from collector.commands.align.propose import ask, proposer_prompt, usable
from collector.commands.align.report import AlignReport, Candidate
from collector.common.few_shot import Example, balanced, examples_text
from collector.status.verdicts import ScorerRule
from collector.work.registry import RegisteredScorer
from scorers._judge_governor import parked_cause
from scorers._judge_types import Judge
from scorers.errors import JudgeError

__all__ = ["PHASES", "Plan", "measure"]

PHASES = ("current judge", "proposer", "candidates", "candidates with few-shot")
"""The phases an align spends in, in order (``--estimate`` has a row for each)."""


@dataclass(frozen=True)
class Plan:
    """What an align works with: the arguments, the configured scorer, its one judge, the
    proposer, and how its scores become verdicts."""

    args: argparse.Namespace
    entry: RegisteredScorer
    judge: Judge
    proposer: Judge
    rule: ScorerRule

    @property
    def scorer_id(self) -> str:
        """The scorer's id."""
        return self.entry.scorer_id


async def _judge(plan: Plan, scorer: Any, items: Sequence[LabelledItem], examples: str,
                 spend: Spending | Estimating, phase: str, err: Console) -> list[Judged]:
    return await judge_items(scorer, items, entry=plan.entry, rule=plan.rule, examples=examples,
                             concurrency=plan.args.concurrency, err=err,
                             governor_for_run=lambda: spend.for_run(phase))


async def _agreement(items: Sequence[LabelledItem], judged: Sequence[Judged]) -> Agreement:
    """`agreement_of` in a thread: scikit-learn's import and the bootstrap's resamples stay off the loop."""
    return await asyncio.to_thread(agreement_of, items, judged)


async def _proposals(plan: Plan, disagreements: list[tuple[LabelledItem, Judged]],
                     spend: Spending | Estimating) -> list[tuple[str | None, str | None]]:
    """(instructions, why not) per candidate."""
    count = plan.args.candidates
    description = str(getattr(plan.entry.scorer, "description", "") or plan.scorer_id)
    current = plan.judge.instructions or ""
    replies = await asyncio.gather(*(
        ask(plan.proposer, proposer_prompt(description, current, plan.rule, disagreements, n, count),
            spend.for_run("proposer"), plan.scorer_id) for n in range(1, count + 1)), return_exceptions=True)
    found: list[tuple[str | None, str | None]] = []
    for reply in replies:
        if isinstance(reply, BaseException):
            parked = parked_cause(reply)
            if parked is not None:
                raise AlignStopped(f"a proposer call was not made: {parked}") from reply
            if isinstance(reply, JudgeError):
                raise AlignStopped(f"the proposer failed: {reply}") from reply
            raise reply
        found.append((current, None) if isinstance(spend, Estimating) else usable(reply, current))
    return found


async def measure(plan: Plan, train: Sequence[LabelledItem], holdout: Sequence[LabelledItem],
                  spend: Spending | Estimating, err: Console) -> AlignReport:
    """Run the align's four steps (module docstring) and return the report (nothing written).

    Raises:
        AlignStopped: a call was refused, or the judge or the proposer failed for good.
    """
    scorer = plan.entry.scorer
    estimate = isinstance(spend, Estimating)
    judged = await _judge(plan, scorer, [*train, *holdout], "", spend, PHASES[0], err)
    on_train, on_holdout = judged[:len(train)], judged[len(train):]
    current = await _agreement(holdout, on_holdout)
    disagreements = [(item, j) for item, j in zip(train, on_train, strict=True)
                     if j.verdict is not None and (estimate or j.verdict != item.verdict)]
    examples = balanced([Example(item.key, j.prompt, item.verdict, item.rationale, item.labelled_at, item.key)
                         for item, j in zip(train, on_train, strict=True) if j.prompt],
                        plan.args.few_shot, plan.rule.verdicts)
    shown_examples = examples_text(examples)
    report = AlignReport(plan.scorer_id, len(train) + len(holdout), len(train), len(holdout), len(disagreements),
                         current, instructions=plan.judge.instructions or "")
    for number, (text, why_not) in enumerate(await _proposals(plan, disagreements, spend), 1):
        if text is None:
            report.candidates.append(Candidate(number, None, error=f"not usable instructions: {why_not}"))
            continue
        rewritten = scorer.with_instructions(text)
        without = await _judge(plan, rewritten, holdout, "", spend, PHASES[2], err)
        report.candidates.append(Candidate(number, text, 0, await _agreement(holdout, without)))
        if shown_examples:
            shown = await _judge(plan, rewritten, holdout, shown_examples, spend, PHASES[3], err)
            report.candidates.append(Candidate(number, text, len(examples), await _agreement(holdout, shown)))
    best = None
    for candidate in report.candidates:
        agreement = candidate.agreement
        if agreement is not None and (best is None or agreement.beats(best[1])):
            best = (candidate, agreement)
    report.best = best[0] if best is not None else None
    report.adopted = bool(not estimate and best is not None and best[1].beats(current))
    return report
