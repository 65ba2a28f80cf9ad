"""Deciding a trace: its buffered chunks -> the adapters' agent runs -> one `ScoreJob` per
run and admitted scorer.

The scorers come through `ScorerSelection` (the daemon passes its
`collector.work.registry.ScorerRegistry`): assembly only asks which scorers admit a run
(filter, then sampling on the trace id) and counts every other decision per scorer.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, Protocol

from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from collector.common.handoff import Once
from collector.common.metrics import Metrics
from collector.common.session_types import (
    MAX_KEY_CHARS,
    SessionTurn,
    key_is_storable,
    session_scope,
)
from collector.common.types import RunRecord, ScoreJob, TraceChunk
from collector.config import SessionsConfig

logger = logging.getLogger(__name__)


class ScorerChoice(Protocol):
    """One registered scorer, as assembly names it in a job."""

    @property
    def scorer_id(self) -> str:
        """The scorer's id."""
        ...

    @property
    def version(self) -> str | None:
        """The scorer's version (part of the job's idempotency key)."""
        ...


class ScorerSelection(Protocol):
    """Which registered scorers take a run."""

    @property
    def entries(self) -> Sequence[ScorerChoice]:
        """Every registered scorer."""
        ...

    def decisions(
        self, *, trace_id: str, service: str, agent: str | None, span_name: str,
        attributes: Mapping[str, Any],
    ) -> Sequence[tuple[ScorerChoice, str]]:
        """Each scorer with ``admitted``, ``filtered_out`` or ``sampled_out`` for one run."""
        ...


def run_record(run: Any, attributes: Mapping[str, Any], *, with_models: bool = True) -> RunRecord:
    """The queued form of an adapters ``AgentRun`` whose run span has ``attributes`` (the
    daemon's jobs and ``tracescore score --export`` build their records alike). With
    ``with_models`` the record hands the run itself to the first worker of this process that
    scores it (`RunRecord.typed`): that worker reads the run's models instead of validating
    the JSON form again.

    Example:
        >>> from adapters import AgentRun
        >>> from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
        >>> run = AgentRun("ab" * 16, "cd" * 8, "invoke_agent bot", "svc", "genai", 0, 5,
        ...                ScorerRunInputForAgent(), ScorerRunOutputForAgent([]), resource={"service.name": "svc"})
        >>> rec = run_record(run, {"gen_ai.agent.name": "bot"})
        >>> (rec.agent, rec.end_ns, rec.resource)
        ('bot', 5, {'service.name': 'svc'})
    """
    ctx = dict(run.request_context or {})
    run_input, run_output = run.json_form()  # made from the run's messages: its models are made only if read
    agent = ctx.get("agent_name") or attributes.get("gen_ai.agent.name")
    response_id = ctx.get("response_id") or attributes.get("gen_ai.response.id")
    return RunRecord(
        trace_id=run.trace_id, span_id=run.span_id, span_name=run.span_name,
        service=run.service, convention=run.convention, start_ns=run.start_ns,
        end_ns=run.end_ns, input=run_input, output=run_output, request_context=ctx,
        response_id=str(response_id) if response_id else None,
        agent=str(agent) if agent else None,
        resource=dict(getattr(run, "resource", None) or {}),
        session_id=getattr(run, "session_id", None),
        typed=Once(run) if with_models else None,  # a worker of this process takes its models from the run
    )


def trace_incomplete(spans: Sequence[Any], by_id: Mapping[str, Any]) -> bool:
    """Whether a trace lacks a span that one of its spans names as its parent in the same
    process (OTLP span flags say so): its root, or a span between, never arrived. A parent the
    flags call remote (another service's), or do not describe, is not counted missing.

    Example:
        >>> from adapters import TraceSpan
        >>> orphan = TraceSpan("a" * 32, "2" * 16, "1" * 16, "agent", parent_is_remote=False)
        >>> called = TraceSpan("a" * 32, "3" * 16, "9" * 16, "agent", parent_is_remote=True)
        >>> trace_incomplete([orphan], {orphan.span_id: orphan}), trace_incomplete([called], {called.span_id: called})
        (True, False)
    """
    return any(s.parent_span_id is not None and s.parent_span_id not in by_id and s.parent_is_remote is False
               for s in spans)


