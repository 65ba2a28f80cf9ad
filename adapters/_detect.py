"""Run detection (SPEC §2): which spans are runs, and which LLM calls belong to each.

Owned by the adapters. Rules:
* the top-most agent span of a subtree is a run; a "weak" agent claim (the OpenAI Agents
  SDK trace root without ``agent.name``) yields to agent spans below it;
* LLM calls outside every agent run are grouped when one continues another's
  conversation (tool-call loops) and scored on the group's lowest common ancestor span;
  an LLM call that continues nothing is a run of its own;
* an LLM span nested in an LLM span with the same messages (two instrumentors on one
  call) is dropped, so a call is never counted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from adapters import adk, genai, mastra, openinference, pydantic_ai, traceloop, vercel
from adapters._build import build_run, continues, non_system
from adapters._messages import msg_key
from adapters._runs import AgentRun, Extraction, Skip
from adapters._trace import AssembledTrace, TraceLog, TraceSpan
from adapters._tree import SpanTree
from adapters._view import Report, SpanView

__all__ = ["classify", "extract_runs"]

ViewFn = Callable[[TraceSpan, Sequence[TraceLog], Report], "SpanView | None"]

# Most specific first: a span is read by the first module that claims it.
_MODULES: tuple[ViewFn, ...] = (
    mastra.view_span,
    vercel.view_span,
    pydantic_ai.view_span,
    adk.view_span,
    openinference.view_span,
    traceloop.view_span,
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


def _views(trace: AssembledTrace, tree: SpanTree, skipped: list[Skip]) -> dict[str, SpanView]:
    logs_by_span: dict[str, list[TraceLog]] = {}
    for log in trace.logs:
        if log.span_id:
            logs_by_span.setdefault(log.span_id, []).append(log)
    views: dict[str, SpanView] = {}
    for span in tree.spans:
        reasons: list[str] = []
        try:
            view = classify(span, logs_by_span.get(span.span_id, ()), reasons.append)
        except Exception:  # an adapter bug must not lose the rest of the trace
            skipped.append(Skip(span.span_id, "adapter_error"))
            continue
        for reason in dict.fromkeys(reasons):
            skipped.append(Skip(span.span_id, reason))
        if view is not None:
            views[span.span_id] = view
    return views


def _same_call(a: SpanView, b: SpanView) -> bool:
    return [msg_key(m) for m in a.request] == [msg_key(m) for m in b.request] and [
        msg_key(m) for m in a.response
    ] == [msg_key(m) for m in b.response]


def _prefix_hashes(view: SpanView) -> list[int]:
    hashes: list[int] = []
    h = 0
    for msg in non_system(view.request):
        h = hash((h, msg_key(msg)))
        hashes.append(h)
    return hashes


def _group_calls(calls: list[SpanView]) -> list[list[SpanView]]:
    """Union calls that continue an earlier call's conversation (longest matching request wins).

    Requests are indexed by (length, prefix hash) so a trace with many calls stays linear.
    """
    parent: dict[int, int] = {i: i for i in range(len(calls))}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    index: dict[tuple[int, int], list[int]] = {}
    lengths: set[int] = set()
    for j, call in enumerate(calls):
        hashes = _prefix_hashes(call)
        best = -1
        for length in sorted((n for n in lengths if n < len(hashes)), reverse=True):
            best = next((i for i in index.get((length, hashes[length - 1]), ()) if continues(calls[i], call)), -1)
            if best >= 0:
                break
        if best >= 0:
            parent[find(j)] = find(best)
        if hashes:
            index.setdefault((len(hashes), hashes[-1]), []).append(j)
            lengths.add(len(hashes))
    groups: dict[int, list[SpanView]] = {}
    for i, call in enumerate(calls):
        groups.setdefault(find(i), []).append(call)
    return list(groups.values())


def extract_runs(trace: AssembledTrace) -> Extraction:
    """Find every agent run in one assembled trace.

    Never raises on bad data: broken spans are skipped or degraded and counted in
    ``Extraction.skipped``.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat gpt-4o-mini", attributes={
        ...     "gen_ai.operation.name": "chat",
        ...     "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]',
        ...     "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"Hello"}]}]'})
        >>> result = extract_runs(AssembledTrace(trace_id="a" * 32, spans=(span,)))
        >>> run = result.runs[0]
        >>> (run.span_name, run.input.input_messages[0].content, run.output[0].content)
        ('chat gpt-4o-mini', 'Hi', 'Hello')
    """
    tree = SpanTree(trace.spans)
    skipped: list[Skip] = list(tree.skipped)
    views = _views(trace, tree, skipped)
    strong = {sid for sid, v in views.items() if v.kind == "agent" and not v.weak}
    weak = {sid for sid, v in views.items() if v.kind == "agent" and v.weak}
    nearest_agent: dict[str, str | None] = {}
    top_of: dict[str, str | None] = {}
    for sid in views:
        chain = [a for a in tree.ancestors(sid) if a in strong]
        nearest_agent[sid] = chain[0] if chain else None
        top_of[sid] = chain[-1] if chain else None
    tops = [s.span_id for s in tree.spans if s.span_id in strong and top_of[s.span_id] is None]
    tool_ids = [s.span_id for s in tree.spans if s.span_id in views and views[s.span_id].kind == "tool"]
    kept = _distinct_llm_calls(tree, views, skipped)
    runs: list[AgentRun] = []
    for top in tops:
        mine = [views[s] for s in kept if top_of[s] == top]
        mine = [v for v in mine if not v.fallback] or mine
        own = [v for v in mine if nearest_agent[v.span.span_id] == top] or mine
        tools = [views[s] for s in tool_ids if top_of[s] == top]
        _add_run(runs, skipped, tree.by_id[top], views[top], own, tools)
    # Outside strong agents: conversations, anchored on their lowest common ancestor, or on
    # the top-most weak agent span above it (the Agents SDK trace root without agent.name).
    outside = [views[s] for s in kept if top_of[s] is None]
    free = [v for v in outside if not v.fallback] or outside
    groups = _group_calls(free)
    anchors: list[str] = []
    for group in groups:
        ids = [c.span.span_id for c in group]
        anchor = tree.lowest_common_ancestor(ids) if len(ids) > 1 else ids[0]
        above = [a for a in ([anchor, *tree.ancestors(anchor)] if anchor else []) if a in weak and top_of[a] is None]
        anchors.append(above[-1] if above else (anchor or ids[-1]))
    covered: set[str] = set()
    for group, anchor in zip(groups, anchors, strict=True):
        if anchor in covered and anchors.count(anchor) > 1:  # two conversations, one anchor
            anchor = group[-1].span.span_id
        below = set(tree.descendants(anchor))
        covered.update(below, tree.ancestors(anchor), (anchor,))
        view = views.get(anchor)
        single_call = view is not None and view.kind == "llm" and len(group) == 1
        run_view = view if view is not None and (view.kind == "agent" or single_call) else None
        tools = [views[s] for s in tool_ids if s in below and top_of[s] is None]
        _add_run(runs, skipped, tree.by_id[anchor], run_view, group, tools)
    for sid in (s.span_id for s in tree.spans if s.span_id in weak):
        if sid not in covered and top_of[sid] is None and views[sid].has_content:
            covered.update(tree.descendants(sid))
            _add_run(runs, skipped, tree.by_id[sid], views[sid], [], [])
    runs.sort(key=lambda r: (r.start_ns, r.span_id))
    return Extraction(runs=runs, skipped=skipped)


def _distinct_llm_calls(tree: SpanTree, views: dict[str, SpanView], skipped: list[Skip]) -> list[str]:
    """LLM span ids in start order, without inner spans repeating their LLM parent's call."""
    llm_ids = [s.span_id for s in tree.spans if s.span_id in views and views[s.span_id].kind == "llm"]
    llm_set = set(llm_ids)
    kept: list[str] = []
    for sid in llm_ids:
        outer = next((a for a in tree.ancestors(sid) if a in llm_set), None)
        if (
            outer is not None
            and not (views[outer].fallback or views[sid].fallback)
            and _same_call(views[outer], views[sid])
        ):
            skipped.append(Skip(sid, "duplicate_llm_call"))
            continue
        kept.append(sid)
    return kept


def _add_run(
    runs: list[AgentRun],
    skipped: list[Skip],
    span: TraceSpan,
    view: SpanView | None,
    calls: Sequence[SpanView],
    tools: Sequence[SpanView],
) -> None:
    try:
        runs.append(build_run(span, view, calls, tools))
    except Exception:  # a bug in run building must not lose the trace's other runs
        skipped.append(Skip(span.span_id, "run_error"))
