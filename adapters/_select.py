"""Run selection (SPEC §2): which spans are runs, which model calls and tools belong to each, and why.

Owned by the adapters. Rules:
* the top-most agent span of a subtree is a run; a "weak" agent claim (an agent span
  without an agent name, such as the OpenAI Agents SDK trace root) yields to agent spans
  below it;
* every model call and tool span inside an agent run belongs to that run, at any depth
  and whatever spans lie between (OpenInference CHAIN steps included): it is never a run
  of its own;
* LLM calls outside every strong agent run are grouped when one continues another's
  conversation (tool-call loops) and scored on the group's lowest common ancestor span,
  or on the top-most weak agent span above it; an LLM call that continues nothing is a
  run of its own unless an agent span holds it;
* an LLM span nested in an LLM span with the same messages (two instrumentors on one
  call) is dropped, so a call is never counted twice;
* when no span of the trace is an agent span (strong or weak), the CHAIN-root rule of
  `adapters._chain` comes first: a top-most CHAIN or untyped span that carries the
  conversation's input and output is the run of every model call and tool below it.
Every span read by a convention gets a `Verdict` (what became of it and why), which
``inspect --explain`` shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from adapters._build import build_run, continues, non_system
from adapters._chain import calls_converse, chain_roots
from adapters._detect import read_views
from adapters._dialect import apply_to_view
from adapters._messages import msg_key
from adapters._runs import AgentRun, Extraction, Skip
from adapters._session import run_session
from adapters._trace import AssembledTrace, TraceSpan
from adapters._tree import SpanTree
from adapters._view import SpanView

__all__ = ["VERDICTS", "Selection", "Verdict", "extract_runs", "select_runs"]

#: Every `Verdict.status`.
VERDICTS: frozenset[str] = frozenset(
    {
        "run",  # the span a run is scored on
        "in_run",  # part of a run (a model call, tool call or agent span inside it)
        "duplicate",  # repeats its parent model call (two instrumentations): ignored
        "unused_fallback",  # a model span without messages, where its run has better ones
        "yields",  # a nameless agent span above an agent span: the one below is the run
        "no_content",  # an agent span with no messages and no model call: not a run
        "outside_run",  # a tool span in no run
        "error",  # reading the span or building its run failed (see the skips)
    }
)


@dataclass(slots=True)
class Verdict:
    """What run selection made of one span: a status from `VERDICTS`, why, and the run's span id.

    Example:
        >>> Verdict("in_run", "model call inside agent run", "ab" * 8).status
        'in_run'
    """

    status: str
    reason: str
    run: str | None = None


@dataclass(slots=True)
class Selection:
    """The runs of one trace together with how each span was read and judged.

    ``notes`` holds, per run span id, how the run's messages were put together.

    Example:
        >>> sel = select_runs(AssembledTrace("a" * 32, ()))
        >>> (sel.runs, sel.verdicts)
        ([], {})
    """

    tree: SpanTree
    views: dict[str, SpanView]
    runs: list[AgentRun] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    tool_ids: list[str] | None = None


@dataclass(slots=True)
class _Plan:
    anchor: str
    view: SpanView | None
    calls: list[SpanView]
    tools: list[SpanView]
    reason: str
    converse: bool = True  # the model calls carry the conversation (not a framework's own prompt format)


def _same_call(a: SpanView, b: SpanView) -> bool:
    """Whether two model spans record the same request and response (two instrumentations, one call)."""
    return [msg_key(m) for m in a.request] == [msg_key(m) for m in b.request] and [
        msg_key(m) for m in a.response
    ] == [msg_key(m) for m in b.response]


def _prefix_hashes(view: SpanView) -> list[int]:
    """A hash per prefix of the request's non-system messages (to find the call a request continues)."""
    hashes: list[int] = []
    h = 0
    for msg in non_system(view.request):
        h = hash((h, msg_key(msg)))
        hashes.append(h)
    return hashes


def _group_calls(calls: list[SpanView]) -> list[list[SpanView]]:
    """Union calls that continue an earlier call's conversation (longest matching request wins), or
    go on from an earlier call's response on the server (`adapters._build.chained`).

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
    responses: dict[str, int] = {}  # response id -> the call that answered it
    for j, call in enumerate(calls):
        hashes = _prefix_hashes(call)
        best = responses.get(call.context.get("conversation_id") or "", -1)  # `chained` to that call
        if call.context.get("response_id"):
            responses.setdefault(call.context["response_id"], j)
        for length in sorted((n for n in lengths if n < len(hashes) and best < 0), reverse=True):
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


def _distinct_llm_calls(sel: Selection) -> list[str]:
    """LLM span ids in start order, without inner spans repeating their LLM parent's call."""
    tree, views = sel.tree, sel.views
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
            sel.skipped.append(Skip(sid, "duplicate_llm_call"))
            sel.verdicts[sid] = Verdict("duplicate", f"repeats the model call of its parent span {outer}")
            continue
        kept.append(sid)
    return kept


