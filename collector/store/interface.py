"""The store's roles, as the stages above it call them (the backends implement all four).

* `TraceBuffer` (assembly): per-trace span storage, durable before `append` returns, with
  decision timing (`due`), reading (`load`) and `finish` once a trace's jobs are queued.
  `RequestBuffer` is a trace buffer that keeps whole requests and cuts them on load.
* `JobQueue` (assembly puts, workers take and settle): leased jobs, idempotent on
  `collector.common.types.ScoreJob.key`.
* `Outbox` (export): results settled with a record wait here until a backend took them.
* `SinkOutbox` (export's native sinks): the same records, once per configured sink.
* `Store`: all of the above plus the lifecycle, gauges, retention and dead letters that
  `collector.service` uses; `SqliteStore` and `RedisStore` are the two backends (and
  `PartitionedRedisStore`, several `RedisStore` key sets as one).
* `ForwardLog` (export's `collector.export.forward.Forwarder`): received requests kept, in
  order, until the export endpoint accepted them; written in the same step as the trace
  buffer (``forward=`` on `TraceBuffer.append` and `RequestBuffer.append_request`).
* `JudgeReplies` (workers): the judge replies a job's scorer received, kept until the job
  settles, so a job run again (handed back, or after a crash) never pays for them twice.
* `DeadLetterAdmin` (``tracescore dead-letters``): list, replay and purge dead letters from
  outside the daemon, while it runs.
* `SessionLog` (assembly notes turns, the session scheduler takes due sessions): the state of
  conversations (SPEC §7), durable and shared, under the store's `SessionRules`.
* `JudgeLedger` (workers' judge governor, ``tracescore judges``): judge budgets, shared rate
  limits, cool-downs and circuit breakers (SPEC §8), one view for every replica.
* ``Store.totals``: the deployment's totals (`collector.store.totals`), written with what they
  count, so status shows every worker's, living or dead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from collector.common.errors import UnreadableTrace
from collector.common.session_types import DueSession, SessionTurn
from collector.common.types import (
    AppendResult,
    DeadLetter,
    LeasedJob,
    OutboxItem,
    ScoreJob,
    Settlement,
    StoreStats,
    SummaryEntry,
    TraceChunk,
)
from collector.store.judge_interface import JudgeLedger

if TYPE_CHECKING:
    from collector.config import SessionsConfig


@dataclass(frozen=True)
class ForwardItem:
    """One received request in the forward log, waiting to be passed on unchanged.

    ``position`` orders the log (it only grows); ``signal`` is ``traces`` or ``logs``;
    ``body`` is the request's protobuf encoding as received.
    """

    position: int
    signal: str
    body: bytes


@dataclass(frozen=True)
class ForwardState:
    """Where the forward log stands: ``head`` is the last position appended, ``sent`` the
    last position the backend accepted (everything at or before it left the log).

    Example:
        >>> state = ForwardState(head=9, sent=4, requests=5, bytes=500)
        >>> state.requests, state.caught_up(4), state.caught_up(5)
        (5, True, False)
    """

    head: int
    sent: int
    requests: int
    bytes: int

    def caught_up(self, mark: int) -> bool:
        """Whether everything appended up to ``mark`` was forwarded."""
        return mark <= self.sent


@dataclass(frozen=True)
class SessionRules:
    """When sessions are scored and how many the store keeps (``[sessions]`` in the config).

    Attributes:
        idle_s: a session is due this long after its last turn arrived (`SessionTurn.arrived_at`,
            else when it was noted; reason ``idle``).
        max_age_s: it is due (``partial``, reason ``max_age``) at the latest this long after it
            opened: its first turn was noted, or a late turn reopened it.
        max_turns: it is due at once (``partial``, reason ``max_turns``) once it holds this many turns.
        max_revisions: it is scored at most this many times (revisions 1..max_revisions); a late
            turn of a session scored that often is kept, schedules nothing, and counts as capped.
        max_open: open sessions (not already forced) beyond this: the oldest (by opening) are
            made due at once (``partial``, reason ``forced``).
        retain_s: a scored session is remembered this long after its last turn was noted (so a
            late turn reopens it), then forgotten (a turn after that opens a new session).
        min_turns: a session due with fewer turns is not scored: it is closed as it is (counted
            ``short_total``, its revision unused) and remembered like a scored one, so a later
            turn reopens it.

    Example:
        >>> SessionRules().idle_s, SessionRules(max_turns=3).max_turns, SessionRules().min_turns
        (300.0, 3, 1)
    """

    idle_s: float = 300.0
    max_age_s: float = 86400.0
    max_turns: int = 200
    max_revisions: int = 5
    max_open: int = 100_000
    retain_s: float = 86400.0
    min_turns: int = 1


def store_session_rules(cfg: SessionsConfig) -> SessionRules:
    """The store's rules for conversations from ``[sessions]`` (a scored session is remembered
    for ``max_age_s``, so a late turn within it reopens the session).

    Example:
        >>> from collector.config import SessionsConfig
        >>> store_session_rules(SessionsConfig(idle_s=8, min_turns=2)).min_turns
        2
    """
    return SessionRules(idle_s=cfg.idle_s, max_age_s=cfg.max_age_s, max_turns=cfg.max_turns,
                        max_revisions=cfg.max_revisions, max_open=cfg.max_open, retain_s=cfg.max_age_s,
                        min_turns=cfg.min_turns)


SESSION_COUNTS = ("open", "scored", "scored_total", "reopened_total", "forced_total", "capped_total",
                  "short_total")
"""The names `SessionLog.session_counts` answers: two gauges, then monotonic totals."""

PARTIAL_REASONS = frozenset({"max_age", "max_turns", "forced"})
"""The reasons a session is due before it is over (`DueSession.partial`)."""


class TraceBuffer(Protocol):
    """Durable per-trace span storage: what assembly appends to and decides from."""

    async def append(self, chunks: Sequence[TraceChunk], *, forward: tuple[str, bytes] | None = None) -> AppendResult:
        """Store chunks durably, evicting or dropping over the bounds (said in the result);
        ``forward``: (signal, request body) to add to the forward log in the same step."""
        ...

    async def due(self, limit: int) -> tuple[list[bytes], int]:
        """Up to ``limit`` trace ids to decide now, and how many run-less traces expired. A store
        whose ``claims_due`` is true claims them: until they are finished (or their claim runs
        out), no other call returns them, so assembly takes the next batch while one is decided;
        any other store returns them again until they are finished."""
        ...

    async def next_due(self) -> float | None:
        """When the next trace may be due for a decision (epoch seconds; None: none pending).
        Never later than the real time: assembly sleeps until then rather than polling."""
        ...

    async def load(self, trace_id: bytes) -> list[TraceChunk]:
        """A trace's chunks in arrival order."""
        ...

    async def finish(self, trace_id: bytes) -> None:
        """Mark a trace decided (its jobs are queued); it stays as context for late runs."""
        ...

    async def load_many(self, trace_ids: Sequence[bytes]) -> list[list[TraceChunk] | UnreadableTrace]:
        """`load` for several traces in one store round trip: per trace its chunks, or the
        `collector.common.errors.UnreadableTrace` that reading it raised (the others are still read)."""
        ...

    async def finish_many(self, trace_ids: Sequence[bytes]) -> None:
        """`finish` for several traces in one store round trip."""
        ...

    async def discard(self, trace_id: bytes, error: str) -> None:
        """Dead-letter a trace that cannot be read (`collector.common.errors.UnreadableTrace`) and forget it."""
        ...


