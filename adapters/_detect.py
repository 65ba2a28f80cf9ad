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

from adapters import genai, mastra, openinference, pydantic_ai, traceloop, vercel
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
    agent_ids = {sid for sid, v in views.items() if v.kind == "agent"}
    effective: set[str] = set()
    for sid in agent_ids:
        if views[sid].weak and any(d in agent_ids and not views[d].weak for d in tree.descendants(sid)):
            continue
        effective.add(sid)
    nearest_agent: dict[str, str | None] = {}
    top_of: dict[str, str | None] = {}
    for sid in views:
        chain = [a for a in tree.ancestors(sid) if a in effective]
        nearest_agent[sid] = chain[0] if chain else None
        top_of[sid] = chain[-1] if chain else None
    tops = [s.span_id for s in tree.spans if s.span_id in effective and top_of[s.span_id] is None]
    llm_ids = [s.span_id for s in tree.spans if s.span_id in views and views[s.span_id].kind == "llm"]
    llm_set = set(llm_ids)
    tool_ids = [s.span_id for s in tree.spans if s.span_id in views and views[s.span_id].kind == "tool"]
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
    runs: list[AgentRun] = []
    for top in tops:
        mine = [views[s] for s in kept if top_of[s] == top]
        mine = [v for v in mine if not v.fallback] or mine
        own = [v for v in mine if nearest_agent[v.span.span_id] == top] or mine
        tools = [views[s] for s in tool_ids if top_of[s] == top]
        try:
            runs.append(build_run(tree.by_id[top], views[top], own, tools))
        except Exception:
            skipped.append(Skip(top, "run_error"))
    free = [views[s] for s in kept if top_of[s] is None and not views[s].fallback]
    groups = _group_calls(free)
    anchors = [
        (tree.lowest_common_ancestor([c.span.span_id for c in g]) if len(g) > 1 else g[0].span.span_id)
        for g in groups
    ]
    for group, anchor in zip(groups, anchors, strict=True):
        if anchor is None or (len(group) > 1 and anchors.count(anchor) > 1):
            anchor = group[-1].span.span_id
        below = set(tree.descendants(anchor))
        tools = [views[s] for s in tool_ids if s in below and top_of[s] is None]
        try:
            run_view = views.get(anchor) if anchor in views and views[anchor].kind == "llm" else None
            runs.append(build_run(tree.by_id[anchor], run_view if len(group) == 1 else None, group, tools))
        except Exception:
            skipped.append(Skip(anchor, "run_error"))
    runs.sort(key=lambda r: (r.start_ns, r.span_id))
    return Extraction(runs=runs, skipped=skipped)
