"""The data that flows between the daemon's stages: every stage imports it, it imports none.

receive -> assemble: `Accepted` (how much of a request was taken). assemble -> store:
`TraceChunk` (the part of one request that belongs to one trace) or a whole request with
its `SummaryEntry` list, and back `AppendResult` (what the bounds cost). assemble -> work,
through the store's queue: `ScoreJob` of a `RunRecord`, taken as a `LeasedJob` and settled
with a `Settlement` (`Done`, `Retry`, `Dead`). work -> export, through the outbox:
`ScoreRecord`, read back as `OutboxItem`. `StoreStats` are the store's gauges. A `ScoreJob`'s `key` (trace id, span id, scorer id, scorer version) is the idempotency key
of the score: a key that was completed or dead-lettered is never queued again. Everything
here is plain data serialisable as JSON (dead letters and outbox rows are JSON, never
pickles), so every store backend keeps the same records."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from collector.common.handoff import Once
from collector.common.ids import failure_span_of, run_id_for
from collector.common.judge_types import Park
from collector.common.record_json import dumps, fast_init, known_fields, loads, record_dict

CANDIDATE = 1
"""Summary flag: the trace holds a span that may be a run or LLM span."""

ROOT = 2
"""Summary flag: the trace holds a span without a parent (a trace's root usually ends, and is exported, last)."""

SummaryEntry = tuple[bytes, int, int]
"""One trace of a request, as the trace buffer indexes it: trace id, span count, flags."""


@dataclass(frozen=True)
class TraceChunk:
    """The part of one OTLP request that belongs to one trace, serialised.

    ``data`` is a ``TracesData`` (signal ``spans``) or ``LogsData`` (signal ``logs``) protobuf holding
    only that trace's spans or log records, with their resource and scope. ``has_run_candidate``: a
    span may be a run or LLM span; ``has_root``: a span without a parent (a root usually ends last).
    """

    trace_id: bytes
    signal: Literal["spans", "logs"] | str
    data: bytes
    span_count: int
    has_run_candidate: bool
    has_root: bool = False


@dataclass(frozen=True)
class AppendResult:
    """What a buffer append had to give up to stay within its bounds."""

    evicted_traces: int = 0
    dropped_spans: int = 0


@dataclass(frozen=True)
class Accepted:
    """How much of a request was taken: items accepted and rejected (OTLP partial success)."""

    accepted: int
    rejected: int = 0
    message: str = ""


@fast_init
@dataclass(frozen=True)
class RunRecord:
    """An agent run as queued: ids, where it came from, and its agent-typed input and output.

    Example:
        >>> r = RunRecord(trace_id="ab" * 16, span_id="cd" * 8, span_name="invoke_agent a")
        >>> RunRecord.from_json(r.to_json()) == r
        True
    """

    trace_id: str
    span_id: str
    span_name: str = ""
    service: str = ""
    convention: str = ""
    start_ns: int = 0
    end_ns: int = 0
    input: dict[str, Any] = field(default_factory=dict)
    output: list[Any] = field(default_factory=list)
    request_context: dict[str, Any] = field(default_factory=dict)
    response_id: str | None = None
    agent: str | None = None
    resource: dict[str, Any] = field(default_factory=dict)  # the scored span's resource attributes
    forward_mark: int = 0  # the forward log's head when the run was decided (0: not forwarding)
    session_id: str | None = None  # the conversation it is a turn of, as the spans name it (SPEC §7)
    conversation: dict[str, Any] | None = None  # a conversation job's session (`session_types.conversation_of`)
    incomplete: bool = False  # its trace was decided without a span its spans name as their in-process parent
    typed: Once | None = field(default=None, compare=False, repr=False, metadata={"transient": True})  # the run with its models, not JSON

    @functools.cached_property
    def run_id(self) -> str:
        """The agent run's id: the same for every scorer of this run (see `run_id_for`).

        Example:
            >>> RunRecord(trace_id="ab" * 16, span_id="cd" * 8).run_id
            'f6f8e910-a4f9-578e-90be-7950dfd19071'
        """
        return run_id_for(self.trace_id, self.span_id)

    def to_json(self) -> str:
        """Serialise to a JSON string.

        Example:
            >>> RunRecord(trace_id="a", span_id="b").to_json()[:14]
            '{"trace_id":"a'
        """
        return dumps(record_dict(self))

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        """Parse `to_json` output.

        Example:
            >>> RunRecord.from_json('{"trace_id": "a", "span_id": "b"}').span_id
            'b'
        """
        return cls(**known_fields(cls, loads(text)))

    def __hash__(self) -> int:
        return hash((self.trace_id, self.span_id))


@dataclass(frozen=True)
class ScoreJob:
    """One run to score with one scorer.

    Example:
        >>> job = ScoreJob(RunRecord(trace_id="t", span_id="s"), scorer_id="q", scorer_version="1")
        >>> job.key
        't/s/q/1'
    """

    run: RunRecord
    scorer_id: str
    scorer_version: str | None = None
    supersedes: str | None = None  # the evaluation span id of the outcome this job replaces (a replay)

    @property
    def key(self) -> str:
        """The idempotency key: trace id, span id, scorer id, scorer version; for a conversation
        job, ``session``, the session's scope, revision and first turn's trace (a key reused
        for a new conversation, after the old one was forgotten, is another), scorer id, version.

        Example:
            >>> ScoreJob(RunRecord(trace_id="t", span_id="s"), "q").key
            't/s/q/'
            >>> c = {"scope": "bot/c1", "revision": 2, "first_trace_id": "ab" * 16}
            >>> ScoreJob(RunRecord("t", "s", conversation=c), "q", "1").key
            'session/bot/c1/2/abababababababababababababababab/q/1'
        """
        scorer = f"{self.scorer_id}/{self.scorer_version or ''}"
        if (c := self.run.conversation) is not None:
            return f"session/{c['scope']}/{c['revision']}/{c.get('first_trace_id', '')}/{scorer}"
        return f"{self.run.trace_id}/{self.run.span_id}/{scorer}"


@dataclass(frozen=True)
class LeasedJob:
    """A job taken from the queue, valid until its lease runs out.

    Example:
        >>> LeasedJob(ScoreJob(RunRecord("t", "s"), "q"), job_id=1, lease="x", attempt=1).attempt
        1
    """

    job: ScoreJob
    job_id: int
    lease: str
    attempt: int
    parked_since: float | None = None  # when a `Park` first handed it back (epoch s), until settled otherwise


@fast_init
@dataclass(frozen=True)
class ScoreRecord:
    """A score (or a scorer failure) ready for export: one row of the outbox.

    Example:
        >>> rec = ScoreRecord(key="k", trace_id="ab" * 16, span_id="cd" * 8, score_span_id="ef" * 8,
        ...     scorer_id="q", scorer_name="q", score=0.5)
        >>> ScoreRecord.from_json(rec.to_json()) == rec
        True
    """

    key: str
    trace_id: str
    span_id: str
    score_span_id: str
    scorer_id: str
    scorer_name: str
    scorer_version: str | None = None
    run_id: str = ""
    score: float | None = None
    reason: str | None = None
    label: str | None = None
    response_id: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    judge_models: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    judge_attempts: int = 0
    preprocess_json: str | None = None
    analyze_json: str | None = None
    service: str = ""
    resource: dict[str, Any] = field(default_factory=dict)  # the scored span's resource attributes
    scored_end_ns: int = 0  # when the scored span ended (0: unknown, records queued before it was kept)
    llm_judged: bool = False  # the scorer has prompt (LLM judge) steps
    forward_mark: int = 0  # exported once the forward log was sent through this position (0: at once)
    supersedes: str | None = None  # the evaluation span id of the outcome this one replaces
    session: dict[str, Any] | None = None  # a conversation score: `session_types.SessionScore.to_dict`
    judge_revision: str = ""  # the scorer's judge revision (SPEC §11: agreement series), "" without a judge

    def to_json(self) -> str:
        """Serialise to a JSON string.

        Example:
            >>> '"scorer_id":"q"' in ScoreRecord("k", "t", "s", "x", "q", "q").to_json()
            True
        """
        return dumps(record_dict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> ScoreRecord:
        """Parse `to_json` output.

        Example:
            >>> ScoreRecord.from_json(ScoreRecord("k", "t", "s", "x", "q", "q").to_json()).key
            'k'
        """
        return cls(**known_fields(cls, loads(text)))

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True)
class OutboxItem:
    """One outbox row: a record waiting for export.
    """

    item_id: int
    record: ScoreRecord
    attempts: int
    waiting_since: float | None = None  # sinks: when the backend first did not know the span yet


@dataclass(frozen=True)
class Done:
    """Settle a job as finished; ``record`` (when not None) goes to the outbox atomically.
    """

    record: ScoreRecord | None
    shown: str | None = None  # what a few-shot scorer's judge was shown: kept for examples, never exported


@dataclass(frozen=True)
class Retry:
    """Hand a job back to be tried again after ``delay_s`` (a transient failure).
    """

    delay_s: float
    error: str


@dataclass(frozen=True)
class Dead:
    """Move a job to the dead-letter table; ``record`` (a failure span) goes to the outbox.

    ``traceback`` (the failure's full traceback) and ``partial_json`` (the scorer's partial
    result as JSON) are kept in the dead letter.

    Example:
        >>> Dead("ScorerRunError", "Scorer Run Failed: boom", None).error_type
        'ScorerRunError'
    """

    error_type: str
    message: str
    record: ScoreRecord | None
    traceback: str = ""
    partial_json: str | None = None


Settlement = Done | Retry | Dead | Park


@dataclass(frozen=True)
class StoreStats:
    """Counts for the metrics gauges.
    """

    queued: int
    in_flight: int
    dead: int
    outbox: int
    traces: int
    forward_requests: int = 0  # received requests not forwarded yet
    forward_bytes: int = 0  # their bytes


def dead_letter_error(job: ScoreJob, outcome: Dead) -> str:
    """The JSON a store keeps as a dead letter's error: type, message, the traceback, the
    scorer's partial result, the job's scorer (a replay re-queues the same job), its failure span.

    Example:
        >>> error = dead_letter_error(ScoreJob(RunRecord("t", "s"), "q", "1"), Dead("ValueError", "bad", None))
        >>> json.loads(error)["scorer_id"], json.loads(error)["evaluation_span_id"]
        ('q', None)
    """
    return json.dumps({
        "type": outcome.error_type, "message": outcome.message, "traceback": outcome.traceback,
        "partial": outcome.partial_json, "scorer_id": job.scorer_id, "scorer_version": job.scorer_version,
        "evaluation_span_id": None if outcome.record is None else outcome.record.score_span_id,
    })


@dataclass(frozen=True)
class DeadLetter:
    """A dead-lettered job as a store lists it: what failed, why, and what the scorer had done.

    ``id`` is the store's own (a row number, a stream entry id); ``partial`` is the scorer's
    partial result (steps completed before the failure) as parsed JSON, or None.

    Example:
        >>> letter = DeadLetter.from_stored("7", "t/s/q/1", RunRecord("t", "s"),
        ...     '{"type": "ValueError", "message": "bad"}', 1, 0.0)
        >>> letter.job.scorer_id, letter.row()["error"], letter.row()["failed_at"]
        ('q', 'ValueError: bad', '1970-01-01T00:00:00Z')
    """

    id: str
    job: ScoreJob
    error_type: str
    message: str
    traceback: str
    partial: Any
    attempts: int
    failed_at: float
    evaluation_span_id: str | None = None  # its failure span (`failure_span_of`), which a replay supersedes

    @classmethod
    def from_stored(cls, letter_id: str, key: str, run: RunRecord, error_json: str | bytes,
                    attempts: int, failed_at: float) -> DeadLetter:
        """Rebuild a dead letter from a store's columns (the error JSON of `dead_letter_error`,
        or an older one with only type and message: its scorer is read from the key).

        Example:
            >>> DeadLetter.from_stored("1", "t/s/my/scorer/", RunRecord("t", "s"), "{}", 1, 0.0).job.scorer_id
            'my/scorer'
        """
        error = json.loads(error_json)
        scorer_id, scorer_version = error.get("scorer_id"), error.get("scorer_version")
        if scorer_id is None:  # key: trace/span/scorer id/version (ids are hex, the version last)
            scorer_id, _, version = key.split("/", 2)[-1].rpartition("/")
            scorer_version = version or None
        partial = error.get("partial")
        if isinstance(partial, str):
            try:
                partial = json.loads(partial)
            except ValueError:
                pass  # cut to max length: shown as text
        return cls(letter_id, ScoreJob(run, str(scorer_id), scorer_version), str(error.get("type", "")),
                   str(error.get("message", "")), str(error.get("traceback") or ""), partial,
                   int(attempts), float(failed_at), failure_span_of(key, error))

    def replayed_job(self) -> ScoreJob:
        """The job a replay queues: the same job (same key), naming the failure span it replaces.

        Example:
            >>> DeadLetter("1", ScoreJob(RunRecord("t", "s"), "q"), "E", "m", "", None, 1, 0.0, "ab" * 8).replayed_job()
            ScoreJob(run=RunRecord(trace_id='t', span_id='s', ...), scorer_id='q', scorer_version=None, supersedes='abababababababab')
        """
        return replace(self.job, supersedes=self.evaluation_span_id)

    def row(self) -> dict[str, Any]:
        """The `tracescore dead-letters list --format json` row (SPEC §6): id, scorer, trace
        and span ids, the error (type: message) and when it failed (ISO 8601, UTC).

        Example:
            >>> letter = DeadLetter("1", ScoreJob(RunRecord("t", "s"), "q"), "E", "m", "", None, 1, 60.0)
            >>> letter.row()
            {'id': '1', 'scorer': 'q', 'trace_id': 't', 'span_id': 's', 'error': 'E: m', 'failed_at': '1970-01-01T00:01:00Z'}
        """
        at = datetime.fromtimestamp(self.failed_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"id": self.id, "scorer": self.job.scorer_id, "trace_id": self.job.run.trace_id,
                "span_id": self.job.run.span_id, "error": f"{self.error_type}: {self.message}", "failed_at": at}
