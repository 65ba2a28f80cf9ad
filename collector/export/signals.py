"""Optional copies of each score as other OTLP signals (both off by default).

* ``[export] score_logs``: the ``gen_ai.evaluation.result`` event as an OTLP log record
  (``event_name`` set, trace and span id of the scored span), sent with the SDK's OTLP
  log exporter right after the score span was accepted. Best effort: a failed log
  export is counted and logged, and never holds back or re-sends the score span.
* ``[export] score_metrics``: a histogram ``gen_ai.evaluation.score`` with the scorer
  as attribute (``gen_ai.evaluation.name``, ``tracescore.scorer.id``), exported by the
  SDK's periodic reader every ``metrics_interval_s``.

The SDK's logs API is still experimental (``opentelemetry.sdk._logs``): it is only
imported when ``score_logs`` is on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

from collector.common.types import ScoreRecord
from collector.config import ExportConfig, http_url
from collector.export.evaluation import (
    EVENT_NAME,
    SCOPE,
    TRACESCORE_RESOURCE,
    record_attributes,
    resource_of,
)

logger = logging.getLogger(__name__)


def build_log_record(record: ScoreRecord) -> Any:
    """The score as an SDK ``ReadableLogRecord`` linked to the scored span.

    Example:
        >>> rec = build_log_record(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", score=1.0))
        >>> (rec.log_record.event_name, format(rec.log_record.span_id, "016x"))
        ('gen_ai.evaluation.result', 'cdcdcdcdcdcdcdcd')
    """
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk._logs._internal import LogRecord

    parent = trace.SpanContext(int(record.trace_id, 16), int(record.span_id, 16), is_remote=True,
                               trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    log = LogRecord(timestamp=record.end_ns, observed_timestamp=record.end_ns, context=context,
                    event_name=EVENT_NAME, attributes=record_attributes(record))
    return ReadableLogRecord(log_record=log, resource=resource_of(record), instrumentation_scope=SCOPE)


class ScoreSignals:
    """Sends the optional log-record and metric copies of exported scores.

    Example:
        >>> ScoreSignals(ExportConfig()).enabled
        False
    """

    def __init__(self, cfg: ExportConfig) -> None:
        self._log_exporter: Any = None
        self._meter_provider: MeterProvider | None = None
        self._histogram: Any = None
        self.log_failures = 0
        if not cfg.endpoint:
            return
        grpc = cfg.protocol == "grpc"
        headers = {(k.lower() if grpc else k): v for k, v in cfg.header_values().items()} or None
        insecure = not cfg.endpoint.startswith("https://")
        if cfg.score_logs:
            if grpc:
                from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
                    OTLPLogExporter as GrpcLogs,
                )

                self._log_exporter = GrpcLogs(endpoint=cfg.endpoint, insecure=insecure, headers=headers,
                                              timeout=cfg.timeout_s)
            else:
                from opentelemetry.exporter.otlp.proto.http._log_exporter import (
                    OTLPLogExporter as HttpLogs,
                )

                self._log_exporter = HttpLogs(endpoint=http_url(cfg.endpoint, "/v1/logs"), headers=headers,
                                              timeout=cfg.timeout_s)
        if cfg.score_metrics:
            metric_exporter: Any
            if grpc:
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                    OTLPMetricExporter as Gm,
                )

                metric_exporter = Gm(endpoint=cfg.endpoint, insecure=insecure, headers=headers,
                                     timeout=cfg.timeout_s)
            else:
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                    OTLPMetricExporter as Hm,
                )

                metric_exporter = Hm(endpoint=http_url(cfg.endpoint, "/v1/metrics"), headers=headers,
                                     timeout=cfg.timeout_s)
            reader = PeriodicExportingMetricReader(
                metric_exporter, export_interval_millis=cfg.metrics_interval_s * 1000)
            self._meter_provider = MeterProvider(resource=TRACESCORE_RESOURCE, metric_readers=[reader])
            self._histogram = self._meter_provider.get_meter("tracescore").create_histogram(
                "gen_ai.evaluation.score", unit="1", description="Scores by scorer",
            )

    @property
    def enabled(self) -> bool:
        """Whether either copy is configured.

        Example:
            >>> ScoreSignals(ExportConfig(endpoint="http://127.0.0.1:1", score_metrics=True)).enabled
            True
        """
        return self._log_exporter is not None or self._meter_provider is not None

    def exported(self, records: Sequence[ScoreRecord]) -> None:
        """Send the copies of records whose spans were accepted (blocking: run it in a thread).

        Example:
            >>> ScoreSignals(ExportConfig()).exported([])
        """
        if self._histogram is not None:
            for rec in records:
                if rec.score is not None:
                    self._histogram.record(rec.score, {"gen_ai.evaluation.name": rec.scorer_name,
                                                       "tracescore.scorer.id": rec.scorer_id})
        if self._log_exporter is not None and records:
            from opentelemetry.sdk._logs.export import LogRecordExportResult

            try:
                result = self._log_exporter.export([build_log_record(r) for r in records])
            except Exception:
                logger.exception("score log export raised")
                result = None
            if result is not LogRecordExportResult.SUCCESS:
                self.log_failures += 1
                logger.warning("score log records not exported (%d); the score spans were", len(records))

    def shutdown(self) -> None:
        """Flush metrics and close the exporters (blocking).

        Example:
            >>> ScoreSignals(ExportConfig()).shutdown()
        """
        if self._meter_provider is not None:
            self._meter_provider.shutdown()
            self._meter_provider = None
        if self._log_exporter is not None:
            self._log_exporter.shutdown()
            self._log_exporter = None
