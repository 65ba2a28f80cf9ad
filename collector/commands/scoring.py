"""Scoring one batch of agent runs offline, and summing the batches up: what ``tracescore score``
does with the runs of its FILEs (`collector.commands.score`) and with each page pulled from a
backend by ``--from`` (`collector.commands.score_from`), so both print, export, summarize and
gate alike.

`score_all` runs every scorer on every run (and every conversation scorer on every session),
each under its judge governor, into one `Outcome` per (run, scorer); `score_batch` prints a
batch's rows (``--format``) and, with ``--export``, sends its scores; `finish` prints the
summary, the gate's failures or the estimate, and gives the exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from adapters import AgentRun
from collector.commands.already_scored import skipped_pairs
from collector.commands.backfill import export_outcomes
from collector.commands.conversations import SessionUnit, is_conversation_scorer
from collector.commands.estimate import EstimatingGovernor, print_estimate
from collector.commands.gate import gate_failures, summarize, summary_table
from collector.commands.inspect import Loaded, run_row
from collector.commands.layout import print_table
from collector.commands.progress_bar import progress
from collector.commands.spend_cap import SpendCap, governor_for_run, unpriced_message
from collector.common.ids import run_id_for
from collector.work.conversation import scored_what
from collector.work.registry import load_judge_client
from scorers._judge_governor import JudgeGovernor, govern_judge_calls, parked_cause
from scorers.errors import ScorerRunError

logger = logging.getLogger(__name__)
__all__ = ["Batch", "Outcome", "finish", "score_all", "score_batch"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one (run, scorer) pair.

    Example:
        >>> Outcome(run_index=0, scorer_id="s", score=1.0, reason=None, error=None).failed
        False
    """

    run_index: int
    scorer_id: str
    score: float | None
    reason: Any
    error: str | None
    not_scorable: bool = False
    result: Any = None  # the scorer's result (or the partial result of a failure), for --export
    exception: BaseException | None = None
    start_ns: int = 0
    end_ns: int = 0
    not_scored: str | None = None  # why a judge call was refused ("--max-usd reached"): no score, no failure

    @property
    def failed(self) -> bool:
        """Whether the scorer raised.

        Example:
            >>> Outcome(0, "s", None, None, "boom").failed
            True
        """
        return self.error is not None


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        dump = getattr(value, "model_dump", None)
        return dump(mode="json") if callable(dump) else str(value)
    return value


async def _score_one(scorer: Any, index: int, agent_run: AgentRun, conversation: Any = None,
                     governor: JudgeGovernor | None = None) -> Outcome:
    scorer_id = str(getattr(scorer, "id", "?"))
    what = scored_what(agent_run.trace_id, agent_run.span_id, getattr(conversation, "session_id", None),
                       getattr(conversation, "revision", None))
    start_ns = time.time_ns()
    try:
        with govern_judge_calls(governor, scorer_id):
            result = await scorer.run(conversation) if conversation is not None else await scorer.run(
                input=agent_run.input,
                output=agent_run.output,
                run_id=run_id_for(agent_run.trace_id, agent_run.span_id),  # as the daemon names the run
                request_context=dict(agent_run.request_context),
                trace_id=agent_run.trace_id,
                span_id=agent_run.span_id,
            )
    except Exception as err:  # a user scorer outside the engine may raise anything
        parked = parked_cause(err)
        if parked is not None:  # the governor refused a judge call: not scored, not failed
            logger.info("not scored: %s on %s: %s", scorer_id, what, parked)
            return Outcome(index, scorer_id, None, f"not scored: {parked}", None, start_ns=start_ns,
                           end_ns=time.time_ns(), not_scored=str(parked))
        logger.info("scorer %s failed on %s", scorer_id, what, exc_info=err)  # the traceback at -v
        message = str(err) if isinstance(err, ScorerRunError) else f"{type(err).__name__}: {err}"
        return Outcome(index, scorer_id, None, None, message, result=getattr(err, "partial_result", None),
                       exception=err, start_ns=start_ns, end_ns=time.time_ns())
    end_ns = time.time_ns()
    elapsed_ms = (end_ns - start_ns) / 1e6
    not_scorable = getattr(result, "not_scorable", None)
    if not_scorable is not None and not_scorable is not False:
        why = getattr(not_scorable, "reason", None)
        logger.info("not scorable: %s on %s (%.0f ms): %s", scorer_id, what, elapsed_ms, why or "-")
        return Outcome(index, scorer_id, None, f"not scorable: {why}" if why else "not scorable", None, True)
    score = getattr(result, "score", None)
    logger.info("scored %s on %s: %s (%.0f ms)", scorer_id, what, score, elapsed_ms)
    return Outcome(index, scorer_id, score, _jsonable(getattr(result, "reason", None)), None, result=result,
                   start_ns=start_ns, end_ns=end_ns)


