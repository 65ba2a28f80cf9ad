"""``tracescore align SCORER_ID --proposer MODEL (--from URL | FILE...) --config FILE`` (SPEC §11).

Rewrites the instructions of a scorer's judge from the deployment's labels, and adopts a
rewrite only when it agrees with the people better than the current judge on items it was not
written from:

- the scorer (``SCORER_ID``, configured in ``--config``) must have exactly one judge
  (`scorers._judge_instructions.single_judge`); its labels are the deployment's, from the
  store, matched to the runs of FILEs or ``--from URL`` (`collector.commands.align.items`);
  fewer than ``--min-labels`` labelled items stops before any judge call, saying how many
  there are and where their labels came from;
- the items are split by trace id into train and holdout (``--holdout``), the current judge
  is measured, the proposer asked, each candidate measured (`collector.commands.align.flow`),
  every call under ``--max-usd`` and the deployment's ``[judge.budgets]``, rates and breakers
  (`collector.commands.align.judging`);
- the report is a table, or with ``--json`` one object (`collector.commands.align.report`);
  when the best candidate beats the current judge on the holdout (a higher kappa), its
  instructions are written to ``DIR/<scorer id>.toml`` (``--out DIR``, default ``.``),
  atomically. A scorer adopts them with ``[[scorers]] instructions_file = "DIR/<id>.toml"``;
  nothing running changes by itself.

``--estimate`` prints the calls, tokens and USD the align would spend (per phase and in
total, as ``score --estimate`` does), sending nothing. Exit codes: 0 done (adopted or not,
or estimated); 1 a call was refused (``--max-usd``, a budget, an open breaker) or the judge
or proposer failed for good mid-way (nothing written), or the store cannot be reached;
2 bad input: the configuration, the scorer (unknown, no judge, several judges), the runs
(unreadable FILEs, a bad ``--from``), too few labels, a split with an empty side, or under
``--max-usd`` a model with no known price (unless ``--allow-unpriced``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.console import Console

from collector.commands.align.flow import PHASES, Plan, measure
from collector.commands.align.items import labelled_items, read_runs, split, too_few
from collector.commands.align.judging import AlignStopped, Estimating, Spending
from collector.commands.align.propose import proposer_judge
from collector.commands.align.report import (
    AlignReport,
    estimate_table,
    print_table,
    toml_text,
    write_instructions,
)
from collector.commands.dead_letters import open_judge_ledger, unreachable
from collector.commands.estimate import EstimateRow, Tally
from collector.commands.label_context import Deployment, deployment
from collector.commands.label_store import open_label_store_made
from collector.commands.layout import print_table as show
from collector.commands.report import report_config_error
from collector.commands.spend_cap import SpendCap, unpriced_message, unpriced_models
from collector.common.errors import ConfigError, PullError
from collector.common.metrics import Metrics
from collector.status.agreement_labels import LabelIndex
from collector.status.verdicts import rule_for
from collector.work.governor import JudgeGovernance
from scorers._judge_instructions import single_judge
from scorers.errors import ScorerDefinitionError

__all__ = ["run"]


def _say(err: Console, text: str) -> None:
    err.print(text, markup=False, highlight=False, soft_wrap=True)


def plan_of(args: argparse.Namespace, found: Deployment) -> Plan:
    """The scorer to align, its one judge and the proposer.

    Raises:
        ConfigError: no configured scorer has the id, or it has no judge or several.
    """
    entries = [e for e in found.registry.entries if e.scorer_id == args.scorer_id]
    if not entries:
        known = ", ".join(e.scorer_id for e in found.registry.entries) or "none"
        raise ConfigError(f"align: no scorer {args.scorer_id!r} in the configuration (configured: {known})")
    entry = entries[-1]  # several versions of one id: the last configured
    try:
        judge = single_judge(entry.scorer)
    except ScorerDefinitionError as exc:
        raise ConfigError(f"align: {exc}") from None
    name = found.name_of(entry.scorer_id)
    return Plan(args, entry, judge, proposer_judge(args.proposer, judge, args.proposer_api_base),
                rule_for(name, found.rules))


def run(args: argparse.Namespace) -> int:
    """Align; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml", scorer_id="tone", files=[], source=None))
        2
    """
    err = Console(stderr=True)
    try:
        found = deployment(args)
        plan = plan_of(args, found)
    except ConfigError as exc:
        report_config_error(exc)
        return 2
    if bool(getattr(args, "source", None)) == bool(args.files):
        _say(err, "tracescore: align takes FILE... or --from URL" + (", not both" if args.files else ""))
        return 2
    if args.max_usd is not None and not args.allow_unpriced:
        proposer = SimpleNamespace(get_judges=lambda: [plan.proposer])
        unpriced = asyncio.run(unpriced_models([plan.entry.scorer, proposer]))
        if unpriced:  # before any call: its spend could not be counted
            _say(err, unpriced_message(unpriced))
            return 2
    try:
        done = asyncio.run(_align(plan, found, err))
    except unreachable(found.config) as exc:
        _say(err, f"tracescore: cannot reach the store at {found.config.queue.display_url}: {exc}")
        return 1
    if done.message:
        _say(err, done.message)
    if done.estimating is not None and done.report is not None:
        _print_estimate(plan, done.report, done.estimating, err)
    elif done.report is not None:
        _finish(plan, done.report)
    return done.code


@dataclass
class _Done:
    """How `_align` ended: the exit code, a message for stderr, the report (an estimate's too)."""

    code: int
    message: str | None = None
    report: AlignReport | None = None
    estimating: Estimating | None = None


async def _align(plan: Plan, found: Deployment, err: Console) -> _Done:
    """Read, split and measure (no output: `run` prints and writes once the loop is done)."""
    args, config = plan.args, found.config
    name = found.name_of(plan.scorer_id)
    store = await open_label_store_made(config)
    try:
        labels = await store.labels(name)
    finally:
        await store.close()
    index = LabelIndex.of(labels, found.rules)
    conversation = plan.entry.is_conversation
    try:
        readings = await read_runs(args, config, index, conversation, err)
    except (ConfigError, PullError) as exc:
        return _Done(2, f"tracescore: {exc}")
    if readings.failed_files:
        return _Done(2, f"tracescore: align: {len(readings.failed_files)} file(s) could not be read: nothing measured")
    items = labelled_items(readings.loaded, index, name, conversation, config.sessions.min_turns)
    if len(items) < args.min_labels:
        return _Done(2, too_few(plan.scorer_id, name, items, labels, index, readings, args.min_labels))
    train, holdout = split(items, args.holdout)
    if not train or not holdout:
        return _Done(2, f"tracescore: align {plan.scorer_id}: the split of {len(items)} labelled item(s) by trace "
                        f"id left {'no holdout' if not holdout else 'no train'} item; change --holdout "
                        f"({args.holdout:g})")
    if args.estimate:
        estimating = Estimating(args.estimate_output_tokens, args.default_output_tokens)
        return _Done(0, None, await measure(plan, train, holdout, estimating, err), estimating)
    ledger = open_judge_ledger(config)
    cap = SpendCap(args.max_usd, args.default_output_tokens, args.allow_unpriced) if args.max_usd else None
    spending = Spending(cap, JudgeGovernance(ledger, config.judge, config.workers, Metrics()))
    try:
        report = await measure(plan, train, holdout, spending, err)
    except AlignStopped as stop:
        usd = spending.usd_value()
        return _Done(1, f"tracescore: align {plan.scorer_id} stopped: {stop}; {spending.calls} call(s), "
                        + ("unpriced" if usd is None else f"{usd:.6f}") + " USD spent; nothing written")
    finally:
        await ledger.close()
    report.calls, report.usd = spending.calls, spending.usd_value()
    return _Done(0, None, report)


def _finish(plan: Plan, report: AlignReport) -> None:
    """Write the instructions file when the best candidate beats the current judge; print the report."""
    if report.adopted and report.best is not None and report.best.instructions is not None:
        path = Path(plan.args.out) / f"{plan.scorer_id}.toml"
        write_instructions(path, toml_text(report.best.instructions, _note(plan, report)))
        report.out = str(path)
    if plan.args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print_table(report)


def _note(plan: Plan, report: AlignReport) -> str:
    """The comment at the top of the instructions file."""
    best = report.best
    kappa = best.agreement.kappa if best is not None and best.agreement is not None else None
    lines = [f"written by tracescore align for scorer {plan.scorer_id!r} (judge {plan.judge.model}); adopt with",
             f'[[scorers]] instructions_file = "<this file>"; holdout of {report.holdout_n} item(s): kappa '
             f"{kappa} against {report.current.kappa} for the current instructions"]
    if best is not None and best.few_shot:
        lines.append(f"measured with few_shot = {best.few_shot} (set it in the scorer's [[scorers]] entry too)")
    return "\n".join(lines)


def _print_estimate(plan: Plan, report: AlignReport, estimating: Estimating, err: Console) -> None:
    """The estimate: a row per phase and the total; ``--json``: one object."""
    items = {PHASES[0]: report.train_n + report.holdout_n, PHASES[1]: plan.args.candidates,
             PHASES[2]: plan.args.candidates * report.holdout_n,
             PHASES[3]: plan.args.candidates * report.holdout_n if estimating.tally(PHASES[3]).calls else 0}
    rows, total = [], Tally()
    for phase in PHASES:
        tally = estimating.tally(phase)
        total.merge(tally)
        rows.append(EstimateRow(phase, items[phase], 0, tally))
    rows.append(EstimateRow("total", sum(items.values()), 0, total))
    if plan.args.json:
        out: dict[str, Any] = {"scorer": plan.scorer_id, "labels": report.labels, "train_n": report.train_n,
                               "holdout_n": report.holdout_n, "estimate": []}
        for row in rows[:-1]:
            figures = row.as_dict()
            figures.pop("failed")
            out["estimate"].append({"phase": figures.pop("scorer"), "items": figures.pop("runs"), **figures})
        out.update(calls=total.calls, usd=total.usd_value(total.usd), worst_case_usd=total.usd_value(total.worst_usd))
        print(json.dumps(out, ensure_ascii=False))
    else:
        show(Console(), estimate_table(rows))
    if total.unpriced_models:
        _say(err, f"no price in litellm for {', '.join(sorted(total.unpriced_models))}: its calls are counted in "
                  "tokens only")
    sys.stdout.flush()
