"""A local OTLP/gRPC trace backend for ``tracescore demo``: it receives what the daemon exports.

The daemon exports each score as a span ``evaluation <scorer name>`` carrying a
``gen_ai.evaluation.result`` event; the sink turns those into `ReceivedScore` values, in
arrival order, and counts every other span (the agent spans the daemon forwards).

Example:
    >>> import asyncio
    >>> async def roundtrip():
    ...     sink = await ScoreSink().start()
    ...     try:
    ...         return sink.endpoint.startswith("http://127.0.0.1:"), sink.received
    ...     finally:
    ...         await sink.stop()
    >>> asyncio.run(roundtrip())
    (True, [])
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.commands.demo.replay import attributes
from collector.common.aio import wait_event
from collector.export.evaluation import (
    ERROR_TYPE,
    EVENT_NAME,
    GEN_AI_EVALUATION_EXPLANATION,
    GEN_AI_EVALUATION_NAME,
    GEN_AI_EVALUATION_SCORE_LABEL,
    GEN_AI_EVALUATION_SCORE_VALUE,
    TS_ERROR_MESSAGE,
    TS_SCORED_SERVICE,
    TS_SCORER_ID,
)

__all__ = ["ReceivedScore", "ScoreSink", "score_from_span"]


@dataclass(frozen=True)
class ReceivedScore:
    """One score span as the backend received it.

    ``trace_id`` / ``span_id`` (lowercase hex) name the scored span (the score span's parent).

    Example:
        >>> ReceivedScore("ab" * 16, "cd" * 8, "q", "Quality", 0.5).failed
        False
    """

    trace_id: str
    span_id: str
    scorer_id: str
    scorer_name: str
    score: float | None
    label: str | None = None
    reason: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    service: str | None = None
    session_id: str | None = None  # a conversation's score: its session (SPEC §7)

    @property
    def failed(self) -> bool:
        """Whether the scorer failed (the span carries ``error.type``).

        Example:
            >>> ReceivedScore("ab" * 16, "cd" * 8, "q", "Q", None, error_type="ValueError").failed
            True
        """
        return self.error_type is not None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def score_from_span(span: Span) -> ReceivedScore | None:
    """The score a daemon-exported span carries, or None for any other span.

    Example:
        >>> span = Span(name="evaluation Q", trace_id=b"\\x01" * 16, parent_span_id=b"\\x02" * 8)
        >>> event = span.events.add(name="gen_ai.evaluation.result")
        >>> event.attributes.add(key="gen_ai.evaluation.score.value").value.double_value = 0.5
        >>> event.attributes.add(key="tracescore.scorer.id").value.string_value = "q"
        >>> score = score_from_span(span)
        >>> (score.scorer_id, score.score, score.span_id)
        ('q', 0.5, '0202020202020202')
        >>> score_from_span(Span(name="chat gpt-4o-mini")) is None
        True
    """
    event = next((e for e in span.events if e.name == EVENT_NAME), None)
    if event is None or not span.name.startswith("evaluation "):
        return None
    attrs = attributes(event.attributes)
    value = attrs.get(GEN_AI_EVALUATION_SCORE_VALUE)
    return ReceivedScore(
        trace_id=span.trace_id.hex(),
        span_id=span.parent_span_id.hex(),
        scorer_id=str(attrs.get(TS_SCORER_ID, "")),
        scorer_name=str(attrs.get(GEN_AI_EVALUATION_NAME, span.name.removeprefix("evaluation "))),
        score=None if value is None else float(value),
        label=_text(attrs.get(GEN_AI_EVALUATION_SCORE_LABEL)),
        reason=_text(attrs.get(GEN_AI_EVALUATION_EXPLANATION)),
        error_type=_text(attrs.get(ERROR_TYPE)),
        error_message=_text(attrs.get(TS_ERROR_MESSAGE)),
        service=_text(attrs.get(TS_SCORED_SERVICE)),
        session_id=_text(attributes(span.attributes).get("session.id")),
    )


class ScoreSink:
    """An OTLP/gRPC ``TraceService`` on 127.0.0.1 that collects the scores it is sent.

    Args:
        host: the address to listen on.
        port: the port (0: a free one, see `port` after `start`).

    Example:
        >>> sink = ScoreSink()
        >>> (sink.received, sink.forwarded_spans)
        ([], 0)
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.received: list[ReceivedScore] = []
        self.forwarded_spans = 0
        self._arrived = asyncio.Event()
        self._seen = 0
        self._server: grpc.aio.Server | None = None

    @property
    def endpoint(self) -> str:
        """The endpoint to export to (``http://host:port``, plaintext gRPC).

        Example:
            >>> ScoreSink(port=4999).endpoint
            'http://127.0.0.1:4999'
        """
        return f"http://{self.host}:{self.port}"

    def _consume(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    score = score_from_span(span)
                    if score is None:
                        self.forwarded_spans += 1
                    else:
                        self.received.append(score)
        self._arrived.set()

    async def start(self) -> ScoreSink:
        """Listen; returns the sink itself."""
        sink = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            async def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC name)
                sink._consume(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        self.port = server.add_insecure_port(f"{self.host}:{self.port}")
        await server.start()
        self._server = server
        return self

    async def arrivals(self, timeout: float) -> list[ReceivedScore]:  # noqa: ASYNC109 (a poll interval)
        """The scores received since the previous call; when there are none yet, waits up to
        ``timeout`` seconds for some (an empty list: nothing came).

        Example:
            >>> asyncio.run(ScoreSink().arrivals(timeout=0.01))
            []
        """
        if self._seen == len(self.received):
            self._arrived.clear()
            await wait_event(self._arrived, timeout)
        new = self.received[self._seen:]
        self._seen = len(self.received)
        return new

    async def stop(self) -> None:
        """Stop listening (idempotent).

        Example:
            >>> asyncio.run(ScoreSink().stop())
        """
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop(grace=0.5)