def _prefer_content(sel: Selection, calls: list[SpanView]) -> list[SpanView]:
    """Model spans without messages count only when no other model span of the run has some."""
    better = [v for v in calls if not v.fallback]
    if not better:
        return calls
    for view in calls:
        if view.fallback:
            sel.verdicts[view.span.span_id] = Verdict(
                "unused_fallback", "model span without messages; other model spans of the run carry them"
            )
    return better


def _tool_ids(sel: Selection) -> list[str]:
    """The tool spans' ids in start order (worked out once per trace)."""
    if sel.tool_ids is None:
        sel.tool_ids = [s.span_id for s in sel.tree.spans if s.span_id in sel.views and sel.views[s.span_id].kind == "tool"]
    return sel.tool_ids


def _member_reason(view: SpanView, run_view: SpanView | None) -> str:
    """Why a span inside a run is not a run of its own, said by what it is."""
    where = "agent run" if run_view is not None and run_view.kind == "agent" else "run"
    if view.kind == "llm":
        return f"model call inside the {where}"
    if view.kind == "tool":
        return f"tool call inside the {where}"
    if view.kind == "agent":
        return f"agent span nested in the {where}"
    if view.kind == "chain":
        return f"chain span nested in the {where}: the top-most one is the run"
    return f"{view.convention} span inside the {where}: neither an agent, a model call nor a tool"


def _strong_plans(sel: Selection, kept: list[str], top_of: dict[str, str | None]) -> list[_Plan]:
    """One plan per top-most strong agent span: its model calls (its own first) and tools."""
    strong = {sid for sid, v in sel.views.items() if v.kind == "agent" and not v.weak}
    nearest: dict[str, str | None] = {}
    for sid in sel.views:
        chain = [a for a in sel.tree.ancestors(sid) if a in strong]
        nearest[sid] = chain[0] if chain else None
    plans = []
    for top in (s.span_id for s in sel.tree.spans if s.span_id in strong and top_of[s.span_id] is None):
        mine = _prefer_content(sel, [sel.views[s] for s in kept if top_of[s] == top])
        own = [v for v in mine if nearest[v.span.span_id] == top] or mine
        for view in mine:
            if view not in own:
                sel.verdicts[view.span.span_id] = Verdict(
                    "in_run", "model call of a nested agent span; the run is read from its top agent's calls", top
                )
        tools = [sel.views[s] for s in _tool_ids(sel) if top_of[s] == top]
        view = sel.views[top]
        plans.append(_Plan(top, view, own, tools, f"top-most agent span ({view.convention})"))
    return plans


def _chain_plans(sel: Selection, kept: list[str]) -> list[_Plan]:
    """Plans for a trace without agent spans: one per top-most chain span carrying the conversation."""
    plans = []
    for root in chain_roots(sel.tree, sel.views, kept):
        sid = root.view.span.span_id
        below = set(sel.tree.descendants(sid))
        calls = _prefer_content(sel, root.calls)
        tools = [sel.views[s] for s in _tool_ids(sel) if s in below]
        plans.append(_Plan(sid, root.view, calls, tools, root.reason, not calls or calls_converse(root.view, calls)))
    return plans


def _conversation_plans(sel: Selection, kept: list[str], top_of: dict[str, str | None]) -> list[_Plan]:
    """Plans for model calls outside strong agents: conversations, merged under an agent span."""
    tree, views = sel.tree, sel.views
    weak = {sid for sid, v in views.items() if v.kind == "agent" and v.weak}
    free = _prefer_content(sel, [views[s] for s in kept if top_of[s] is None])
    groups = _group_calls(free)
    anchors: list[str] = []
    for group in groups:
        ids = [c.span.span_id for c in group]
        anchor = tree.lowest_common_ancestor(ids) if len(ids) > 1 else ids[0]
        above = [a for a in ([anchor, *tree.ancestors(anchor)] if anchor else []) if a in weak and top_of[a] is None]
        anchors.append(above[-1] if above else (anchor or ids[-1]))
    plans: dict[str, _Plan] = {}
    covered: set[str] = set()
    for group, anchor in zip(groups, anchors, strict=True):
        view = views.get(anchor)
        if view is not None and view.kind == "agent" and anchor in plans:  # one agent run, several calls
            plans[anchor].calls = sorted([*plans[anchor].calls, *group], key=lambda c: c.span.start_ns)
            plans[anchor].reason = f"agent span without an agent name above {len(plans[anchor].calls)} model calls"
            continue
        if anchor in covered and anchors.count(anchor) > 1:  # two conversations, one plain anchor
            anchor = group[-1].span.span_id
            view = views.get(anchor)
        below = set(tree.descendants(anchor))
        covered.update(below, tree.ancestors(anchor), (anchor,))
        single_call = view is not None and view.kind == "llm" and len(group) == 1
        run_view = view if view is not None and (view.kind == "agent" or single_call) else None
        tools = [views[s] for s in _tool_ids(sel) if s in below and top_of[s] is None]
        if view is not None and view.kind == "agent":
            reason = f"agent span without an agent name above {len(group)} model call(s)"
        elif single_call:
            reason = "a model call that continues no other"
        else:
            reason = f"lowest common ancestor of {len(group)} model calls that continue one conversation"
        plans[anchor] = _Plan(anchor, run_view, list(group), tools, reason)
    for sid in (s.span_id for s in tree.spans if s.span_id in weak):
        if sid in covered or top_of[sid] is not None:
            continue
        below = set(tree.descendants(sid))
        if any(b in views and views[b].kind == "agent" and not views[b].weak for b in below):
            sel.verdicts[sid] = Verdict("yields", "agent span without an agent name above an agent span")
        elif views[sid].has_content:
            covered.update(below)
            tools = [views[s] for s in _tool_ids(sel) if s in below]
            plans[sid] = _Plan(sid, views[sid], [], tools, "agent span with its own input/output and no model call")
        else:
            sel.verdicts[sid] = Verdict("no_content", "agent span without messages and without model calls")
    return list(plans.values())


