"""The job queue interface (`JobQueue`) and the frozen types that cross it.

A `ScoreJob` is one (agent run, scorer) pair. Its `key` — trace id, span id, scorer id,
scorer version — is the idempotency key of the score: a backend accepts a key once, and
a key that was completed or dead-lettered is never queued again. A taken job is leased
for a visibility timeout; a lease that runs out (a crashed worker) makes it available
again. Settling a job with `Done` writes the score to the outbox and acknowledges the
job in one step, so a result is durable before the job disappears.

Everything here is plain data serialisable as JSON (dead letters and outbox rows are
JSON, never pickles), so a Redis backend can implement the same Protocol.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


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

    def to_json(self) -> str:
        """Serialise to a JSON string.

        Example:
            >>> RunRecord(trace_id="a", span_id="b").to_json()[:15]
            '{"trace_id": "a'
        """
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        """Parse `to_json` output.

        Example:
            >>> RunRecord.from_json('{"trace_id": "a", "span_id": "b"}').span_id
            'b'
        """
        return cls(**json.loads(text))

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

    @property
    def key(self) -> str:
        """The idempotency key: trace id, span id, scorer id, scorer version.

        Example:
            >>> ScoreJob(RunRecord(trace_id="t", span_id="s"), "q").key
            't/s/q/'
        """
        return f"{self.run.trace_id}/{self.run.span_id}/{self.scorer_id}/{self.scorer_version or ''}"


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

    def to_json(self) -> str:
        """Serialise to a JSON string.

        Example:
            >>> '"scorer_id": "q"' in ScoreRecord("k", "t", "s", "x", "q", "q").to_json()
            True
        """
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ScoreRecord:
        """Parse `to_json` output.

        Example:
            >>> ScoreRecord.from_json(ScoreRecord("k", "t", "s", "x", "q", "q").to_json()).key
            'k'
        """
        return cls(**json.loads(text))

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True)
class OutboxItem:
    """One outbox row: a record waiting for export.

    Example:
        >>> OutboxItem(1, ScoreRecord("k", "t", "s", "x", "q", "q"), attempts=0).item_id
        1
    """

    item_id: int
    record: ScoreRecord
    attempts: int


@dataclass(frozen=True)
class Done:
    """Settle a job as finished; ``record`` (when not None) goes to the outbox atomically.

    Example:
        >>> Done(None).record is None
        True
    """

    record: ScoreRecord | None


@dataclass(frozen=True)
class Retry:
    """Hand a job back to be tried again after ``delay_s`` (a transient failure).

    Example:
        >>> Retry(2.0, "judge rate limited").delay_s
        2.0
    """

    delay_s: float
    error: str


@dataclass(frozen=True)
class Dead:
    """Move a job to the dead-letter table; ``record`` (a failure span) goes to the outbox.

    Example:
        >>> Dead("ScorerRunError", "Scorer Run Failed: boom", None).error_type
        'ScorerRunError'
    """

    error_type: str
    message: str
    record: ScoreRecord | None


Settlement = Done | Retry | Dead


class JobQueue(Protocol):
    """Where score jobs wait: durable, leased, idempotent on `ScoreJob.key`.

    Example:
        >>> JobQueue.__name__
        'JobQueue'
    """

    async def put(self, jobs: Sequence[ScoreJob]) -> list[bool]:
        """Queue jobs; each flag says whether that job was new (False: a duplicate key)."""
        ...

    async def take(self, limit: int) -> list[LeasedJob]:
        """Lease up to ``limit`` available jobs (possibly none)."""
        ...

    async def settle(self, leased: LeasedJob, outcome: Settlement) -> None:
        """Finish, retry or dead-letter a leased job."""
        ...

    def depth(self) -> int:
        """Jobs and unexported results waiting (cached; never blocks)."""
        ...
