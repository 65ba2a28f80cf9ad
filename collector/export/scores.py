"""Score export: outbox records -> child spans of the scored spans -> the export endpoint over OTLP.

The `ScoreExporter` is the durable senders' one loop (`collector.export.send.loop.SendLoop`)
over the outbox: a batch of records is encoded as one OTLP export request
(`collector.export.evaluation.encode_spans`, one resource entry per distinct resource) and
sent by the same client as forwarding (`collector.export.send.otlp.OtlpClient`), its answer
read as every sender reads it (`collector.export.send.answers`). A record leaves the outbox
only once the backend took it: an outage, or an answer a configuration change cures (an
unknown experiment, credentials refused), defers it with exponential backoff, shown by
``tracescore status`` with the backend's message, so scores are delayed, never lost; a batch
refused for good is sent again record by record, and a record refused alone is dropped,
counted and logged. Each record's score span id is derived from the score's key and its
outcome (`collector.common.ids.score_span_id_for`), so a re-export after an ambiguous failure, a
second replica or a backfill that scores alike sends the same span again, never a second score.

With forwarding on, a record waits until the forward log was sent through its
``forward_mark``: the run's own spans reach the backend before its scores.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from collector.common.metrics import Metrics
from collector.common.types import OutboxItem, ScoreRecord
from collector.config import ExportConfig
from collector.export.evaluation import SpanTime, encode_spans
from collector.export.send.answers import Answer
from collector.export.send.backlogs import ForwardGate, OutboxBacklog
from collector.export.send.loop import Backoff, Batch, SendLoop
from collector.export.send.otlp import OtlpClient
from collector.export.send.watch import SendWatch
from collector.store.interface import ForwardLog, Outbox

logger = logging.getLogger(__name__)


class ScoreCourse:
    """How score records are sent: their evaluation spans, encoded as one OTLP request per
    batch (or, without an endpoint, logged at INFO and released).

    Args:
        cfg: the ``[export]`` section.
        backlog: the outbox (records held back are deferred in it).
        metrics: the service's instruments.
        span_time: ``anchored`` or ``actual`` (`collector.export.evaluation`).
        gate: holds a record back until its run's spans were forwarded.
        on_exported: called on a worker thread with the records the backend accepted.
    """

    def __init__(self, cfg: ExportConfig, backlog: OutboxBacklog, metrics: Metrics, span_time: SpanTime,
                 gate: ForwardGate, on_exported: Callable[[list[ScoreRecord]], None] | None) -> None:
        self._client = OtlpClient(cfg) if cfg.endpoint else None
        self._backlog = backlog
        self._metrics = metrics
        self._span_time: SpanTime = span_time
        self._gate = gate
        self._on_exported = on_exported
        # Own thread: the default executor runs user scorers' sync steps, which must not delay exports.
        self._pool: ThreadPoolExecutor | None = None

    async def open(self) -> None:
        """Open the OTLP client (and the thread the optional copies are made on)."""
        if self._client is None:
            logger.warning("no export endpoint configured (export.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT):"
                           " scores are not exported, only logged at INFO (-v)")
        else:
            await self._client.open()
        if self._on_exported is not None and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracescore-export")

    async def close(self) -> None:
        """Close the OTLP client and the thread."""
        if self._client is not None:
            await self._client.close()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.to_thread(pool.shutdown, True)

    async def prepare(self, items: list[OutboxItem], flush: bool) -> tuple[list[Batch[OutboxItem]], int]:
        """Hold back records whose run's spans were not forwarded yet, drop those that cannot
        become a span (logged, counted), and encode the rest as one request."""
        items, early = await self._gate.split(items)
        if early:  # the run's own spans are still on their way to the backend
            await self._backlog.keep(early, self._gate.hold_s)
        if not items:
            return [], 0
        if self._client is None:
            for item in items:
                rec = item.record
                logger.info("score %s on trace %s span %s: %s %s", rec.scorer_id, rec.trace_id, rec.span_id,
                            rec.score if rec.error_type is None else rec.error_type, rec.reason or "")
            await self._backlog.release(items)
            return [], len(items)
        unexportable: set[int] = set()

        def cannot_export(record: ScoreRecord, err: Exception) -> None:
            logger.error("dropping unexportable score record %s", record.key, exc_info=err)
            unexportable.add(id(record))

        request = encode_spans([item.record for item in items], self._span_time, cannot_export)
        if unexportable:  # such a record would block the outbox forever: it is dropped
            gone = [item for item in items if id(item.record) in unexportable]
            self._metrics.errors.labels(component="export").inc(len(gone))
            await self._backlog.release(gone)
            items = [item for item in items if id(item.record) not in unexportable]
        batches = [Batch(items, request.SerializeToString())] if items else []
        return batches, len(unexportable)

    async def send(self, batch: Batch[OutboxItem]) -> Answer:
        """The batch's request (encoded again for a batch cut out of a refused one)."""
        assert self._client is not None  # prepare sends nothing without an endpoint
        body = batch.payload
        if body is None:
            body = encode_spans([item.record for item in batch.items], self._span_time).SerializeToString()
        return await self._client.export("traces", body)

    async def settled(self, items: list[OutboxItem], outcome: str, answer: Answer) -> None:
        """Count exported scores per scorer and make their optional copies; count failed attempts."""
        if outcome == "sent":
            for item in items:
                self._metrics.child(self._metrics.scores_exported, item.record.scorer_id).inc()
            if self._on_exported is not None and self._pool is not None:
                try:
                    await asyncio.get_running_loop().run_in_executor(self._pool, self._on_exported,
                                                                     [item.record for item in items])
                except Exception:
                    logger.exception("optional score copies failed")
        elif outcome == "retried":
            self._metrics.export_failures.inc()
        elif outcome == "rejected":
            self._metrics.export_failures.inc()
            self._metrics.errors.labels(component="export").inc(len(items))

    def describe(self, items: list[OutboxItem]) -> str:
        """``3 score record(s)``."""
        return f"{len(items)} score record(s)"


