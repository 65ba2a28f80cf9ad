"""Scoring conversations when they are due (SPEC §7): due sessions -> conversation jobs.

Assembly notes every run that is a turn of a session in the store's `SessionLog` (see
`collector.assemble.assembler`); the store keeps each session's timer (idle, end marker,
max age, max turns, max open). `SessionScheduler` sleeps until the earliest session is due
(woken at once by an ended session), claims the due ones for a lease, queues one job per
conversation scorer that admits the session (its filter on the last turn, sampling on the
session's scope) and marks them scored. A scheduler that dies between the claim and the
mark leaves them to be claimed again when the lease ends; the jobs' keys (scope, revision,
scorer) make the second queueing a no-op. Every receiver runs one; on Redis they share the
sessions, and a claim is taken by one of them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from collector.assemble.assembler import sleep_before
from collector.common.aio import cancel_and_wait, wait_event
from collector.common.metrics import Metrics
from collector.common.session_types import DueSession, conversation_of
from collector.common.types import ScoreJob
from collector.store.interface import JobQueue, SessionLog

logger = logging.getLogger(__name__)
_LOG_EVERY_S = 30.0


class ConversationChoice(Protocol):
    """One registered conversation scorer, as a job names it."""

    @property
    def scorer_id(self) -> str:
        """The scorer's id."""
        ...

    @property
    def version(self) -> str | None:
        """The scorer's version."""
        ...


class ConversationSelection(Protocol):
    """Which conversation scorers take a session."""

    def conversation_decisions(
        self, *, scope: str, service: str, agent: str | None, span_name: str, attributes: Mapping[str, Any],
    ) -> Sequence[tuple[ConversationChoice, str]]:
        """Each conversation scorer with ``admitted``, ``filtered_out`` or ``sampled_out``."""
        ...


def session_jobs(due: DueSession, selection: ConversationSelection,
                 count: Callable[[str, str], None] | None = None) -> list[ScoreJob]:
    """The conversation jobs of one due session: one per admitted conversation scorer, each
    on the session's last turn (where the score lands) carrying the whole session
    (``count(scorer_id, decision)`` is told every other decision). A session with a turn whose
    trace never completed (`collector.assemble.decide.trace_incomplete`) is scored ``partial``.

    Example:
        >>> from collector.common.types import RunRecord
        >>> class Scorer:
        ...     scorer_id, version = "frustration", "1"
        >>> class All:
        ...     def conversation_decisions(self, **session):
        ...         return [(Scorer(), "admitted")]
        >>> turns = (RunRecord("a" * 32, "1" * 16, service="bot"), RunRecord("b" * 32, "2" * 16, service="bot"))
        >>> (job,) = session_jobs(DueSession("bot/c1", "c1", "bot", turns, revision=2), All())
        >>> (job.key, job.run.span_id, len(job.run.conversation["turns"]), job.run.conversation["partial"])
        ('session/bot/c1/2/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/frustration/1', '2222222222222222', 2, False)
        >>> broken = (turns[0], replace(turns[1], incomplete=True))
        >>> session_jobs(DueSession("bot/c1", "c1", "bot", broken), All())[0].run.conversation["partial"]
        True
    """
    if not due.turns:
        return []
    if not due.partial and any(turn.incomplete for turn in due.turns):  # a turn's trace never completed
        due = replace(due, partial=True)
    last = due.turns[-1]
    conversation = conversation_of(due)
    jobs = []
    for entry, decision in selection.conversation_decisions(
        scope=due.scope, service=due.service, agent=last.agent, span_name=last.span_name,
        attributes=last.request_context,
    ):
        if decision == "admitted":
            jobs.append(ScoreJob(replace(last, conversation=conversation), entry.scorer_id, entry.version))
        elif count is not None:
            count(entry.scorer_id, decision)
    return jobs


class SessionScheduler:
    """Turns due sessions into conversation jobs, on time.

    Args:
        sessions: the store's session state.
        queue: where jobs go.
        selection: the registered scorers.
        metrics: the service's instruments.
        lease_s: how long a claimed session is this scheduler's (then it is due again).
        tick_s: the longest sleep (sessions made due by other replicas are seen this late at most).
        on_jobs: called after new jobs were queued (wakes the workers).
    """

    def __init__(self, sessions: SessionLog, queue: JobQueue, selection: ConversationSelection, metrics: Metrics,
                 *, lease_s: float = 60.0, tick_s: float = 1.0, on_jobs: Callable[[], None] | None = None) -> None:
        self._sessions = sessions
        self._queue = queue
        self._selection = selection
        self._metrics = metrics
        self._lease = lease_s
        self._tick = tick_s
        self._on_jobs = on_jobs
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def notify(self, ended: bool = True) -> None:
        """Wake the scheduler: a session may be due now (an end marker was noted)."""
        if ended and self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        """Start the scheduling loop."""
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="tracescore-sessions")

    async def shutdown(self) -> None:
        """Stop the loop (a claim it held is taken again when its lease ends); safe twice."""
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _loop(self) -> None:
        wake = self._wake or asyncio.Event()
        last_logged = -math.inf
        while True:
            try:
                scheduled = await self.schedule_due()
            except Exception as err:
                self._metrics.errors.labels(component="sessions").inc()
                if time.monotonic() - last_logged >= _LOG_EVERY_S:
                    last_logged = time.monotonic()
                    logger.error("scheduling due sessions failed; retrying (logged at most every %gs)",
                                 _LOG_EVERY_S, exc_info=err)
                scheduled = 0
            if scheduled == 0:
                await wait_event(wake, await self._until_next())
                wake.clear()

    async def _until_next(self) -> float:
        try:
            next_at = await self._sessions.next_session_due()
        except Exception:
            logger.debug("reading the next session time failed", exc_info=True)
            return self._tick
        return sleep_before(next_at, self._tick)

    async def schedule_due(self, limit: int = 64) -> int:
        """Queue the jobs of every session due now (up to ``limit``); returns how many sessions."""
        due = await self._sessions.take_due_sessions(time.time(), limit, self._lease)
        if not due:
            return 0
        per_session = [session_jobs(session, self._selection, self._count) for session in due]
        jobs = [job for batch in per_session for job in batch]
        if jobs:
            flags = await self._queue.put(jobs)
            for job, new in zip(jobs, flags, strict=True):
                self._metrics.decisions.labels(scorer=job.scorer_id, reason="queued" if new else "duplicate").inc()
            if any(flags) and self._on_jobs is not None:
                self._on_jobs()
        await self._sessions.sessions_scored(due, time.time())
        for session, queued in zip(due, per_session, strict=True):
            logger.info("session %s (%d turn(s), revision %d) due: %s%s; %d job(s)", session.scope,
                        len(session.turns), session.revision, session.reason, ", partial" if session.partial else "",
                        len(queued))
        return len(due)

    def _count(self, scorer_id: str, decision: str) -> None:
        self._metrics.decisions.labels(scorer=scorer_id, reason=decision).inc()
