"""The hand-off from receivers to the pipeline: `TraceConsumer` (answered with
`collector.common.types.Accepted`), and the daemon's own, `Pipeline`.

Returning from ``consume_*`` means the data is the pipeline's (durably stored); raising a
`collector.common.errors.CollectorError` means it was refused, retryably or not.
"""

from __future__ import annotations

from typing import Protocol

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.common.types import Accepted


class TraceConsumer(Protocol):
    """What receivers hand requests to (`Pipeline` in the daemon)."""

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        """Take a trace request; ``raw``: its protobuf encoding when the receiver has it (None otherwise)."""
        ...

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted:
        """Take a logs request (trace-linked log records)."""
        ...


class Wakeable(Protocol):
    """What is woken after each accepted request (the forwarder: `collector.export.forward.Forwarder`)."""

    def notify(self) -> None:
        """Wake up: there is new data to send."""
        ...


class Pipeline:
    """The `TraceConsumer` receivers call: assembly (``assembler``) stores each request durably
    (and, with forwarding on, in the forward log in the same step), then the forwarder is woken.

    Example:
        >>> import asyncio
        >>> class Assembler:
        ...     async def consume_traces(self, request, raw=None): return Accepted(2)
        ...     async def consume_logs(self, request): return Accepted(1)
        >>> class Forwarder:
        ...     woken = 0
        ...     def notify(self): self.woken += 1
        >>> forwarder = Forwarder()
        >>> asyncio.run(Pipeline(Assembler(), forwarder).consume_traces(ExportTraceServiceRequest())).accepted
        2
        >>> forwarder.woken
        1
    """

    def __init__(self, assembler: TraceConsumer, forwarder: Wakeable | None) -> None:
        self._assembler = assembler
        self._forwarder = forwarder

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        """Store a trace request (``raw``: its protobuf encoding, if known) for scoring and forwarding."""
        result = await self._assembler.consume_traces(request, raw)
        if self._forwarder is not None:
            self._forwarder.notify()
        return result

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted:
        """Store a logs request for scoring and forwarding."""
        result = await self._assembler.consume_logs(request)
        if self._forwarder is not None:
            self._forwarder.notify()
        return result