async def score_all(runs: Sequence[AgentRun], scorers: Sequence[Any], concurrency: int, err: Console,
                    conversations: Mapping[int, Any] | None = None, bar: Progress | None = None,
                    governor_for_run: Callable[[], JudgeGovernor | None] | None = None,
                    skip: Collection[tuple[int, str]] = ()) -> list[Outcome]:
    """Score every run with every run scorer, and each conversation (``conversations``: the
    `ConversationRun` of ``runs[i]``, a session's unit) with every conversation scorer,
    ``concurrency`` at a time, but the (run index, scorer id) pairs in ``skip`` (scored
    before); outcomes in (run, scorer) order. Each scorer run's judge calls go through
    ``governor_for_run()`` (`judge_governor`: an estimate, a spend cap), if given.

    The judge client is loaded first when a scorer has a prompt step (`load_judge_client`).
    ``bar``: a progress bar already shown (a backfill's), which gets this batch's task.

    Example:
        >>> import asyncio, io
        >>> asyncio.run(score_all([], [], 4, Console(file=io.StringIO())))
        []
    """
    await load_judge_client(scorers)
    conversations = conversations or {}
    semaphore = asyncio.Semaphore(concurrency)
    pairs = [(index * len(scorers) + k, scorer, index) for index in range(len(runs))
             for k, scorer in enumerate(scorers) if is_conversation_scorer(scorer) == (index in conversations)
             and (index, str(scorer.id)) not in skip]
    outcomes: list[Outcome | None] = [None] * (len(runs) * len(scorers))
    with contextlib.nullcontext(bar) if bar is not None else progress(err) as shown:
        task = shown.add_task("scoring", total=len(pairs))

        async def job(slot: int, scorer: Any, index: int) -> None:
            async with semaphore:
                governor = governor_for_run() if governor_for_run is not None else None
                outcomes[slot] = await _score_one(scorer, index, runs[index], conversations.get(index), governor)
            shown.advance(task)

        async with asyncio.TaskGroup() as group:
            for slot, scorer, index in pairs:
                group.create_task(job(slot, scorer, index))
        if bar is not None:
            bar.remove_task(task)
    return [o for o in outcomes if o is not None]


def _results_table(runs: Sequence[AgentRun], outcomes: Sequence[Outcome]) -> Table:
    table = Table(title=f"{len(outcomes)} score(s)")
    for name in ("trace / span", "service", "scorer", "score", "reason / error"):
        table.add_column(name, overflow="fold")
    for o in outcomes:
        r = runs[o.run_index]
        score = "-" if o.score is None else f"{o.score:.3f}"
        note = o.error if o.error is not None else ("" if o.reason is None else str(o.reason))
        table.add_row(f"{r.trace_id[:8]}…/{r.span_id}\n{r.span_name}", r.service, o.scorer_id, score, note[:200])
    return table


@dataclass(frozen=True)
class Batch:
    """What scoring one batch of runs gave: each outcome (without the scorer's result, which is
    exported and printed, then let go), whether every score was exported, and how many (run,
    scorer) pairs were not scored as scored before (their evaluation spans were read)."""

    outcomes: list[Outcome]
    exported: bool
    skipped: int = 0


