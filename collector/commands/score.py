"""``tracescore score FILE... --scorer REF...``: score the agent runs in saved OTLP files offline.

For CI and backfill. Files are read as by ``tracescore inspect`` (logs files joined to
traces; an unreadable file is reported and makes the exit code 1, the others are still
scored). Every run is scored by every scorer (``--scorer module:attr`` or
``path/to/file.py:attr``, repeatable), at most ``--concurrency`` runs at a time; a
conversation scorer (``type="conversation"``) scores instead every session the runs make
(SPEC §7; the files are complete: no idle wait), and its rows carry the ``session_id``. Scorers
receive ``input`` = the run's `ScorerRunInputForAgent`, ``output`` = its
`ScorerRunOutputForAgent`, ``request_context``, ``trace_id`` and ``span_id`` — whatever
their ``type``: a scorer without ``type="agent"`` gets the same models as they are.

Output: ``--format table``, the default on a terminal or not (a CI log wants the summary
and the failures, not every run's messages), prints on stdout a table of the scores (each
with its reason or error) and the per-scorer summary (runs, scored, not scorable, failed,
mean, p50, min: `collector.commands.gate`). ``--format jsonl`` prints one row per (run,
scorer) on stdout (SPEC §3 row format, with the run's input and output; ``score`` null and
``reason`` "not scorable: ..." when a step returned ``not_scorable``; ``error`` set when the
scorer failed) and the summary on stderr, so stdout stays pure JSONL. With ``-v`` a line is
logged per score (scorer, trace id, score, duration). When a scorer has a prompt step, the
judge client (litellm, seconds to import) is loaded before scoring starts, so no score's
duration includes its import. FILE may be a directory or a glob pattern. A scorer ref may
name a zero-argument factory (``scorers.builtin:completeness``). Exit codes: 0 done; 1 a
file could not be read, the gate failed (``--fail-under``, ``--max-failures``, or every
score failed), ``--export`` could not send every score in time or ``--max-usd`` left runs
unscored; 2 a scorer ref or the ``--config`` could not be loaded, ``--fail-under`` names no
given scorer, or ``--max-usd`` meets a judge model with no known price.

``--export [--config FILE]`` also sends every score to the configured export endpoint and
native sinks, exactly as the daemon would (`collector.commands.backfill`): scoring a day
of traces again is safe.

What the traces read show scored already gets no row and no judge call, and is counted on
stderr (`collector.commands.already_scored`; ``--rescore`` scores it again); sessions keep the
daemon's service, ids and revision (`collector.commands.conversations`).

``--from URL`` reads the runs from Phoenix, MLflow or Langfuse instead of FILEs
(`collector.commands.score_from`): each page of traces pulled is one batch through
`collector.commands.scoring.score_batch`, as the files are, and the summary and gate cover
every batch.

Judge spend (SPEC §8): every scorer run goes through a judge governor
(`scorers._judge_governor.govern_judge_calls`), whatever the runs came from. ``--estimate``
runs every scorer with each judge request answered by a made-up reply, sends nothing,
prints no score and exports nothing: it prints per scorer (and in total) the judge calls,
prompt and output tokens and USD, and the worst case (`collector.commands.estimate`;
``--format jsonl``: a JSON row per scorer on stdout); exit 0 (1 when a file could not be
read). ``--max-usd N`` stops before spending N USD (`collector.commands.spend_cap`): a run
whose judge call was refused is reported "not scored: --max-usd reached" (not as a failure),
is not exported, and the exit code is 1; a judge model litellm has no price for is refused
before any call (exit 2) unless ``--allow-unpriced``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from collector.commands.already_scored import skipped_notes
from collector.commands.backfill import load_export_config
from collector.commands.conversations import file_sessions
from collector.commands.inspect import load_runs
from collector.commands.report import report_config_error
from collector.commands.scoring import finish, score_batch
from collector.commands.spend_cap import SpendCap, judge_governor, unpriced_message, unpriced_models
from collector.common.errors import ConfigError
from collector.config import Config
from collector.config.instructions import read_instructions
from collector.work.scorer_ref import resolve_scorer

__all__ = ["load_scorers", "run"]


def load_scorers(refs: Sequence[str]) -> list[Any]:
    """Import each scorer ref (a scorer, or a zero-argument factory of one).

    Raises:
        ConfigError: a ref cannot be imported, does not name a scorer, or repeats a scorer id.

    Example:
        >>> [s.id for s in load_scorers(["scorers.builtin:completeness"])]
        ['completeness']
        >>> load_scorers(["collections:nope"])
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: scorer ref 'collections:nope': module has no attribute 'nope'; it defines no scorer object (a factory that returns one is named the same way: module:factory)
    """
    scorers = []
    seen: dict[str, str] = {}
    for ref in refs:
        obj = resolve_scorer(ref)
        if str(obj.id) in seen:  # rows and the summary are keyed by scorer id
            raise ConfigError(f"scorer ref {ref!r}: scorer id {obj.id!r} is already given by {seen[str(obj.id)]!r}")
        seen[str(obj.id)] = ref
        scorers.append(obj)
    return scorers


def adopt_instructions(scorers: Sequence[Any], refs: Sequence[str], config: Config | None) -> list[Any]:
    """The scorers, each with the instructions its ``[[scorers]]`` entry of ``--config`` adopts
    (``instructions_file``, as the daemon applies it: `tracescore align`'s output), matched by ref.

    Raises:
        ConfigError: the file is missing or holds no instructions.

    Example:
        >>> import os, tempfile
        >>> from collector.config import config_from_dict
        >>> from scorers import Judge, create_scorer
        >>> judged = create_scorer(id="tone", description="d", judge=Judge("openai/gpt-4o-mini", "Judge it.")
        ...     ).generate_score(description="s", create_prompt=lambda run: "?")
        >>> path = os.path.join(tempfile.mkdtemp(), "tone.toml")
        >>> _ = open(path, "w").write('instructions = "Politeness decides."')
        >>> config = config_from_dict({"scorers": [{"ref": "my:tone", "instructions_file": path}]}, env={})
        >>> [j.instructions for s in adopt_instructions([judged], ["my:tone"], config) for j in s.get_judges()]
        ['Politeness decides.']
        >>> adopt_instructions([judged], ["other:tone"], config)[0] is judged  # not that entry's ref
        True
    """
    files = {c.ref: c.instructions_file for c in (config.scorers if config is not None else ()) if c.instructions_file}
    return [scorer.with_instructions(read_instructions(files[ref], f"instructions_file of [[scorers]] ref {ref!r}"))
            if ref in files else scorer for scorer, ref in zip(scorers, refs, strict=True)]


def run(args: argparse.Namespace) -> int:
    """Score the runs in ``args.files`` (or, with ``--from``, in a backend:
    `collector.commands.score_from`) with ``args.scorers``; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(files=["/nonexistent.pb"], scorers=["collections:nope"],
        ...                        format="jsonl", concurrency=2))
        2
    """
    err = Console(stderr=True)
    try:
        export_config = load_export_config(args)  # before scoring: a bad config costs no judge call
        scorers = adopt_instructions(load_scorers(args.scorers), args.scorers, export_config)
    except ConfigError as exc:
        report_config_error(exc)
        return 2
    fail_under = dict(getattr(args, "fail_under", None) or [])
    unknown = sorted(set(fail_under) - {str(scorer.id) for scorer in scorers})
    if unknown:
        err.print(f"tracescore: --fail-under names no given scorer: {', '.join(unknown)}", markup=False,
                  highlight=False, soft_wrap=True)
        return 2
    governor = judge_governor(args)
    if isinstance(governor, SpendCap) and not governor.allow_unpriced:
        unpriced = asyncio.run(unpriced_models(scorers))
        if unpriced:  # before any call: its spend could not be counted
            err.print(unpriced_message(unpriced), markup=False, highlight=False, soft_wrap=True)
            return 2
    session_keys = [*(getattr(args, "session_key", None) or ()),
                    *(export_config.sessions.extra_keys if export_config is not None else ())]
    if bool(getattr(args, "source", None)) == bool(args.files):
        err.print("tracescore: score takes FILE... or --from URL" + (", not both" if args.files else ""),
                  markup=False, highlight=False)
        return 2
    if getattr(args, "source", None):
        from collector.commands.score_from import run_from  # the backends' readers, only when asked

        return run_from(args, scorers, export_config, session_keys, err, governor)
    loaded = load_runs(args.files, err, session_keys)
    sessions = file_sessions(loaded, scorers, export_config.sessions.min_turns if export_config is not None else 1)
    batch = asyncio.run(score_batch(args, scorers, export_config, loaded, sessions.units, err, governor=governor))
    notes = ["tracescore: no agent runs found in the files given"] if not loaded.runs else []
    notes += [*sessions.notes(), *skipped_notes(batch.skipped, "the files")]
    if loaded.failed_files:
        notes.append(f"{len(loaded.failed_files)} file(s) could not be read")
    for note in notes:
        err.print(note, markup=False, highlight=False, soft_wrap=True)
    return finish(args, scorers, batch.outcomes, err, failed=bool(loaded.failed_files) or not batch.exported,
                  governor=governor)
