"""Span reading: which convention module reads each span, and with which framework dialect.

Owned by the adapters. A span is read by the first convention module that claims it (most
specific first); a span of a framework with a dialect (`adapters._dialect`) has its
messages rewritten by it. Which spans are runs is decided in `adapters._select`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from adapters import (
    adk,
    genai,
    haystack,
    langfuse,
    mastra,
    mlflow,
    openinference,
    pydantic_ai,
    traceloop,
    vercel,
)
from adapters._dialect import apply_to_view, framework_of
from adapters._runs import Skip
from adapters._trace import AssembledTrace, TraceLog, TraceSpan
from adapters._tree import SpanTree
from adapters._view import Report, SpanView

__all__ = ["classify", "read_views"]

ViewFn = Callable[[TraceSpan, Sequence[TraceLog], Report], "SpanView | None"]

# Most specific first: a span is read by the first module that claims it.
_MODULES: tuple[ViewFn, ...] = (
    mastra.view_span,
    vercel.view_span,
    pydantic_ai.view_span,
    adk.view_span,
    langfuse.view_span,
    openinference.view_span,
    haystack.view_span,
    traceloop.view_span,
    mlflow.view_span,  # before GenAI; a span with gen_ai.operation.name (and MLflow's GenAI-semconv export) is GenAI's
    genai.view_span,
)


def classify(span: TraceSpan, logs: Sequence[TraceLog], report: Report) -> SpanView | None:
    """Read a span with the first convention module that recognises it.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat", attributes={"gen_ai.operation.name": "chat"})
        >>> classify(span, (), print).kind
        'llm'
    """
    for view_fn in _MODULES:
        view = view_fn(span, logs, report)
        if view is not None:
            return view
    return None


def read_views(trace: AssembledTrace, tree: SpanTree, skipped: list[Skip]) -> dict[str, SpanView]:
    """Read every span of the trace with its convention module (and its framework's dialect).

    Spans no module claims are left out; an adapter that fails on a span is counted
    (``adapter_error``) and the span left out, so one bad span never loses the trace.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat", attributes={"gen_ai.operation.name": "chat"})
        >>> trace = AssembledTrace("a" * 32, (span,))
        >>> [v.kind for v in read_views(trace, SpanTree(trace.spans), []).values()]
        ['llm']
    """
    logs_by_span: dict[str, list[TraceLog]] = {}
    for log in trace.logs:
        if log.span_id:
            logs_by_span.setdefault(log.span_id, []).append(log)
    views: dict[str, SpanView] = {}
    with genai.messages_read_once():
        for span in tree.spans:
            reasons: list[str] = []
            try:
                view = classify(span, logs_by_span.get(span.span_id, ()), reasons.append)
                framework = framework_of(span)
                if view is not None and framework is not None:
                    apply_to_view(view, framework)
            except Exception:  # an adapter bug must not lose the rest of the trace
                skipped.append(Skip(span.span_id, "adapter_error"))
                continue
            for reason in dict.fromkeys(reasons):
                skipped.append(Skip(span.span_id, reason))
            if view is not None:
                views[span.span_id] = view
    return views
