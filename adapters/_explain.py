"""Why the adapters found the runs they found: `explain_trace` (what ``tracescore inspect --explain`` shows).

Owned by the adapters. Pure: the explanation is data (frozen dataclasses, ``to_dict`` for
JSON), made from the very decisions `extract_runs` takes (`adapters._select`), so it never
disagrees with it. For each span of a trace, in tree order: the convention that read it
(or why none did), its kind, the framework dialect applied, what run selection made of it
(a `VERDICTS` status, or ``not_read``) and why, and how it was read (``notes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters import genai, mlflow
from adapters._select import Selection, select_runs
from adapters._trace import AssembledTrace, TraceSpan
from adapters._view import SpanView

__all__ = ["RunExplanation", "SpanExplanation", "TraceExplanation", "explain_trace"]

_KNOWN_MARKERS = (
    "openinference.span.kind",
    "gen_ai.operation.name",
    "gen_ai.input.messages",
    "traceloop.span.kind",
    "ai.operationId",
    "mastra.span.type",
    "pydantic_ai.all_messages",
    "langfuse.observation.type",
    "mlflow.spanType",
)


@dataclass(frozen=True, slots=True)
class SpanExplanation:
    """One span: how it was read and what run selection made of it.

    ``status`` is a `adapters._select.VERDICTS` value or ``not_read`` (no convention reads
    the span); ``run_span_id`` names the run it belongs to or is; ``skips`` are the skip
    reasons counted on it (bad JSON...).

    Example:
        >>> SpanExplanation("b" * 16, None, "chat", "", 0, "genai", "llm", None, "run", "why", "b" * 16).status
        'run'
    """

    span_id: str
    parent_span_id: str | None
    name: str
    scope: str
    depth: int
    convention: str | None
    kind: str | None
    framework: str | None
    status: str
    reason: str
    run_span_id: str | None
    notes: tuple[str, ...] = ()
    skips: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The span's explanation as a JSON-ready dict.

        Example:
            >>> SpanExplanation("b" * 16, None, "x", "", 0, None, None, None, "not_read", "why", None).to_dict()["notes"]
            []
        """
        return {
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "scope": self.scope,
            "depth": self.depth,
            "convention": self.convention,
            "kind": self.kind,
            "framework": self.framework,
            "status": self.status,
            "reason": self.reason,
            "run_span_id": self.run_span_id,
            "notes": list(self.notes),
            "skips": list(self.skips),
        }