class RequestBuffer(TraceBuffer, Protocol):
    """A trace buffer that stores whole requests as received, with a per-trace summary
    (`collector.common.types.SummaryEntry`), and cuts them by trace only when loading."""

    async def append_request(
        self, signal: str, raw: bytes, entries: Sequence[SummaryEntry], *, forward: bool = False,
    ) -> AppendResult:
        """Store one whole request (``TracesData`` or ``LogsData`` encoding) and its summary;
        ``forward``: add it to the forward log too, in the same step."""
        ...


class JobQueue(Protocol):
    """Where score jobs wait: durable, leased, idempotent on `ScoreJob.key`."""

    async def put(self, jobs: Sequence[ScoreJob]) -> list[bool]:
        """Queue jobs; each flag says whether that job was new (False: a duplicate key)."""
        ...

    async def take(self, limit: int) -> list[LeasedJob]:
        """Lease up to ``limit`` available jobs (possibly none)."""
        ...

    async def settle(self, leased: LeasedJob, outcome: Settlement) -> None:
        """Finish, retry or dead-letter a leased job; completes even when the caller is cancelled
        meanwhile (the store shields it). A settlement the store accepts (the lease holds; a
        `Done` or `Dead` of a job not done already) adds its `collector.store.totals.settlement_tally`
        to the totals in the same step; one it refuses counts nothing."""
        ...

    async def renew(self, leased: Sequence[LeasedJob]) -> int:
        """Renew the leases of jobs still running (a heartbeat); returns how many are still held."""
        ...

    def depth(self) -> int:
        """Jobs and unexported results waiting (cached; never blocks)."""
        ...


