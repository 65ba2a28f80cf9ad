"""`SdkExportErrors`: what the OpenTelemetry SDK's OTLP span exporters say when an export fails.

The SDK's exporters return only SUCCESS or FAILURE; the cause (the gRPC status, the HTTP
code and body) goes to their own loggers, one WARNING per internal retry. For the score
exporter, those records are the cause of an outage, which `collector.export.outage` states
once: the filter keeps the latest one from the exporter's own thread as the cause and
turns the SDK's lines into DEBUG lines of tracescore's (other threads' records pass as they were).
"""

from __future__ import annotations

import logging
import threading

from collector.export.outage import one_line

__all__ = ["SDK_EXPORTER_LOGGERS", "SdkExportErrors"]

SDK_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)
"""The loggers of the SDK's OTLP span exporters (gRPC and HTTP)."""

logger = logging.getLogger(__name__)


class SdkExportErrors(logging.Filter):
    """Collects the SDK span exporters' warnings and errors logged on threads named
    ``thread_prefix...``; `take` returns the latest one.

    Example:
        >>> errors = SdkExportErrors("doctest-export")
        >>> errors.install()
        >>> def export() -> None:
        ...     logging.getLogger(SDK_EXPORTER_LOGGERS[0]).error("Failed to export traces to %s, error code: %s",
        ...                                               "127.0.0.1:4317", "StatusCode.UNAVAILABLE")
        >>> worker = threading.Thread(target=export, name="doctest-export_0")
        >>> worker.start(); worker.join()
        >>> errors.take()
        'Failed to export traces to 127.0.0.1:4317, error code: StatusCode.UNAVAILABLE'
        >>> errors.take() is None  # taken
        True
        >>> errors.remove()
    """

    def __init__(self, thread_prefix: str) -> None:
        super().__init__()
        self._prefix = thread_prefix
        self._latest: str | None = None
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep a WARNING or worse from the exporter's thread as the cause and log it at DEBUG
        instead; let every other record through."""
        if record.levelno < logging.WARNING or not (record.threadName or "").startswith(self._prefix):
            return True
        message = one_line(record.getMessage())
        with self._lock:
            self._latest = message
        logger.debug("span exporter: %s", message)
        return False

    def take(self) -> str | None:
        """The latest cause collected since the last `take` (None when there was none)."""
        with self._lock:
            latest, self._latest = self._latest, None
        return latest

    def install(self) -> None:
        """Start filtering the SDK exporters' loggers."""
        for name in SDK_EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(self)

    def remove(self) -> None:
        """Stop filtering (safe when not installed)."""
        for name in SDK_EXPORTER_LOGGERS:
            logging.getLogger(name).removeFilter(self)
