"""Score export: outbox records -> child spans of the scored spans -> the OTel SDK's OTLP exporter.

A record leaves the outbox only after the exporter returned SUCCESS; on failure its
batch is deferred with exponential backoff, so a backend outage delays scores and never
loses them. Each record's score span id is derived from the score's key and its outcome
(`collector.common.ids.score_span_id_for`), so a re-export after an ambiguous failure, a second
replica or a backfill that scores alike sends the same span again, never a second score. The span itself is
built by `collector.export.evaluation` (resource per record: the OTLP encoder groups a batch
from many services into one resource each).
The blocking SDK exporter runs on a worker thread with instrumentation suppressed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from collector.common.aio import cancel_and_wait, wait_event
from collector.common.metrics import Metrics
from collector.common.types import ScoreRecord
from collector.config import ExportConfig
from collector.export.evaluation import SpanTime, build_span
from collector.export.grpc_spans import EncodedSpanExporter, EncodedSpans
from collector.export.outage import OutageWatch, describe_error
from collector.export.sdk_errors import SdkExportErrors
from collector.store.interface import ForwardLog, Outbox

logger = logging.getLogger(__name__)
T = TypeVar("T")

def make_span_exporter(cfg: ExportConfig) -> SpanExporter | None:
    """The SDK's OTLP span exporter for ``[export]`` (None without an endpoint).

    Example:
        >>> make_span_exporter(ExportConfig()) is None
        True
        >>> type(make_span_exporter(ExportConfig(endpoint="http://127.0.0.1:4318",
        ...     protocol="http/protobuf"))).__module__
        'opentelemetry.exporter.otlp.proto.http.trace_exporter'
    """
    if not cfg.endpoint:
        return None
    headers = cfg.header_values() or None
    if cfg.protocol == "grpc":
        # gRPC metadata keys must be lowercase.
        headers = {k.lower(): v for k, v in cfg.header_values().items()} or None
        from collector.export.grpc_spans import EncodedSpanExporter

        return EncodedSpanExporter(
            endpoint=cfg.endpoint, insecure=not cfg.endpoint.startswith("https://"),
            headers=headers, timeout=cfg.timeout_s,
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return Http(endpoint=http_url(cfg.endpoint, "/v1/traces"), headers=headers, timeout=cfg.timeout_s)


_SIGNAL_PATHS = ("/v1/traces", "/v1/logs", "/v1/metrics")


def http_url(endpoint: str, path: str) -> str:
    """The OTLP/HTTP URL of one signal (``path``: ``/v1/traces``, ``/v1/logs`` or ``/v1/metrics``).

    The endpoint is a base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is in the OpenTelemetry
    specification: the signal's path is appended to whatever path it has (Langfuse's
    ``.../api/public/otel``). An endpoint that already ends in a signal path is taken as
    that signal's URL, and the other signals use the same base.

    Example:
        >>> http_url("http://h:4318", "/v1/traces"), http_url("http://h/api/public/otel/", "/v1/traces")
        ('http://h:4318/v1/traces', 'http://h/api/public/otel/v1/traces')
        >>> http_url("http://h:6006/v1/traces", "/v1/traces"), http_url("http://h:6006/v1/traces", "/v1/logs")
        ('http://h:6006/v1/traces', 'http://h:6006/v1/logs')
    """
    base = (endpoint if "://" in endpoint else f"http://{endpoint}").rstrip("/")
    for signal_path in _SIGNAL_PATHS:
        if base.endswith(signal_path):
            base = base[: -len(signal_path)]
            break
    return f"{base}{path}"


def _export_suppressed(exporter: SpanExporter, spans: list[ReadableSpan]) -> SpanExportResult:
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        return exporter.export(spans)
    finally:
        otel_context.detach(token)


class ScoreExporter:
    """Drains the outbox into the trace backend.

    Args:
        outbox: where records wait.
        exporter: the SDK span exporter; None logs and drops records (no endpoint set).
        metrics: the service's instruments.
        max_batch: records per export call.
        batch_delay_s: after an export that emptied the outbox (or once woken from idle), how
            long the loop waits before the next one, so that the records of the jobs finishing
            meanwhile share its call (as the SDK's batch processor's schedule delay does; an
            export call costs far more than a record in it). A full batch goes at once.
        on_exported: called on a worker thread with the records the backend accepted
            (the optional log and metric copies).
        backoff_s: first retry delay after a failed export (doubles up to ``max_backoff_s``).
        span_time: ``anchored`` or ``actual`` (see `collector.export.evaluation`).
        forwarded: the forward log, when received spans are forwarded: a record waits until
            the log was sent through its ``forward_mark`` (the run's own spans went first).
        hold_s: how long such a record waits before it is looked at again.
        destination: the endpoint and protocol, for the log: an outage is one warning naming
            it and the cause (what the SDK exporter logged), and one more when it is over.
    """

    def __init__(
        self, outbox: Outbox, exporter: SpanExporter | None, metrics: Metrics, *,
        max_batch: int = 256, batch_delay_s: float = 0.0, backoff_s: float = 0.5, max_backoff_s: float = 30.0,
        poll_s: float = 0.5,
        on_exported: Callable[[list[ScoreRecord]], None] | None = None, span_time: SpanTime = "anchored",
        forwarded: ForwardLog | None = None, hold_s: float = 1.0, destination: str = "the export endpoint",
    ) -> None:
        self._forwarded = forwarded
        self._hold = hold_s
        self._span_time: SpanTime = span_time
        self._on_exported = on_exported
        # Own thread: the default executor runs user scorers' sync steps, which must not delay exports.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracescore-export")
        self._sdk_errors = SdkExportErrors("tracescore-export")
        self._outage = OutageWatch(f"score export to {destination}", "the scores are kept in the outbox and "
                                   f"retried (backoff up to {max_backoff_s:g} s)", unit="score records")
        self._outbox = outbox
        self._exporter = exporter
        self._metrics = metrics
        self._max_batch = max_batch
        self._batch_delay = batch_delay_s
        self._backoff = backoff_s
        self._max_backoff = max_backoff_s
        self._poll = poll_s
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._stop_now: asyncio.Event | None = None  # ends a batch delay when shutting down

    def notify(self) -> None:
        """Wake the export loop (new records were written).

        Example:
            >>> ScoreExporter(None, None, Metrics()).notify()  # type: ignore[arg-type]
        """
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        """Start the export loop (records left by a previous process are exported first)."""
        if self._exporter is None:
            logger.warning("no export endpoint configured (export.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT):"
                           " scores are not exported, only logged at INFO (-v)")
        self._sdk_errors.install()
        self._wake, self._stop_now = asyncio.Event(), asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="tracescore-export")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Flush the outbox for up to ``timeout`` seconds, then stop; safe twice."""
        if self._task is None:
            return
        # Stop at a batch boundary: cancelling mid-export would re-send an exported batch.
        self._stopping = True
        self.notify()
        if self._stop_now is not None:
            self._stop_now.set()
        try:
            async with asyncio.timeout(timeout):
                await self._task
                # Records held back until their run's spans were forwarded are taken too: the
                # forwarder stopped before this flush, so what it sent is final now.
                while await self.export_batch(within_s=self._hold) > 0:
                    pass
        except TimeoutError:
            logger.warning("outbox not flushed within %.1fs; the rest is exported after restart", timeout)
            await cancel_and_wait([self._task])
        self._task = None
        if self._exporter is not None:
            await self._in_thread(self._exporter.shutdown)
        await asyncio.to_thread(self._pool.shutdown, True)
        self._sdk_errors.remove()

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _loop(self) -> None:
        wake, stop_now = self._wake or asyncio.Event(), self._stop_now or asyncio.Event()
        while not self._stopping:
            try:
                sent = await self.export_batch()
            except Exception:
                self._metrics.errors.labels(component="export").inc()
                logger.exception("score export failed unexpectedly")
                sent = 0
            if sent <= 0 and not self._stopping:
                await wait_event(wake, self._poll)
                wake.clear()
            if 0 <= sent < self._max_batch and self._batch_delay and not self._stopping:
                await wait_event(stop_now, self._batch_delay)  # the records of the jobs finishing meanwhile share one call

    async def export_batch(self, within_s: float = 0.0) -> int:
        """Export one batch of records due now (or within ``within_s``); returns records exported
        (0: nothing due, -1: the export failed)."""
        items = list(await self._outbox.pending(self._max_batch, within_s) if within_s
                     else await self._outbox.pending(self._max_batch))
        if items and self._forwarded is not None:
            state = await self._forwarded.forward_state()
            early = [item.item_id for item in items if not state.caught_up(item.record.forward_mark)]
            if early:  # the run's own spans are still on their way to the backend
                await self._outbox.defer(early, self._hold)
                items = [item for item in items if state.caught_up(item.record.forward_mark)]
        if not items:
            return 0
        ids = [item.item_id for item in items]
        if self._exporter is None:
            for item in items:
                rec = item.record
                logger.info("score %s on trace %s span %s: %s %s", rec.scorer_id, rec.trace_id, rec.span_id,
                            rec.score if rec.error_type is None else rec.error_type, rec.reason or "")
            await self._outbox.release(ids)
            return len(items)
        unexportable: list[ScoreRecord] = []

        def cannot_export(record: ScoreRecord, err: Exception) -> None:
            logger.error("dropping unexportable score record %s", record.key, exc_info=err)
            unexportable.append(record)

        batch: Any
        if isinstance(self._exporter, EncodedSpanExporter):  # the spans are encoded here
            batch = EncodedSpans.encode([item.record for item in items], self._span_time, cannot_export)
        else:
            batch = []
            for item in items:
                try:
                    batch.append(build_span(item.record, self._span_time))
                except (ValueError, TypeError) as err:
                    cannot_export(item.record, err)
        if unexportable:  # such a record would block the outbox forever: it is dropped
            dropped = {id(record) for record in unexportable}
            gone = [item.item_id for item in items if id(item.record) in dropped]
            self._metrics.errors.labels(component="export").inc(len(gone))
            await self._outbox.release(gone)
            items = [item for item in items if id(item.record) not in dropped]
        if not items:
            return 0
        ids = [item.item_id for item in items]
        cause = None
        try:
            result = await self._in_thread(_export_suppressed, self._exporter, batch)
        except Exception as err:
            logger.debug("span exporter raised", exc_info=True)
            result, cause = SpanExportResult.FAILURE, describe_error(err)
        if result is SpanExportResult.SUCCESS:
            self._sdk_errors.take()  # what it said while retrying within the call is no outage
            if (line := self._outage.recovered()) is not None:
                logger.warning("%s", line)  # a warning as the outage's was
            await self._outbox.release(ids)
            for item in items:
                self._metrics.child(self._metrics.scores_exported, item.record.scorer_id).inc()
            if self._on_exported is not None:
                try:
                    await self._in_thread(self._on_exported, [item.record for item in items])
                except Exception:
                    logger.exception("optional score copies failed")
            return len(items)
        attempts = max(item.attempts for item in items)
        delay = min(self._max_backoff, self._backoff * 2**attempts) * random.uniform(0.8, 1.2)
        self._metrics.export_failures.inc()
        cause = cause or self._sdk_errors.take() or "the span exporter reported a failure"
        if (line := self._outage.failed(cause, requests=len(items))) is not None:
            logger.warning("%s", line)
        else:
            logger.debug("score export failed again (%s); %d records retried in %.1fs", cause, len(items), delay)
        await self._outbox.defer(ids, delay)
        return -1