def _build(sel: Selection, plan: _Plan) -> None:
    """Build a planned run (with its framework's dialect on every member) and give its spans their verdicts."""
    span: TraceSpan = sel.tree.by_id[plan.anchor]
    members = [*plan.calls, *plan.tools]
    framework = next((v.framework for v in ([plan.view] if plan.view else []) + members if v.framework), None)
    if framework is not None:
        for member in members:
            if member.framework is None:  # e.g. another instrumentation's model spans inside the run
                apply_to_view(member, framework)
    notes = sel.notes.setdefault(plan.anchor, [])
    try:
        sel.runs.append(build_run(span, plan.view, plan.calls, plan.tools, framework=framework, notes=notes,
                                  converse=plan.converse))
    except Exception:  # a bug in run building must not lose the trace's other runs
        sel.skipped.append(Skip(span.span_id, "run_error"))
        sel.verdicts[plan.anchor] = Verdict("error", "building the run failed (run_error)")
        return
    sel.verdicts[plan.anchor] = Verdict("run", plan.reason, plan.anchor)
    for sid in sel.tree.descendants(plan.anchor):
        if sid in sel.views and sid not in sel.verdicts:
            sel.verdicts[sid] = Verdict("in_run", _member_reason(sel.views[sid], plan.view), plan.anchor)


def select_runs(trace: AssembledTrace) -> Selection:
    """Read every span, decide the runs, build them, and record a verdict per span read.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat", attributes={"gen_ai.operation.name": "chat",
        ...     "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]'})
        >>> sel = select_runs(AssembledTrace("a" * 32, (span,)))
        >>> (len(sel.runs), sel.verdicts["b" * 16].status, sel.verdicts["b" * 16].reason)
        (1, 'run', 'a model call that continues no other')
    """
    tree = SpanTree(trace.spans)
    sel = Selection(tree=tree, views={}, skipped=list(tree.skipped))
    sel.views = read_views(trace, tree, sel.skipped)
    strong = {sid for sid, v in sel.views.items() if v.kind == "agent" and not v.weak}
    top_of: dict[str, str | None] = {}
    for sid in sel.views:
        chain = [a for a in tree.ancestors(sid) if a in strong]
        top_of[sid] = chain[-1] if chain else None
    kept = _distinct_llm_calls(sel)
    chained = [] if any(v.kind == "agent" for v in sel.views.values()) else _chain_plans(sel, kept)
    claimed = {c.span.span_id for plan in chained for c in plan.calls} | {plan.anchor for plan in chained}
    free = [sid for sid in kept if sid not in claimed and not any(p.anchor in sel.tree.ancestors(sid) for p in chained)]
    plans = _strong_plans(sel, kept, top_of) + chained + _conversation_plans(sel, free, top_of)
    for plan in plans:
        _build(sel, plan)
    for sid, view in sel.views.items():
        if sid not in sel.verdicts and view.kind == "tool":
            sel.verdicts[sid] = Verdict("outside_run", "tool span in no run")
    sel.runs.sort(key=lambda r: (r.start_ns, r.span_id))
    return sel


def extract_runs(trace: AssembledTrace, extra_session_keys: Sequence[str] = ()) -> Extraction:
    """Find every agent run in one assembled trace, each with its session key (the attributes
    of `adapters._session.SESSION_KEYS`, then ``extra_session_keys``).

    Never raises on bad data: broken spans are skipped or degraded and counted in
    ``Extraction.skipped``.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat gpt-4o-mini", attributes={
        ...     "gen_ai.operation.name": "chat",
        ...     "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]',
        ...     "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"Hello"}]}]'})
        >>> result = extract_runs(AssembledTrace(trace_id="a" * 32, spans=(span,)))
        >>> run = result.runs[0]
        >>> (run.span_name, run.input.input_messages[0].content, run.output[0].content, run.session_id)
        ('chat gpt-4o-mini', 'Hi', 'Hello', None)
    """
    sel = select_runs(trace)
    runs = []
    for run in sel.runs:
        session = run_session(sel.tree, run.span_id, extra_session_keys)
        runs.append(run if session is None else run.with_session(session))  # most runs are of no session
    return Extraction(runs=runs, skipped=sel.skipped)
