"""The hand-off from receivers to the pipeline: `TraceConsumer` (answered with
`collector.common.types.Accepted`).

Returning from ``consume_*`` means the data is the pipeline's (durably stored); raising a
`collector.common.errors.CollectorError` means it was refused, retryably or not.
"""

from __future__ import annotations

from typing import Protocol

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.common.types import Accepted


class TraceConsumer(Protocol):
    """What receivers hand requests to (`collector.service.Pipeline` in the daemon)."""

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        """Take a trace request; ``raw``: its protobuf encoding when the receiver has it (None otherwise)."""
        ...

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted:
        """Take a logs request (trace-linked log records)."""
        ...