class ScoreExporter(SendLoop[OutboxItem]):
    """Drains the outbox into the trace backend.

    Args:
        outbox: where records wait.
        cfg: the ``[export]`` section: endpoint (none: records are logged at INFO and dropped),
            protocol, headers, timeout, ``max_batch``, ``batch_delay_s``, ``max_backoff_s``, ``span_time``.
        metrics: the service's instruments.
        max_batch: records per request (default ``cfg.max_batch``).
        batch_delay_s: after an export that emptied the outbox (or once woken from idle), how
            long the loop waits before the next one, so that the records of the jobs finishing
            meanwhile share its request (as the SDK's batch processor's schedule delay does; a
            request costs far more than a record in it); a full batch goes at once (default
            ``cfg.batch_delay_s``).
        backoff_s: first retry delay after a failed export (doubles up to ``cfg.max_backoff_s``).
        poll_s: how often an idle exporter looks at the outbox (`notify` wakes it sooner).
        on_exported: called on a worker thread with the records the backend accepted
            (the optional log and metric copies).
        forwarded: the forward log, when received spans are forwarded: a record waits until
            the log was sent through its ``forward_mark`` (the run's own spans went first).
        hold_s: how long such a record waits before it is looked at again.

    Example:
        >>> ScoreExporter(None, ExportConfig(), Metrics()).notify()  # type: ignore[arg-type]
    """

    def __init__(
        self, outbox: Outbox, cfg: ExportConfig, metrics: Metrics, *, max_batch: int | None = None,
        batch_delay_s: float | None = None, backoff_s: float = 0.5, poll_s: float = 0.5,
        on_exported: Callable[[list[ScoreRecord]], None] | None = None, forwarded: ForwardLog | None = None,
        hold_s: float = 1.0,
    ) -> None:
        backlog = OutboxBacklog(outbox, flush_within_s=hold_s)
        course = ScoreCourse(cfg, backlog, metrics, cfg.span_time, ForwardGate(forwarded, hold_s), on_exported)
        watch = SendWatch("export", cfg.destination() if cfg.endpoint else "(no endpoint)",
                          f"the scores are kept in the outbox and retried (backoff up to {cfg.max_backoff_s:g} s)",
                          unit="score records", what=f"score export to {cfg.destination()}")
        batch = max_batch or cfg.max_batch
        super().__init__(backlog, course, watch, metrics, component="export", logger=logger, batch=batch,
                         backoff=Backoff(backoff_s, cfg.max_backoff_s), poll_s=poll_s,
                         batch_delay_s=cfg.batch_delay_s if batch_delay_s is None else batch_delay_s)

    async def export_batch(self, within_s: float = 0.0) -> int:
        """One round (`SendLoop.round`; ``within_s`` > 0: a flush, taking records held back too)."""
        return await self.round(flush=within_s > 0)
