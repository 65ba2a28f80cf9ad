"""`SinkSender`: drains one sink's outbox into its backend, durably and idempotently.

Per record: the backend took it -> released; it does not know the span or trace yet ->
retried until the record has waited ``span_wait_s`` since the first such answer (a conversation
score: the backend does not know the session, or its first trace, yet), then
released and counted (``dropped_span_missing``, logged at WARNING); down, overloaded or
refusing credentials -> retried, backing off from ``min_backoff_s`` to ``max_backoff_s``
with jitter (the Collector's retry_on_failure); refused for good -> released and counted.
A batch stops at the first retryable answer (the rest waits too), so an outage costs one
failed request per round, not one per record. Failure records (no score) are not sent.

``tracescore_sink_sent_total{sink,outcome}`` counts every answer and
``tracescore_sink_backlog_records{sink}`` shows what waits.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

import aiohttp

from collector.common.aio import cancel_and_wait, wait_event
from collector.common.metrics import Metrics
from collector.common.types import OutboxItem, ScoreRecord
from collector.config.sinks import SinkConfig
from collector.export.sinks.base import Answer, SinkClient
from collector.store.interface import SinkOutbox

logger = logging.getLogger(__name__)


def missing_target(record: ScoreRecord) -> str:
    """What a backend did not know when it answered SPAN_MISSING: the scored span, or for a
    conversation score its session (a session annotation) or first trace (an assessment).

    Example:
        >>> missing_target(ScoreRecord("k", "ab" * 16, "cd" * 8, "x", "q", "Q"))
        'span cdcdcdcdcdcdcdcd of trace abababababababababababababababab'
        >>> missing_target(ScoreRecord("k", "ab" * 16, "cd" * 8, "x", "q", "Q", session={"scope": "bot/c1"}))
        'session bot/c1 (or its first trace)'
    """
    if record.session is not None:
        return f"session {record.session.get('scope')} (or its first trace)"
    return f"span {record.span_id} of trace {record.trace_id}"


class SinkSender:
    """Sends one sink's backlog.

    Args:
        client: the backend's score API.
        outbox: the sink's outbox in the store.
        cfg: the sink's section (span wait, backoff bounds, timeout).
        metrics: the service's instruments.
        batch: records read from the outbox per round.
        concurrency: requests in flight at once.
        poll_s: how often an idle sender looks for due records.
    """

    def __init__(
        self, client: SinkClient, outbox: SinkOutbox, cfg: SinkConfig, metrics: Metrics, *,
        batch: int = 64, concurrency: int = 8, poll_s: float = 0.5,
    ) -> None:
        self.name = client.name
        self._client = client
        self._outbox = outbox
        self._cfg = cfg
        self._metrics = metrics
        self._batch = batch
        self._concurrency = concurrency
        self._poll = poll_s
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._gauge_at = 0.0

    def notify(self) -> None:
        """Wake the sender (records were settled)."""
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        """Open the HTTP client and start sending (records left by a previous process first)."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._cfg.timeout_s))
        self._wake = asyncio.Event()
        self._stopping = False
        self._task = asyncio.create_task(self._loop(), name=f"tracescore-sink-{self.name}")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Send what is due for up to ``timeout`` seconds, then stop; the rest waits in the store."""
        if self._task is not None:
            self._stopping = True  # the loop ends between rounds: a round is never cut in half
            self.notify()
            try:
                async with asyncio.timeout(timeout):
                    await self._task
                    while await self.send_due() > 0:
                        pass
            except TimeoutError:
                logger.warning("%s sink: backlog not sent within %.1fs; it is sent after restart", self.name, timeout)
                await cancel_and_wait([self._task])
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _loop(self) -> None:
        wake = self._wake or asyncio.Event()
        while not self._stopping:
            try:
                done = await self.send_due()
            except Exception:
                self._metrics.errors.labels(component=f"sink_{self.name}").inc()
                logger.exception("%s sink failed unexpectedly", self.name)
                done = 0
            if done <= 0 and not self._stopping:
                await self._refresh_gauge()
                await wait_event(wake, self._poll)
                wake.clear()

    async def _refresh_gauge(self, force: bool = False) -> None:
        if force or time.monotonic() - self._gauge_at >= 2.0:
            self._gauge_at = time.monotonic()
            self._metrics.sink_backlog.labels(sink=self.name).set(await self._outbox.backlog())

    def _count(self, outcome: str, n: int = 1) -> None:
        if n:
            self._metrics.sink_sent.labels(sink=self.name, outcome=outcome).inc(n)

    def _delay(self, attempts: int) -> float:
        base = min(self._cfg.max_backoff_s, self._cfg.min_backoff_s * 2 ** min(attempts, 16))
        return base * random.uniform(0.8, 1.2)

    async def send_due(self) -> int:
        """One round: send the records that are due; returns how many were settled (taken,
        given up or deferred), 0 when none was due, -1 when the backend asked to wait.
        """
        items = list(await self._outbox.pending(self._batch))
        if not items:
            return 0
        failed = [i.item_id for i in items if i.record.score is None]
        if failed:
            await self._outbox.release(failed)
            self._count("skipped_failed", len(failed))
        items = [i for i in items if i.record.score is not None]
        waiting = False
        for start in range(0, len(items), self._concurrency):
            chunk = items[start:start + self._concurrency]
            if waiting:  # the backend is away: the rest of the round waits too, untried
                await self._outbox.defer([i.item_id for i in chunk], self._delay(max(i.attempts for i in chunk)))
                self._count("retried", len(chunk))
                continue
            answers = await asyncio.gather(*(self._send(i) for i in chunk))
            waiting = await self._settle(list(zip(chunk, answers, strict=True)))
        await self._refresh_gauge(force=True)
        return -1 if waiting else len(failed) + len(items)

    async def _send(self, item: OutboxItem) -> Answer:
        assert self._session is not None
        try:
            return await self._client.send(self._session, item.record)
        except Exception:  # a bug must not lose the score: it is retried like an outage
            logger.exception("%s sink: sending score %s failed", self.name, item.record.key)
            return Answer.RETRY

    async def _settle(self, answered: list[tuple[OutboxItem, Answer]]) -> bool:
        """Release, defer or give up each answered record; True when the backend asked to wait."""
        now = time.time()
        done: list[int] = []
        rejected: list[int] = []
        expired: list[int] = []
        retry: list[OutboxItem] = []
        missing: list[OutboxItem] = []
        for item, answer in answered:
            if answer is Answer.SENT:
                done.append(item.item_id)
            elif answer is Answer.REJECTED:
                rejected.append(item.item_id)
            elif answer is Answer.RETRY:
                retry.append(item)
            elif item.waiting_since is not None and now - item.waiting_since >= self._cfg.span_wait_s:
                logger.warning("%s sink: dropping score %s: the backend still has no %s after %.0fs", self.name,
                               item.record.key, missing_target(item.record), now - item.waiting_since)
                expired.append(item.item_id)
            else:
                missing.append(item)
        if done or rejected or expired:
            await self._outbox.release(done + rejected + expired)
        self._count("sent", len(done))
        self._count("rejected", len(rejected))
        self._count("dropped_span_missing", len(expired))
        for group, span_missing, outcome in ((retry, False, "retried"), (missing, True, "span_missing")):
            if group:
                delay = self._delay(max(i.attempts for i in group))
                await self._outbox.defer([i.item_id for i in group], delay, span_missing=span_missing)
                self._count(outcome, len(group))
        return bool(retry)
