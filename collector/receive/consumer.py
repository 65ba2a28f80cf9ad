"""The hand-off from receivers to the pipeline: `TraceConsumer` and `Accepted`.

Returning from ``consume_*`` means the data is the pipeline's (durably stored); raising a
`collector.errors.CollectorError` means it was refused, retryably or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass(frozen=True)
class Accepted:
    """How much of a request was taken: items accepted and rejected (OTLP partial success).

    Example:
        >>> Accepted(10, 2, "2 spans have invalid ids").rejected
        2
    """

    accepted: int
    rejected: int = 0
    message: str = ""


class TraceConsumer(Protocol):
    """What receivers hand requests to.

    Example:
        >>> TraceConsumer.__name__
        'TraceConsumer'
    """

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        """``raw``: the request's protobuf encoding when the receiver has it (None otherwise)."""

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted: ...