async def score_batch(args: argparse.Namespace, scorers: Sequence[Any], export_config: Any, loaded: Loaded,
                      units: Sequence[SessionUnit], err: Console, bar: Progress | None = None,
                      governor: EstimatingGovernor | SpendCap | None = None) -> Batch:
    """Score one batch of runs (the files given, or a page pulled from a backend) and the
    sessions ``units`` (added to ``loaded.runs``, scored by the conversation scorers), but what
    was scored before (`skipped_pairs`, unless ``--rescore``), print its rows (``--format``)
    and, with ``--export``, send its scores. Under ``governor``
    (`judge_governor`): an estimate prints no row and exports nothing; under a spend cap the
    runs it refused are printed "not scored" and not exported.

    Example:
        >>> import io
        >>> batch = asyncio.run(score_batch(argparse.Namespace(format="jsonl", concurrency=1), [], None,
        ...                                 Loaded(), [], Console(file=io.StringIO())))
        >>> (batch.outcomes, batch.exported)
        ([], True)
    """
    skip = skipped_pairs(loaded, units, scorers, bool(getattr(args, "rescore", False)))
    conversations = {len(loaded.runs) + i: unit for i, unit in enumerate(units)}
    loaded.runs.extend(unit.unit for unit in units)
    outcomes = await score_all(loaded.runs, scorers, args.concurrency, err,
                               {i: unit.conversation for i, unit in conversations.items()}, bar,
                               governor_for_run(governor), skip)
    if isinstance(governor, EstimatingGovernor):  # a dry run: the estimate is printed by `finish`
        return Batch([replace(o, result=None, exception=None) for o in outcomes], True, len(skip))
    if (args.format or "table") == "jsonl":
        for o in outcomes:
            row = run_row(loaded.runs[o.run_index])
            row = {
                **{k: row[k] for k in ("trace_id", "span_id", "span_name", "service", "convention")},
                "scorer": o.scorer_id,
                "score": o.score,
                "reason": o.reason,
                "error": o.error,
                "input": row["input"],
                "output": row["output"],
            }
            if o.run_index in conversations:  # a session's score: its key (SPEC §7)
                row["session_id"] = conversations[o.run_index].conversation.session_id
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    elif outcomes or not getattr(args, "source", None):  # a backfill's empty page prints no table
        print_table(Console(), _results_table(loaded.runs, outcomes))
    exported = True
    scored = [o for o in outcomes if o.not_scored is None]  # a run --max-usd refused is not exported
    if export_config is not None and (scored or not getattr(args, "source", None)):  # a page of no runs: no-op
        exported = await export_outcomes(export_config, args, loaded, scorers, scored, err,
                                         {i: unit.record for i, unit in conversations.items()},
                                         report=not getattr(args, "source", None))
    return Batch([replace(o, result=None, exception=None) for o in outcomes], exported, len(skip))


def finish(args: argparse.Namespace, scorers: Sequence[Any], outcomes: Sequence[Outcome], err: Console,
           failed: bool = False, governor: EstimatingGovernor | SpendCap | None = None) -> int:
    """Print the summary per scorer (stdout for ``table``, stderr for ``jsonl``) and the gate's
    failures, or (``--estimate``) the estimate; under ``--max-usd``, what was spent. The exit
    code: 1 when the gate failed, ``--max-usd`` left runs unscored, or ``failed`` (a file
    unread, a score not exported); 2 when a judge model with no known price was met under
    ``--max-usd``; else 0.

    Example:
        >>> import io
        >>> finish(argparse.Namespace(format="jsonl"), [], [], Console(file=io.StringIO()))
        0
    """
    out_format = args.format or "table"
    scorer_ids = [str(scorer.id) for scorer in scorers]
    if isinstance(governor, EstimatingGovernor):
        print_estimate(out_format, governor, scorer_ids, outcomes, err)
        return 1 if failed else 0
    scored = [o for o in outcomes if o.not_scored is None]
    summary = summarize(scorer_ids, scored)
    print_table(err if out_format == "jsonl" else Console(), summary_table(summary))
    problems = gate_failures(summary, dict(getattr(args, "fail_under", None) or []),
                             getattr(args, "max_failures", None))
    for problem in problems:
        err.print(f"gate failed: {problem}", markup=False, highlight=False, soft_wrap=True)
    if isinstance(governor, SpendCap):
        if governor.unpriced:  # a model no scorer declared (a user scorer outside the engine)
            err.print(unpriced_message(sorted(governor.unpriced)), markup=False, highlight=False, soft_wrap=True)
            return 2
        not_scored = len(outcomes) - len(scored)
        err.print(governor.summary(not_scored, len(outcomes)), markup=False, highlight=False, soft_wrap=True)
        if not_scored:
            return 1
    return 1 if problems or failed else 0
