"""``tracescore score FILES... --export``: send offline scores where the daemon would send them.

Backfill reuses the daemon's parts end to end, so what arrives is what the daemon would
have sent: records are built by `collector.work.record.score_record` (the same evaluation
span id, run id, resource and anchored time), settled into a store's outbox and sink
outboxes like a worker's results (a temporary SQLite store), then drained by the daemon's
`ScoreExporter` and sink senders. Idempotency comes from the backends' keys (the span id
and each sink's id derive from the score's key): running a backfill twice updates, never
duplicates. What is not sent within ``--export-timeout`` is reported and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from collector.assemble.decide import run_record
from collector.commands.label_store import open_label_store_made
from collector.common.metrics import Metrics
from collector.common.types import Dead, Done, RunRecord, ScoreJob, ScoreRecord, Settlement
from collector.config import Config, ScorerConfig, load_config
from collector.export.scores import ScoreExporter
from collector.export.sinks import make_senders
from collector.store.sqlite.store import SqliteStore
from collector.work.keeper import kept_score
from collector.work.record import score_record
from collector.work.registry import RegisteredScorer


def load_export_config(args: argparse.Namespace) -> Config | None:
    """The configuration to export with (None without ``--export``).

    Raises:
        collector.common.errors.ConfigError: the file is missing or invalid, or a sink's secret unset.

    Example:
        >>> load_export_config(argparse.Namespace(export=False, config=None)) is None
        True
    """
    if not getattr(args, "export", False):
        return None
    return load_config(getattr(args, "config", None))


def build_records(config: Config, loaded: Any, scorers: Sequence[Any], refs: Sequence[str],
                  outcomes: Sequence[Any], conversations: Mapping[int, RunRecord] | None = None) -> list[ScoreRecord]:
    """The outbox record of each outcome, as the daemon's worker would have made it (none for a
    run that was not scorable). A scorer whose ref is also in the config's ``[[scorers]]``
    takes its labels from there. ``conversations``: the conversation job's record of each
    session's unit in ``loaded.runs`` (its score is the session's, SPEC §7).

    Example:
        >>> build_records(Config(), None, [], [], [])
        []
    """
    configured = {c.ref: c for c in config.scorers}
    entries = {str(s.id): RegisteredScorer(s, configured.get(ref) or ScorerConfig(ref=ref))
               for s, ref in zip(scorers, refs, strict=True)}
    records = []
    for outcome in outcomes:
        if outcome.not_scorable:
            continue
        agent_run = loaded.runs[outcome.run_index]
        entry = entries[outcome.scorer_id]
        attributes = loaded.span_attributes.get((agent_run.trace_id, agent_run.span_id), {})
        record = (conversations or {}).get(outcome.run_index) or run_record(agent_run, attributes)
        job = ScoreJob(record, entry.scorer_id, entry.version)
        records.append(score_record(job, entry, outcome.result, outcome.start_ns,
                                    max_chars=config.export.max_attribute_chars, error=outcome.exception,
                                    end_ns=outcome.end_ns))
    return records


async def export_outcomes(config: Config, args: argparse.Namespace, loaded: Any, scorers: Sequence[Any],
                          outcomes: Sequence[Any], err: Console,
                          conversations: Mapping[int, RunRecord] | None = None, report: bool = True) -> bool:
    """Send the scores; True when every one reached the endpoint and every sink in time
    (``report``: say where they went; a backfill from a backend says it once, at its end)."""
    records = build_records(config, loaded, scorers, args.scorers, outcomes, conversations)
    with tempfile.TemporaryDirectory(prefix="tracescore-backfill-") as folder:
        left = await _send(config, records, str(Path(folder) / "outbox.db"), args.export_timeout)
    if getattr(args, "config", None):  # the deployment's store; a backfill without one keeps nothing
        await keep_for_agreement(config, records)
    target = config.export.endpoint or "no export endpoint"
    sinks = config.sinks.enabled()
    if report:
        err.print(f"exported {len(records)} score(s) to {target}" + (f" and {', '.join(sinks)}" if sinks else ""),
                  markup=False, highlight=False, soft_wrap=True)
    for where, count in left.items():
        err.print(f"tracescore: {count} score(s) not sent to {where} within {args.export_timeout:g}s",
                  markup=False, highlight=False, soft_wrap=True)
    return not left


async def keep_for_agreement(config: Config, records: Sequence[ScoreRecord]) -> None:
    """Keep the scores in the deployment's store for judge agreement (SPEC §11), as the daemon's
    workers do: a backfilled score meets the labels people give its run like a live one."""
    kept = [k for k in map(kept_score, records) if k is not None]
    if not kept or not config.labels.keep_scores:
        return
    store = await open_label_store_made(config)
    try:
        await store.keep_scores(kept, max_per_scorer=config.labels.keep_scores, retain_s=config.labels.retain_s)
    finally:
        await store.close()


async def _send(config: Config, records: list[ScoreRecord], path: str, timeout: float) -> dict[str, int]:  # noqa: ASYNC109
    """Settle the records into a fresh store and drain it with the daemon's exporter and sinks;
    returns what is left per destination."""
    store = SqliteStore(path, sinks=config.sinks.enabled())
    metrics = Metrics()
    await store.start()
    exporter = ScoreExporter(store, config.export, metrics, poll_s=0.05)
    senders = make_senders(config.sinks, store.sink_outbox, metrics)
    try:
        await _settle(store, records)
        await exporter.start()
        for sender in senders:
            await sender.start()
        await _wait_drained(store, [s.name for s in senders], timeout)
        for sender in senders:
            await sender.shutdown(1.0)
        await exporter.shutdown(1.0)
        return {where: n for where, n in (await _left(store, [s.name for s in senders])).items() if n}
    finally:
        await store.shutdown()


async def _settle(store: SqliteStore, records: list[ScoreRecord]) -> None:
    """Put each record in the outboxes the way a worker settles a job (same transaction)."""
    by_key = {r.key: r for r in records}
    for i in range(0, len(records), 256):
        chunk = records[i:i + 256]
        await store.put([ScoreJob(_keyed_run(r), r.scorer_id, r.scorer_version) for r in chunk])
        for leased in await store.take(len(chunk)):
            record = by_key[leased.job.key]
            outcome: Settlement = Dead(record.error_type, record.error_message or "", record) \
                if record.error_type else Done(record)
            await store.settle(leased, outcome)


def _keyed_run(record: ScoreRecord) -> RunRecord:
    """A run whose job has the record's key (a session's score: its scope and revision)."""
    session = record.session
    conversation = None if session is None else {"scope": session["scope"], "revision": session["revision"],
                                                 "first_trace_id": session["first_trace_id"]}
    return RunRecord(record.trace_id, record.span_id, conversation=conversation)


async def _left(store: SqliteStore, sinks: list[str]) -> dict[str, int]:
    left = {"the export endpoint": (await store.stats()).outbox}
    for sink in sinks:
        left[f"the {sink} sink"] = await store.sink_outbox(sink).backlog()
    return left


async def _wait_drained(store: SqliteStore, sinks: list[str], timeout: float) -> None:  # noqa: ASYNC109
    """Wait until every outbox is empty, or the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any((await _left(store, sinks)).values()):
            return
        await asyncio.sleep(0.05)