@dataclass(frozen=True, slots=True)
class RunExplanation:
    """One run found: the span it is scored on, why that span, and how its messages were put together.

    Example:
        >>> RunExplanation("b" * 16, "chat", "genai", "a model call that continues no other").to_dict()["notes"]
        []
    """

    span_id: str
    span_name: str
    convention: str
    reason: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The run's explanation as a JSON-ready dict.

        Example:
            >>> sorted(RunExplanation("b" * 16, "chat", "genai", "why").to_dict())
            ['convention', 'notes', 'reason', 'span_id', 'span_name']
        """
        return {
            "span_id": self.span_id,
            "span_name": self.span_name,
            "convention": self.convention,
            "reason": self.reason,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class TraceExplanation:
    """The explanation of one trace: its runs, and every span in tree order (depth first, by start time).

    Example:
        >>> TraceExplanation("a" * 32, (), ()).to_dict()
        {'trace_id': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'runs': [], 'spans': []}
    """

    trace_id: str
    runs: tuple[RunExplanation, ...]
    spans: tuple[SpanExplanation, ...]

    def to_dict(self) -> dict[str, Any]:
        """The trace's explanation as a JSON-ready dict (``trace_id``, ``runs``, ``spans``).

        Example:
            >>> TraceExplanation("a" * 32, (), ()).to_dict()["runs"]
            []
        """
        return {
            "trace_id": self.trace_id,
            "runs": [r.to_dict() for r in self.runs],
            "spans": [s.to_dict() for s in self.spans],
        }


def _unread_reason(span: TraceSpan) -> str:
    """Why no convention reads a span, said so that a user can tell what their instrumentation lacks."""
    attrs = span.attributes
    oi_kind = attrs.get("openinference.span.kind")
    if isinstance(oi_kind, str) and oi_kind:
        return f"OpenInference {oi_kind.upper()} span: neither an agent, a model call nor a tool"
    operation = attrs.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation:
        return f"GenAI operation {operation!r}: neither an agent, a model call nor a tool"
    langfuse_type = attrs.get("langfuse.observation.type")
    if isinstance(langfuse_type, str) and langfuse_type:
        return (f"Langfuse {langfuse_type!r} observation: neither an agent, a generation nor a tool (nor, in a trace "
                "without agent, a span carrying the run's input and output)")
    if genai.traced_function_io(span) is not None:
        return ("traced function span (plain-text gen_ai.output.messages): not a model call; the run only when "
                "it carries the user's message and the answer, with model calls below it")
    traceloop_kind = attrs.get("traceloop.span.kind")
    if isinstance(traceloop_kind, str) and traceloop_kind:
        return f"Traceloop {traceloop_kind!r} span: neither an agent, a model call nor a tool"
    mlflow_type = mlflow.decoded(attrs.get(mlflow.SPAN_TYPE))
    if isinstance(mlflow_type, str) and mlflow_type:
        return f"MLflow {mlflow_type} span: neither an agent, a model call nor a tool"
    return (
        "no attribute of a known convention (" + ", ".join(_KNOWN_MARKERS) + "); an agent span needs "
        "gen_ai.operation.name=invoke_agent, openinference.span.kind=AGENT, langfuse.observation.type=agent or "
        "mlflow.spanType=AGENT, a model call its messages"
    )


def _notes(view: SpanView | None, status: str) -> tuple[str, ...]:
    """How the span was read, plus a hint for a nameless agent span that is not the run."""
    if view is None:
        return ()
    weak = view.weak and status != "run"
    hint = ["no agent name (agent.name / gen_ai.agent.name): a named agent span below it, or a conversation "
            "of model calls around it, is the run instead"]
    return (*view.notes, *(hint if weak else ()))


def _tree_order(sel: Selection) -> list[tuple[TraceSpan, int]]:
    """Every span with its depth, depth first from the roots, children by start time."""
    order: list[tuple[TraceSpan, int]] = []
    stack = [(root.span_id, 0) for root in reversed(sel.tree.roots())]
    while stack:
        sid, depth = stack.pop()
        order.append((sel.tree.by_id[sid], depth))
        stack.extend((child, depth + 1) for child in reversed(sel.tree.children[sid]))
    return order


def explain_trace(trace: AssembledTrace) -> TraceExplanation:
    """Explain which runs the adapters find in one trace, span by span.

    Example:
        >>> parent = TraceSpan("a" * 32, "1" * 16, None, "handler")
        >>> chat = TraceSpan("a" * 32, "2" * 16, "1" * 16, "chat", start_ns=1, attributes={
        ...     "gen_ai.operation.name": "chat",
        ...     "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]'})
        >>> ex = explain_trace(AssembledTrace("a" * 32, (parent, chat)))
        >>> [(s.name, s.depth, s.status) for s in ex.spans]
        [('handler', 0, 'not_read'), ('chat', 1, 'run')]
        >>> ex.runs[0].reason
        'a model call that continues no other'
    """
    sel = select_runs(trace)
    skips: dict[str, list[str]] = {}
    for skip in sel.skipped:
        if skip.span_id is not None:
            skips.setdefault(skip.span_id, []).append(skip.reason)
    spans: list[SpanExplanation] = []
    for span, depth in _tree_order(sel):
        view = sel.views.get(span.span_id)
        verdict = sel.verdicts.get(span.span_id)
        if verdict is not None:  # a plain span can be a run: the common ancestor of a conversation
            status, reason, run = verdict.status, verdict.reason, verdict.run
        elif view is None:
            status, reason, run = "not_read", _unread_reason(span), None
            if "adapter_error" in skips.get(span.span_id, ()):
                status, reason = "error", "the convention module failed on this span (adapter_error)"
        else:
            status, reason, run = "not_in_run", "read, but in no run", None
        spans.append(
            SpanExplanation(
                span_id=span.span_id,
                parent_span_id=sel.tree.parent.get(span.span_id),
                name=span.name,
                scope=span.scope_name,
                depth=depth,
                convention=view.convention if view else None,
                kind=view.kind if view else None,
                framework=view.framework if view else None,
                status=status,
                reason=reason,
                run_span_id=run,
                notes=_notes(view, status),
                skips=tuple(dict.fromkeys(skips.get(span.span_id, ()))),
            )
        )
    runs = tuple(
        RunExplanation(
            span_id=r.span_id,
            span_name=r.span_name,
            convention=r.convention,
            reason=sel.verdicts[r.span_id].reason,
            notes=tuple(sel.notes.get(r.span_id, ())),
        )
        for r in sel.runs
    )
    return TraceExplanation(trace_id=trace.trace_id, runs=runs, spans=tuple(spans))
