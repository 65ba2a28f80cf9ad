"""`SinkSender`: drains one sink's outbox into its backend, durably and idempotently.

The durable senders' one loop (`collector.export.send.loop.SendLoop`) over the sink's outbox,
each record its own request (``concurrency`` at a time), its answer read as every sender
reads it (`collector.export.sinks.base.answer_of`). Per record: the backend took it ->
released; it does not know the span or trace yet (a conversation score: the session, or its
first trace) -> retried until the record has waited ``span_wait_s`` since the first such
answer, then released and counted (``dropped_span_missing``, logged at WARNING); down or
overloaded, or refusing what a configuration change cures (credentials, an unknown route) ->
kept and retried, backing off from ``min_backoff_s`` to ``max_backoff_s`` with jitter (the
Collector's retry_on_failure), the round stopping there (the rest waits too, so an outage
costs one failed request per round, not one per record) and ``tracescore status`` showing
the backend's message; refused for good -> released, counted and logged. Failure records
(no score) are not sent. With forwarding on, a record waits until its run's spans were
forwarded (the backend cannot know the span before), so a long forwarding hold never runs
down its ``span_wait_s``.

``tracescore_sink_sent_total{sink,outcome}`` counts every answer and
``tracescore_sink_backlog_records{sink}`` shows what waits.
"""

from __future__ import annotations

import logging
import time

import aiohttp

from collector.common.metrics import Metrics
from collector.common.types import OutboxItem, ScoreRecord
from collector.config import without_password
from collector.config.sinks import SinkConfig
from collector.export.send.answers import Answer
from collector.export.send.backlogs import ForwardGate, SinkBacklog
from collector.export.send.loop import Backoff, Batch, SendLoop
from collector.export.send.watch import SendWatch
from collector.export.sinks.base import SinkClient
from collector.store.interface import ForwardLog, SinkOutbox

logger = logging.getLogger(__name__)


def missing_target(record: ScoreRecord) -> str:
    """What a backend did not know when it answered that it does not know the span: the
    scored span, or for a conversation score its session (a session annotation) or first
    trace (an assessment).

    Example:
        >>> missing_target(ScoreRecord("k", "ab" * 16, "cd" * 8, "x", "q", "Q"))
        'span cdcdcdcdcdcdcdcd of trace abababababababababababababababab'
        >>> missing_target(ScoreRecord("k", "ab" * 16, "cd" * 8, "x", "q", "Q", session={"scope": "bot/c1"}))
        'session bot/c1 (or its first trace)'
    """
    if record.session is not None:
        return f"session {record.session.get('scope')} (or its first trace)"
    return f"span {record.span_id} of trace {record.trace_id}"


class SinkCourse:
    """How a sink's records are sent: each as its backend's own score object, through its client."""

    def __init__(self, client: SinkClient, backlog: SinkBacklog, cfg: SinkConfig, metrics: Metrics,
                 gate: ForwardGate) -> None:
        self.name = client.name
        self._client = client
        self._backlog = backlog
        self._cfg = cfg
        self._metrics = metrics
        self._gate = gate
        self._session: aiohttp.ClientSession | None = None
        self._gauge_at = 0.0

    async def open(self) -> None:
        """Open the HTTP client."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._cfg.timeout_s))

    async def close(self) -> None:
        """Close the HTTP client."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def prepare(self, items: list[OutboxItem], flush: bool) -> tuple[list[Batch[OutboxItem]], int]:
        """Release failure records (nothing to send), hold back records whose run's spans were
        not forwarded yet, and send each of the rest alone."""
        failed = [item for item in items if item.record.score is None]
        if failed:
            await self._backlog.release(failed)
            self._count("skipped_failed", len(failed))
        ready, early = await self._gate.split([item for item in items if item.record.score is not None])
        if early:
            await self._backlog.keep(early, self._gate.hold_s)
        await self.refresh_gauge(force=not ready)
        return [Batch([item]) for item in ready], len(failed)

    async def send(self, batch: Batch[OutboxItem]) -> Answer:
        """Send the record through the backend's client."""
        if self._session is None:
            raise RuntimeError(f"the {self.name} sink is not open")
        return await self._client.send(self._session, batch.items[0].record)

    async def settled(self, items: list[OutboxItem], outcome: str, answer: Answer) -> None:
        """Count the records (``tracescore_sink_sent_total``); log those given up."""
        if outcome == "dropped_span_missing":
            now = time.time()
            for item in items:
                logger.warning("%s sink: dropping score %s: the backend still has no %s after %.0fs", self.name,
                               item.record.key, missing_target(item.record), now - (item.waiting_since or now))
        self._count(outcome, len(items))
        if outcome != "span_missing":
            await self.refresh_gauge(force=True)

    def describe(self, items: list[OutboxItem]) -> str:
        """``score <key>`` or ``3 scores``."""
        return f"score {items[0].record.key}" if len(items) == 1 else f"{len(items)} scores"

    def _count(self, outcome: str, n: int) -> None:
        if n:
            self._metrics.sink_sent.labels(sink=self.name, outcome=outcome).inc(n)

    async def refresh_gauge(self, force: bool = False) -> None:
        """Set ``tracescore_sink_backlog_records`` (at most every 2 s unless ``force``)."""
        if force or time.monotonic() - self._gauge_at >= 2.0:
            self._gauge_at = time.monotonic()
            self._metrics.sink_backlog.labels(sink=self.name).set(await self._backlog.outbox.backlog())


class SinkSender(SendLoop[OutboxItem]):
    """Sends one sink's backlog.

    Args:
        client: the backend's score API.
        outbox: the sink's outbox in the store.
        cfg: the sink's section (span wait, backoff bounds, timeout).
        metrics: the service's instruments.
        batch: records read from the outbox per round.
        concurrency: requests in flight at once.
        poll_s: how often an idle sender looks for due records.
        forwarded: the forward log, when received spans are forwarded: a record waits until
            its run's spans were forwarded.
        hold_s: how long such a record waits before it is looked at again.
    """

    def __init__(
        self, client: SinkClient, outbox: SinkOutbox, cfg: SinkConfig, metrics: Metrics, *,
        batch: int = 64, concurrency: int = 8, poll_s: float = 0.5, forwarded: ForwardLog | None = None,
        hold_s: float = 1.0,
    ) -> None:
        self.name = client.name
        backlog = SinkBacklog(outbox)
        course = SinkCourse(client, backlog, cfg, metrics, ForwardGate(forwarded, hold_s))
        url = without_password(cfg.url())
        watch = SendWatch(f"sink {client.name}", url, "the scores are kept in the sink's outbox and retried "
                          f"(backoff up to {cfg.max_backoff_s:g} s)", unit="scores", what=f"the {client.name} sink ({url})")
        backoff = Backoff(cfg.min_backoff_s, cfg.max_backoff_s)
        super().__init__(backlog, course, watch, metrics, component=f"sink_{client.name}", logger=logger,
                         batch=batch, concurrency=concurrency, backoff=backoff, poll_s=poll_s,
                         wait_s=cfg.span_wait_s)
