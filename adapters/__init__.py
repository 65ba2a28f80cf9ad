"""tracescore adapters: agent runs from OpenTelemetry traces of every major convention.

Decode OTLP (`spans_from_resource_spans`, `logs_from_resource_logs`, `assemble`, or the
file readers `read_trace_file` / `read_logs_file`), then `extract_runs` on each
`AssembledTrace`; `explain_trace` says, span by span, why those runs. Conventions:
OpenTelemetry GenAI (current and earlier), OpenInference (incl. the OpenAI Agents SDK),
OpenLLMetry / Traceloop, Vercel AI SDK, Mastra, pydantic-ai, Google ADK, Langfuse, MLflow's
native format; framework dialects for smolagents.
Pure functions of the trace: no I/O (except the file readers), no clock.
"""

from collections.abc import Iterable

from adapters._decode import (
    any_value_to_python,
    assemble,
    logs_from_resource_logs,
    spans_from_resource_spans,
)
from adapters._explain import RunExplanation, SpanExplanation, TraceExplanation, explain_trace
from adapters._runs import SKIP_REASONS, AgentRun, Extraction, Skip
from adapters._select import extract_runs
from adapters._trace import AssembledTrace, SpanEvent, TraceLog, TraceSpan
from adapters.otlp_files import OtlpFileError, is_logs_file, read_logs_file, read_trace_file

__all__ = [
    # decoded OTLP
    "AssembledTrace",
    "SpanEvent",
    "TraceLog",
    "TraceSpan",
    "any_value_to_python",
    "assemble",
    "logs_from_resource_logs",
    "spans_from_resource_spans",
    # files
    "OtlpFileError",
    "is_logs_file",
    "read_logs_file",
    "read_trace_file",
    # runs
    "SKIP_REASONS",
    "AgentRun",
    "Extraction",
    "Skip",
    "extract_runs",
    "is_run_candidate",
    # why those runs
    "RunExplanation",
    "SpanExplanation",
    "TraceExplanation",
    "explain_trace",
]

_MARKER_KEYS = frozenset(
    {
        "gen_ai.operation.name",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.request.model",
        "gen_ai.system",
        "gen_ai.provider.name",
        "openinference.span.kind",
        "traceloop.span.kind",
        "llm.request.type",
        "mastra.span.type",
        "pydantic_ai.all_messages",
        "all_messages_events",
        "ai.operationId",
        "gcp.vertex.agent.llm_request",
        "langfuse.observation.type",
        "mlflow.spanType",
    }
)
_MARKER_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.")
_NAME_PREFIXES = ("invoke_agent", "chat ", "ai.", "agent run")


def is_run_candidate(name: str, attribute_keys: Iterable[str]) -> bool:
    """Cheap test (no decoding of values): could this span be an agent span or an LLM span?

    The daemon uses it to decide which spans start a run decision. A run anchored on the
    lowest common ancestor of LLM spans (a plain parent span) is found through those LLM
    spans, so that parent itself need not be a candidate.

    Example:
        >>> is_run_candidate("chat gpt-4o-mini", [])
        True
        >>> is_run_candidate("GET /health", ["http.route"])
        False
        >>> is_run_candidate("ChatCompletion", ["openinference.span.kind"])
        True
    """
    if name.startswith(_NAME_PREFIXES):
        return True
    for key in attribute_keys:
        if key in _MARKER_KEYS or key.startswith(_MARKER_PREFIXES):
            return True
    return False
