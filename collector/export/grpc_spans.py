"""The SDK's OTLP/gRPC span exporter, fed evaluation spans already encoded as protobuf.

The SDK's exporter takes ``ReadableSpan`` objects and encodes them in Python; for evaluation
spans `collector.export.evaluation.encode_span` builds the same protobuf messages directly,
at half the CPU. `EncodedSpanExporter` is the SDK's exporter (its channel, TLS, headers,
compression, retries and timeout all kept) whose translation step passes such a batch through;
``ReadableSpan`` batches are encoded by the SDK as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.export.evaluation import export_request
from collector.types import ScoreRecord


class EncodedSpans(Sequence[Span]):
    """A batch of encoded spans with the export request that carries them (what the exporter sends).

    Example:
        >>> from collector.export.evaluation import encode_span
        >>> recs = [ScoreRecord(str(i), "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q", service="bot") for i in range(3)]
        >>> batch = EncodedSpans.of(recs, [encode_span(r) for r in recs])
        >>> len(batch), len(batch.request.resource_spans), batch[0].name
        (3, 1, 'evaluation Q')
    """

    def __init__(self, spans: list[Span], request: ExportTraceServiceRequest) -> None:
        self._spans = spans
        self.request = request

    @classmethod
    def of(cls, records: Sequence[ScoreRecord], spans: list[Span]) -> EncodedSpans:
        """The batch of ``spans`` (one per record, in order), grouped by their records' resources."""
        request = export_request(records, spans)
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