class Outbox(Protocol):
    """Durable results waiting for export."""

    async def pending(self, limit: int, within_s: float = 0.0) -> Sequence[OutboxItem]:
        """Lease up to ``limit`` results for export (a lease that runs out frees them again):
        those due now, or within ``within_s`` (a flush before stopping takes the ones held back)."""
        ...

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete exported results."""
        ...

    async def defer(self, item_ids: Sequence[int], delay_s: float) -> None:
        """Leave results for a later attempt, ``delay_s`` from now."""
        ...


class SinkOutbox(Protocol):
    """One native score sink's durable backlog (`collector.export.sinks`): every record settled
    with a job is written here too, per configured sink, in the same transaction."""

    async def pending(self, limit: int) -> Sequence[OutboxItem]:
        """Lease up to ``limit`` records due for (another) attempt."""
        ...

    async def release(self, item_ids: Sequence[int]) -> None:
        """Delete records the backend accepted (or that were given up)."""
        ...

    async def defer(self, item_ids: Sequence[int], delay_s: float, *, span_missing: bool = False) -> None:
        """Leave records for a later attempt, ``delay_s`` from now; ``span_missing``: the backend
        did not know the span yet (the first such answer's time becomes ``waiting_since``)."""
        ...

    async def backlog(self) -> int:
        """Records waiting in this sink's outbox."""
        ...


class ForwardLog(Protocol):
    """Received requests waiting to be forwarded unchanged, in the order received; bounded
    in bytes (a full log refuses new requests with `collector.common.errors.QueueFull`)."""

    async def forward_append(self, signal: str, body: bytes) -> None:
        """Add one request (``traces`` or ``logs``) to the log, durably."""
        ...

    async def forward_pending(self, max_bytes: int, limit: int) -> Sequence[ForwardItem]:
        """The oldest requests not forwarded yet, in order: up to ``limit`` of them and about
        ``max_bytes`` (always at least one when any wait). Empty while another process
        of a shared store is the one forwarding."""
        ...

    async def forward_release(self, through: int) -> None:
        """Forget every request up to position ``through`` (the backend accepted them)."""
        ...

    async def forward_state(self) -> ForwardState:
        """Head, sent position and backlog of the log."""
        ...


class JudgeReplies(Protocol):
    """Judge replies per job, kept until the job is settled done or dead."""

    async def judge_replies(self, job_key: str) -> dict[str, str]:
        """The replies kept for a job: request key -> reply JSON."""
        ...

    async def keep_judge_reply(self, job_key: str, request_key: str, reply: str) -> None:
        """Keep one reply (JSON) of a job's judge request, durably."""
        ...


class SessionLog(Protocol):
    """The conversations' state (SPEC §7): turns, timers and revisions, durable and shared.

    Time is always given (``now``, epoch seconds); the store never reads the clock for it.
    """

    async def note_turns(self, turns: Sequence[SessionTurn], now: float) -> None:
        """Record turns (the same (trace_id, span_id) twice is one turn; the newer copy replaces
        the older). An open session's due time becomes ``idle_s`` after the latest arrival of its
        turns (`SessionTurn.arrived_at`, at most ``now``; a turn without one arrived ``now``),
        never earlier than a turn noted before had set it; a turn with the end marker: ``now``,
        reason ``ended``; capped at its opening + ``max_age_s`` (``max_age``, partial); reaching
        ``max_turns`` makes it due now (partial). A new turn of a scored session reopens it (its
        next score is the next revision) unless it was scored ``max_revisions`` times (then the
        turn is kept, nothing is scheduled: ``capped_total``); a new turn of a session closed
        short (``min_turns``) reopens it for its first score. Open sessions over ``max_open``:
        the oldest are forced due now (``forced_total``)."""
        ...

    async def take_due_sessions(self, now: float, limit: int, lease_s: float) -> list[DueSession]:
        """Claim up to ``limit`` sessions due at or before ``now``, earliest first, each with all its
        turns ordered by (start_ns, trace_id, span_id). A claimed session is not returned again
        before ``lease_s`` passed (then it is due again: its claimer crashed). A due session with
        fewer than ``min_turns`` turns is closed instead, unscored (``short_total``)."""
        ...

    async def sessions_scored(self, due: Sequence[DueSession], now: float) -> None:
        """The claimed sessions' jobs are queued: mark them scored at their revision (kept until
        their last turn + ``retain_s``). A session with a turn not among ``due.turns`` (noted
        after the claim) stays open and is due again, with the next revision. A revision never
        goes back: marking a revision at or below the one recorded (a claim that ran out, marked
        after another scheduler's later revision) changes nothing."""
        ...

    async def next_session_due(self) -> float | None:
        """When the earliest open session is due, or its claim runs out (None: none open)."""
        ...

    async def session_counts(self) -> dict[str, int]:
        """`SESSION_COUNTS`: ``open`` and ``scored`` (retained: scored, or closed short) sessions,
        and the totals ``scored_total``, ``reopened_total``, ``forced_total``, ``capped_total``,
        ``short_total``."""
        ...


class Store(TraceBuffer, JobQueue, Outbox, JudgeReplies, SessionLog, JudgeLedger, Protocol):
    """A whole store backend: the roles above plus lifecycle, gauges, retention, dead letters."""

    @property
    def forward_log(self) -> ForwardLog:
        """The forward log (empty, and never written, when the store was made without forwarding)."""
        ...

    async def start(self) -> None:
        """Open the store; leases and traces left by a previous process become available again."""
        ...

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Close the store; safe before start and twice."""
        ...

    async def stats(self) -> StoreStats:
        """Counts for the gauges."""
        ...

    async def totals(self) -> dict[str, float]:
        """The deployment's totals (`collector.store.totals`), field -> amount: every accepted
        settlement per scorer, every job dead-lettered for its leases, every settled judge call
        per model, since the store was made, whichever process (living or dead) wrote them."""
        ...

    async def prune(self, older_than_s: float) -> int:
        """Forget idempotency records older than ``older_than_s``; returns how many went."""
        ...

    async def dead_letters(self) -> list[dict[str, object]]:
        """The dead-lettered jobs with their errors."""
        ...

    def sink_outbox(self, sink: str) -> SinkOutbox:
        """The outbox of one configured sink (named in the store's ``sinks``)."""
        ...


class DeadLetterAdmin(Protocol):
    """Dead letters as an operator acts on them (``tracescore dead-letters``), beside a running
    daemon. A replay re-queues a job under its own idempotency key, which is then scored once."""

    async def letters(self) -> list[DeadLetter]:
        """Every dead letter, oldest first."""
        ...

    async def replay(self, ids: Sequence[str] | None) -> list[str]:
        """Re-queue dead letters (all when ``ids`` is None); returns the ids replayed."""
        ...

    async def purge(self, ids: Sequence[str] | None) -> int:
        """Delete dead letters (all when ``ids`` is None); their keys are not queued again."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
