"""``tracescore score --from URL``: score the runs already in Phoenix, MLflow or Langfuse (SPEC §10).

The backend is read a page of traces at a time (`collector.receive.pull`): each page's whole
traces go through the adapters as the files' traces do (`collector.commands.inspect.add_runs`),
and the page is scored, printed and, with ``--export``, exported by the same
`collector.commands.scoring.score_batch` as files are, with the daemon's ids (scoring a window
twice, or after the daemon scored it live, creates nothing twice). Then the cursor file
records the next page (`collector.receive.pull.cursor`), so ``--resume`` continues an
interrupted backfill there. One page is held at a time; with a conversation scorer the
session turns (runs, not spans) are kept too, and the sessions are scored once the window is
read (a window is complete, as files are). Resuming with a conversation scorer reads the
window again from its start for the sessions' turns, scoring the runs only from the cursor on.

What was scored before is in the traces read: the evaluation spans the daemon (or an earlier
backfill) exported to the backend (`collector.commands.scored_before`). A run or session whose
score by the same scorer version is there is skipped (no judge call paid twice; ``--rescore``
scores it again), and the count is reported; a run read without a service (Phoenix) takes the
one its scores name, and a session its revision, so what is sent again has the daemon's ids.

A progress bar (stderr, on a terminal) counts the traces read. Errors (an unknown project
or experiment, refused credentials, an answer not shaped like the backend's API, a backend
still failing after the retries) are one line naming the URL, credentials masked, and exit 2;
the pages scored before stay scored and exported, and the cursor names the page that failed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from adapters import AgentRun
from collector.commands.already_scored import skipped_notes
from collector.commands.conversations import Sessions, is_conversation_scorer, session_units
from collector.commands.estimate import EstimatingGovernor
from collector.commands.inspect import Loaded, add_runs
from collector.commands.progress_bar import progress
from collector.commands.report import report_config_error
from collector.commands.scored_before import ScoredBefore
from collector.commands.scoring import Outcome, finish, score_batch
from collector.common.errors import ConfigError, PullError
from collector.config import Config, load_config
from collector.receive.pull import Window, client_for, open_puller, parse_source, window_between
from collector.receive.pull import cursor as cursors
from collector.receive.pull.page import read_ahead

logger = logging.getLogger(__name__)


def window_of(args: argparse.Namespace) -> Window:
    """The window ``--since`` and ``--until`` name (raises `ConfigError` for a bad time).

    Example:
        >>> window_of(argparse.Namespace(since="2026-12-01", until=None)).since.isoformat()
        '2026-12-01T00:00:00+00:00'
    """
    return window_between(getattr(args, "since", None), getattr(args, "until", None))


def start_cursor(args: argparse.Namespace, source: str, window: Window, err: Console) -> tuple[Path, cursors.Cursor]:
    """The cursor file and where to start: the saved cursor with ``--resume``, else the window's start.

    Raises:
        ConfigError: the cursor file was written by another backfill, or is not a cursor file.
    """
    path = Path(args.cursor) if getattr(args, "cursor", None) else \
        cursors.default_path(source, args.filter, args.scorers)
    fresh = cursors.Cursor(source, args.filter, tuple(args.scorers), window)
    if not getattr(args, "resume", False):
        return path, fresh
    saved = cursors.load(path)
    if saved is None:
        err.print(f"tracescore: no cursor at {path}: starting at the window's first page", markup=False,
                  highlight=False, soft_wrap=True)
        return path, fresh
    if not saved.same_backfill(fresh):
        raise ConfigError(f"--cursor {path} was written by another backfill ({saved.source}, filter "
                          f"{saved.filter!r}, scorers {', '.join(saved.scorers)})")
    return path, saved


def run_from(args: argparse.Namespace, scorers: list[Any], export_config: Config | None, session_keys: list[str],
             err: Console, governor: Any = None) -> int:
    """Score the runs of the backend ``args.source`` names; the exit code (see the module docstring).
    ``governor``: ``--estimate``'s or ``--max-usd``'s (`collector.commands.spend_cap.judge_governor`),
    one for every page; an estimate writes no cursor."""
    try:
        source = parse_source(args.source)
        config = export_config or load_config(getattr(args, "config", None))
        path, cursor = start_cursor(args, str(source), window_of(args), err)
        client = client_for(source, config.sinks)
    except ConfigError as exc:
        report_config_error(exc)
        return 2
    if cursor.done:
        err.print(f"tracescore: the backfill in {path} is complete ({cursor.traces} trace(s)); nothing to do",
                  markup=False, highlight=False, soft_wrap=True)
        return 0
    backfill = Backfill(args, scorers, export_config, session_keys, err, path, cursor, governor,
                        min_turns=config.sessions.min_turns)
    try:
        asyncio.run(backfill.run(client, source))
    except PullError as exc:
        err.print(f"tracescore: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 2
    for note in backfill.found.notes():
        err.print(note, markup=False, highlight=False, soft_wrap=True)
    err.print(f"read {backfill.traces} trace(s) from {source}: {backfill.runs} run(s)"
              + (f", {backfill.sessions} session(s)" if backfill.sessions else "")
              + (f" ({backfill.missing} listed without spans, not scored)" if backfill.missing else "")
              + "".join(f"; {note}" for note in skipped_notes(backfill.skipped, "the backend"))
              + (f"; exported {backfill.scores} score(s)" if export_config is not None else "")
              + f"; cursor {path}", markup=False, highlight=False, soft_wrap=True)
    return finish(args, scorers, backfill.outcomes, err, failed=not backfill.exported, governor=governor)


class Backfill:
    """One ``score --from`` run: pages in, scores out, the cursor after each page."""

    def __init__(self, args: argparse.Namespace, scorers: list[Any], export_config: Config | None,
                 session_keys: list[str], err: Console, path: Path, cursor: cursors.Cursor,
                 governor: Any = None, min_turns: int = 1) -> None:
        self.args, self.scorers, self.export_config = args, scorers, export_config
        self.governor, self.min_turns = governor, min_turns
        self.session_keys, self.err, self.path, self.cursor = session_keys, err, path, cursor
        self.sessions_wanted = any(is_conversation_scorer(s) for s in scorers)
        self.outcomes: list[Outcome] = []
        self.exported = True
        self.traces = self.runs = self.sessions = self.scores = self.missing = self.skipped = 0
        self.turns: list[AgentRun] = []  # with a conversation scorer: every run of a session
        self.turn_attributes: dict[tuple[str, str], Any] = {}
        self.seen = ScoredBefore()  # with a conversation scorer: the sessions' scores found so far
        self.found = Sessions()

    async def run(self, client: Any, source: Any) -> None:
        """Read, score and export every page from the cursor on, then the sessions."""
        args = self.args
        async with client:
            puller = open_puller(source, client, self.cursor.window, args.filter, getattr(args, "page_size", None))
            await puller.check()
            # With a conversation scorer, pages before the cursor are read again for their turns only.
            skip = self.cursor.pages if self.sessions_wanted else 0
            token = None if self.sessions_wanted else self.cursor.token
            with progress(self.err) as bar:
                task = bar.add_task(f"reading {source.backend}", total=None)
                index = 0
                async for page in read_ahead(puller.pages(token)):
                    loaded = add_runs(Loaded(), page.traces, self.session_keys)
                    bar.update(task, advance=len(page.traces), total=page.total)
                    if page.missing and index >= skip:
                        self.missing += page.missing
                        logger.warning("%s listed %d trace(s) whose spans it did not give: not scored",
                                       source.backend, page.missing)
                    self._keep_turns(loaded)
                    if index >= skip:
                        await self._score(loaded, [], bar)
                        if not self.exported:
                            return  # the cursor stays before this page: a resume sends its scores again
                        self.traces += len(page.traces)
                        self._save(self.cursor.advanced(page.next, len(page.traces)))
                    index += 1
                if self.sessions_wanted:
                    self.found = session_units(self.turns, self.turn_attributes, self.seen, self.min_turns)
                    self.sessions = len(self.found.units)
                    await self._score(Loaded(span_attributes=self.turn_attributes), self.found.units, bar)
                    if self.exported:
                        self._save(replace(self.cursor, done=True), final=True)

    def _keep_turns(self, loaded: Loaded) -> None:
        if not self.sessions_wanted:
            return
        self.seen.merge_sessions(loaded.scored)
        for agent_run in loaded.runs:
            if agent_run.session_id is not None:
                self.turns.append(agent_run)
                key = (agent_run.trace_id, agent_run.span_id)
                self.turn_attributes[key] = loaded.span_attributes.get(key, {})

    async def _score(self, loaded: Loaded, units: list[Any], bar: Any) -> None:
        runs = len(loaded.runs)
        batch = await score_batch(self.args, self.scorers, self.export_config, loaded, units, self.err, bar,
                                  self.governor)
        self.runs += runs
        self.skipped += batch.skipped
        self.outcomes.extend(batch.outcomes)
        self.scores += sum(1 for o in batch.outcomes if not o.not_scorable)
        # A page with runs --max-usd refused keeps the cursor before it, as an unexported page does:
        # a resume (with a higher cap) scores them; its scores already exported are not sent twice.
        self.exported = self.exported and batch.exported and not any(o.not_scored for o in batch.outcomes)

    def _save(self, cursor: cursors.Cursor, final: bool = False) -> None:
        """Write the cursor; with a conversation scorer it is done only once the sessions are scored.
        An estimate (``--estimate``) writes none: it scored nothing."""
        self.cursor = replace(cursor, done=False) if self.sessions_wanted and not final else cursor
        if not isinstance(self.governor, EstimatingGovernor):
            cursors.save(self.path, self.cursor)