def _is_true(value: Any) -> bool:
    """Whether an end-marker attribute's value says true (a bool, or the text ``true``)."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


class Decided(NamedTuple):
    """What deciding one trace gave: its score jobs, and its runs that are turns of a session
    (noted only when conversation scorers are registered)."""

    jobs: list[ScoreJob]
    turns: list[SessionTurn]


class RunDecider:
    """Turns a decided trace into score jobs (called on the assembler's own thread).

    Args:
        adapters: the `adapters` module (or any object with ``spans_from_resource_spans``,
            ``logs_from_resource_logs``, ``AssembledTrace`` and ``extract_runs``).
        selection: the registered scorers.
        metrics: the service's instruments (runs found and skipped, decisions per scorer).
        sessions: the ``[sessions]`` settings: the extra attributes naming a session and the
            end marker; None (or no conversation scorer registered) notes no turns.
    """

    def __init__(self, adapters: Any, selection: ScorerSelection, metrics: Metrics,
                 sessions: SessionsConfig | None = None) -> None:
        self._adapters = adapters
        self._registry = selection
        self._metrics = metrics
        self._track_sessions = sessions is not None and bool(getattr(selection, "has_conversation_scorers", False))
        self._extra_keys = tuple(sessions.extra_keys) if sessions is not None else ()
        self._end_attribute = sessions.end_attribute if sessions is not None else "tracescore.session.end"
        self._logged_keys: set[str] = set()

    def _note_unstorable(self, session_id: str, scope: str) -> None:
        """Log once per session (of the last 1,000) a key stored hashed: too long or not printable ASCII."""
        if key_is_storable(session_id) or scope in self._logged_keys:
            return
        if len(self._logged_keys) >= 1000:
            self._logged_keys.clear()
        self._logged_keys.add(scope)
        logger.warning("session key %r... (%d characters) is over %d characters or not printable ASCII: stored as %s "
                       "(destinations get it as the spans carry it; Langfuse drops such ids, so its score goes on "
                       "the session's last trace)", session_id[:40], len(session_id), MAX_KEY_CHARS, scope)

    def jobs_for(self, trace_id: bytes, chunks: list[TraceChunk]) -> list[ScoreJob]:
        """The score jobs of one buffered trace; a trace that fails to decode or extract
        is counted (``runs_skipped{reason="trace_error"}``) and yields none.

        Example:
            >>> import adapters
            >>> from collector.common.metrics import Metrics
            >>> class NoScorers:
            ...     entries = ()
            ...     def decisions(self, **run):
            ...         return ()
            >>> metrics = Metrics()
            >>> broken = TraceChunk(b"\\x01" * 16, "spans", b"not protobuf", 1, True)
            >>> RunDecider(adapters, NoScorers(), metrics).jobs_for(b"\\x01" * 16, [broken])
            []
            >>> metrics.registry.get_sample_value("tracescore_runs_skipped_total", {"reason": "trace_error"})
            1.0
        """
        return self.decide(trace_id, chunks).jobs

    @property
    def reading(self) -> ReadSettings:
        """What reading a trace needs besides its chunks (handed to a decision process as is)."""
        return ReadSettings(self._extra_keys, self._end_attribute, self._track_sessions)

    def decide(self, trace_id: bytes, chunks: list[TraceChunk]) -> Decided:
        """The score jobs of one buffered trace and the session turns it holds (`jobs_for`)."""
        return self.decide_read(trace_id, read_trace(self._adapters, trace_id, chunks, self.reading))

    def decide_read(self, trace_id: bytes, reading: TraceReading) -> Decided:
        """The score jobs and session turns of a trace the adapters read (here, or in a decision
        process: `read_trace`); a trace that could not be read is counted and yields none."""
        error = reading.error
        if error is None:
            try:
                return self._decide(reading)
            except Exception:
                error = traceback.format_exc()
        # A trace that cannot be decided must not block the others.
        self._metrics.errors.labels(component="assembly").inc()
        self._metrics.runs_skipped.labels(reason="trace_error").inc()
        logger.error("deciding trace %s failed; it is skipped\n%s", trace_id.hex(), error)
        return Decided([], [])

    def _decide(self, reading: TraceReading) -> Decided:
        """Count what the adapters skipped, note session turns and match scorers to each run."""
        for reason in reading.skipped:
            self._metrics.runs_skipped.labels(reason=reason).inc()
        if reading.skipped:  # also per scorer (SPEC: every decision is counted per scorer)
            for entry in self._registry.entries:
                self._metrics.decisions.labels(scorer=entry.scorer_id, reason="skipped").inc(len(reading.skipped))
        jobs, turns = [], []
        for record, attributes in reading.runs:
            self._metrics.child(self._metrics.runs_found, record.convention or "unknown").inc()
            if self._track_sessions and (session_id := record.session_id) is not None:
                ended = reading.ended or _is_true(attributes.get(self._end_attribute))
                scope = session_scope(record.service, session_id)
                self._note_unstorable(session_id, scope)
                # A turn whose trace never completed: its conversation will be scored partial.
                turns.append(SessionTurn(scope, session_id,
                                         replace(record, incomplete=True) if reading.incomplete else record, ended))
            for entry, decision in self._registry.decisions(
                trace_id=record.trace_id, service=record.service, agent=record.agent,
                span_name=record.span_name, attributes=attributes,
            ):
                if decision == "admitted":
                    jobs.append(ScoreJob(record, entry.scorer_id, entry.version))
                else:
                    self._metrics.decisions.labels(scorer=entry.scorer_id, reason=decision).inc()
        return Decided(jobs, turns)


class ReadSettings(NamedTuple):
    """What reading a trace needs besides its chunks: extra session keys, the end marker, and
    whether sessions are tracked at all."""

    extra_keys: tuple[str, ...] = ()
    end_attribute: str = "tracescore.session.end"
    track_sessions: bool = False
    with_models: bool = True  # each run's record carries the adapters' models (not across processes)


class TraceReading(NamedTuple):
    """What the adapters read of one trace: each run's queued form (`run_record`) with its
    span's attributes, the reasons of what they skipped, whether the trace lacks an in-process
    parent (``incomplete``) and whether a root span carries the session end marker (``ended``);
    or why it could not be read (``error``, a traceback). Plain data: a decision process sends
    it back pickled (its records without the models: dicts and text unpickle fastest)."""

    runs: list[tuple[RunRecord, dict[str, Any]]]
    skipped: list[str]
    incomplete: bool = False
    ended: bool = False
    error: str | None = None


def read_trace(adapters: Any, trace_id: bytes, chunks: list[TraceChunk], settings: ReadSettings) -> TraceReading:
    """Decode a trace's chunks and extract its runs (on the assembler's thread or in a decision
    process); never raises: a trace that fails is a reading with ``error``.

    Example:
        >>> import adapters
        >>> broken = TraceChunk(b"\\x01" * 16, "spans", b"not protobuf", 1, True)
        >>> reading = read_trace(adapters, b"\\x01" * 16, [broken], ReadSettings())
        >>> reading.runs, "DecodeError" in reading.error
        ([], True)
    """
    try:
        return _read(adapters, trace_id, chunks, settings)
    except Exception:
        return TraceReading([], [], error=traceback.format_exc())


def _read(ad: Any, trace_id: bytes, chunks: list[TraceChunk], settings: ReadSettings) -> TraceReading:
    """`read_trace`'s work: parse the chunks, let the adapters find the runs, make their records."""
    resource_spans: list[Any] = []
    resource_logs: list[Any] = []
    for chunk in chunks:
        if chunk.signal == "spans":
            traces = TracesData()
            traces.ParseFromString(chunk.data)
            resource_spans.extend(traces.resource_spans)
        else:
            logs = LogsData()
            logs.ParseFromString(chunk.data)
            resource_logs.extend(logs.resource_logs)
    spans = ad.spans_from_resource_spans(resource_spans)
    if not spans:
        return TraceReading([], [])
    logs_list = ad.logs_from_resource_logs(resource_logs)
    trace = ad.AssembledTrace(trace_id=trace_id.hex(), spans=tuple(spans), logs=tuple(logs_list))
    extraction = ad.extract_runs(trace, settings.extra_keys) if settings.extra_keys else ad.extract_runs(trace)
    by_id = {s.span_id: s for s in spans}
    track = settings.track_sessions
    incomplete = track and trace_incomplete(spans, by_id)
    ended = track and any(s.parent_span_id is None and _is_true(s.attributes.get(settings.end_attribute))
                          for s in spans)
    runs = []
    for run in extraction.runs:
        attributes = dict(span.attributes) if (span := by_id.get(run.span_id)) is not None else {}
        record = run_record(run, attributes, with_models=settings.with_models)
        _ = record.run_id  # made here (a hash), off the workers' loop; kept on the record, pickled with it
        runs.append((record, attributes))
    return TraceReading(runs, [skip.reason for skip in extraction.skipped], incomplete, ended)
