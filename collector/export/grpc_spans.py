"""The SDK's OTLP/gRPC span exporter, fed evaluation spans already encoded as protobuf.

The SDK's exporter takes ``ReadableSpan`` objects and encodes them in Python; for evaluation
spans `collector.export.evaluation.encode_span` builds the same protobuf messages directly,
at half the CPU. `EncodedSpanExporter` is the SDK's exporter (its channel, TLS, headers,
compression, retries and timeout all kept) whose translation step passes such a batch through;
``ReadableSpan`` batches are encoded by the SDK as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.common.types import ScoreRecord
from collector.export.evaluation import SpanTime, encode_spans


class EncodedSpans(Sequence[Span]):
    """A batch of encoded spans with the export request that carries them (what the exporter sends).

    Example:
        >>> recs = [ScoreRecord(str(i), "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q", service="bot") for i in range(3)]
        >>> batch = EncodedSpans.encode(recs)
        >>> len(batch), len(batch.request.resource_spans), batch[0].name
        (3, 1, 'evaluation Q')
    """

    def __init__(self, spans: list[Span], request: ExportTraceServiceRequest) -> None:
        self._spans = spans
        self.request = request

    @classmethod
    def encode(cls, records: Sequence[ScoreRecord], span_time: SpanTime = "anchored",
               on_error: Callable[[ScoreRecord, Exception], None] | None = None) -> EncodedSpans:
        """The batch of ``records``' evaluation spans, each built in its place in the request
        (`collector.export.evaluation.encode_spans`; ``on_error`` as there). Its spans are the
        request's, resource by resource.

        Example:
            >>> recs = [ScoreRecord(str(i), "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q", service=s)
            ...         for i, s in enumerate(["a", "b", "a"])]
            >>> batch = EncodedSpans.encode(recs)
            >>> len(batch), [span.span_id.hex() == "ef" * 8 for span in batch]
            (3, [True, True, True])
        """
        request = encode_spans(records, span_time, on_error)
        spans = [span for entry in request.resource_spans for scope in entry.scope_spans for span in scope.spans]
        return cls(spans, request)

    def __len__(self) -> int:
        return len(self._spans)

    def __getitem__(self, index: Any) -> Any:
        return self._spans[index]

    def __iter__(self) -> Iterator[Span]:
        return iter(self._spans)


class EncodedSpanExporter(OTLPSpanExporter):
    """The SDK's OTLP/gRPC span exporter; an `EncodedSpans` batch is sent as it is encoded."""

    def _translate_data(self, data: Any) -> ExportTraceServiceRequest:
        if isinstance(data, EncodedSpans):
            return data.request
        return super()._translate_data(data)
