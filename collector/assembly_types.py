"""Types the trace buffer stores and returns (shared by `assembly` and the store backends)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TraceChunk:
    """The part of one OTLP request that belongs to one trace, serialised.

    ``data`` is a ``TracesData`` (signal ``spans``) or ``LogsData`` (signal ``logs``)
    protobuf holding only that trace's spans or log records, with their resource and scope.
    ``has_run_candidate``: a span may be a run or LLM span; ``has_root``: a span without a
    parent (a trace's root usually ends, and is exported, last).

    Example:
        >>> TraceChunk(b"\\x01" * 16, "spans", b"", span_count=0, has_run_candidate=False).signal
        'spans'
    """

    trace_id: bytes
    signal: Literal["spans", "logs"] | str
    data: bytes
    span_count: int
    has_run_candidate: bool
    has_root: bool = False


@dataclass(frozen=True)
class AppendResult:
    """What a buffer append had to give up to stay within its bounds.

    Example:
        >>> AppendResult(evicted_traces=1, dropped_spans=0).evicted_traces
        1
    """

    evicted_traces: int = 0
    dropped_spans: int = 0
