"""The CHAIN-root rule: which span is the run when no span of a trace is an agent span.

Owned by the adapters. Some instrumentors never mark the agent: DSPy's ``ReAct.forward`` and
Haystack's ``Agent.run`` are OpenInference CHAIN spans, Haystack's own tracer writes untyped
spans, OpenLIT's ``@openlit.trace`` a span per decorated function. Rule (applied by
`adapters._select` only to traces without any agent span): a CHAIN or untyped span (or a
traced function's span) that carries the conversation's input (the user's message) and output (an
assistant message) is a candidate; a candidate with no candidate above it is a run when model
calls lie below it, or when the trace has no model call at all (the span is then the only
record of the conversation). Every model call and tool span below it belongs to it: nested
model calls are never runs of their own.

What a candidate carries is read from its recorded input and output (OpenInference
``input.value`` / ``output.value``; Haystack's ``haystack.*.input`` / ``output``; a Langfuse ``span`` /
``chain`` observation's ``langfuse.observation.input`` / ``output``; a traced
function's ``function.args`` / ``function.kwargs`` and plain-text ``gen_ai.output.messages``,
as OpenLIT's ``@openlit.trace`` writes them, `adapters.genai.traced_function_io`): a message
list (Haystack ``ChatMessage`` serializations included), the JSON of the call's arguments
with one argument holding the user's message (`adapters._agent_input`), or a result object
with an answer field (``answer``, ``output``, ...). An output message list that repeats the
input is the whole conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters import genai, haystack, langfuse
from adapters._agent_input import arguments_messages
from adapters._build import non_system, split_turn
from adapters._dialect import apply_to_view, framework_of
from adapters._messages import Msg, loads, parse_messages
from adapters._trace import TraceSpan
from adapters._tree import SpanTree
from adapters._view import SpanView, common_context

__all__ = ["ANSWER_FIELDS", "ChainRoot", "calls_converse", "chain_roots", "read_chain"]

#: Fields of a recorded result object that hold the answer, in the order tried.
ANSWER_FIELDS: tuple[str, ...] = ("answer", "output", "response", "result", "final_answer", "reply", "text", "content")


@dataclass(slots=True)
class ChainRoot:
    """A chain span chosen as a run: its view, the model calls below it, and why it was chosen."""

    view: SpanView
    calls: list[SpanView]
    reason: str


def _parsed(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        parsed = loads(value)
        return value if parsed is None else parsed
    return value


def _messages(items: Any) -> list[Msg]:
    return haystack.chat_messages(items) or parse_messages(items)


def _input_messages(value: Any, unwrap: bool = True) -> list[Msg]:
    """The user's message(s) in a recorded input: text, a message list, or the call's arguments."""
    value = _parsed(value)
    if isinstance(value, str):
        return [Msg("user", value)] if value.strip() else []
    if isinstance(value, list):
        return _messages(value)
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("messages"), list):
        return _messages(value["messages"])
    msgs, _ = arguments_messages(value)
    if not msgs and unwrap and len(value) == 1:
        only = next(iter(value.values()))  # DSPy records ``forward(**input_args)`` as {"input_args": {...}}
        if isinstance(only, dict):
            return _input_messages(only, unwrap=False)
    return msgs


def _output_messages(value: Any) -> list[Msg]:
    """The messages in a recorded output: text, a message list, ``messages`` / ``replies``, or an answer field."""
    value = _parsed(value)
    if isinstance(value, str):
        return [Msg("assistant", value)] if value.strip() else []
    if isinstance(value, list):
        return _messages(value)
    if not isinstance(value, dict):
        return []
    for key in ("messages", "replies"):
        if isinstance(value.get(key), list):
            return _messages(value[key])
    for key in ANSWER_FIELDS:
        if isinstance(value.get(key), str) and value[key].strip():
            return [Msg("assistant", value[key])]
    return []


def _io(span: TraceSpan) -> tuple[str, str, Any, Any] | None:
    """(convention, label, input, output) of a CHAIN or untyped span that records both, else None."""
    attrs = span.attributes
    kind = attrs.get("openinference.span.kind")
    if (kind is None or (isinstance(kind, str) and kind.upper() == "CHAIN")) and (
        "input.value" in attrs and "output.value" in attrs
    ):
        return "openinference", "CHAIN span" if kind else "untyped span", attrs["input.value"], attrs["output.value"]
    recorded = haystack.chain_io(span)
    if recorded is not None:
        return "haystack", "untyped span", *recorded
    recorded = langfuse.chain_io(span)
    if recorded is not None:
        return "langfuse", "Langfuse span observation", *recorded
    traced = genai.traced_function_io(span)
    if traced is not None:
        return "genai", "traced function span", *traced
    return None


def read_chain(span: TraceSpan) -> SpanView | None:
    """A candidate run span (kind ``chain``): the user's input and the assistant's output it records, else None.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "ReAct.forward", attributes={
        ...     "openinference.span.kind": "CHAIN", "input.value": '{"input_args": {"question": "Weather?"}}',
        ...     "output.value": '{"trajectory": {}, "answer": "Sunny."}'})
        >>> view = read_chain(span)
        >>> (view.kind, view.request[0].content, view.response[0].content)
        ('chain', 'Weather?', 'Sunny.')
    """
    found = _io(span)
    if found is None:
        return None
    convention, label, raw_in, raw_out = found
    request, output = _input_messages(raw_in), _output_messages(raw_out)
    asked = [m.content.strip() for m in request if m.role == "user"]
    if not asked or not any(m.role == "assistant" for m in output):
        return None
    view = SpanView(span=span, convention=convention, kind="chain", context=common_context(span.attributes))
    view.request = request
    said = [m.content.strip() for m in output if m.role == "user"]
    if said[-len(asked) :] == asked:  # the output repeats the input: the whole conversation
        view.conversation = output
        view.notes.append(f"{label}: input and the whole conversation from its recorded input and output")
    else:
        view.response = [m for m in output if m.role != "user"]
        view.notes.append(f"{label}: input and answer from its recorded input and output")
    framework = framework_of(span)
    if framework is not None:
        apply_to_view(view, framework)
    return view


def calls_converse(view: SpanView, calls: Sequence[SpanView]) -> bool:
    """Whether the run's first model request holds the run's input (else the framework prompts in its own format).

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "x")
        >>> chain = SpanView(span, "openinference", "chain", request=[Msg("user", "Weather?")])
        >>> call = SpanView(span, "openinference", "llm", request=[Msg("user", "[[ ## question ## ]]\\nWeather?")])
        >>> (calls_converse(chain, [call]), calls_converse(chain, [SpanView(span, "x", "llm", [Msg("user", "Weather?")])]))
        (False, True)
    """
    first = next((c for c in calls if non_system(c.request)), None)
    if first is None:
        return False
    _, asked = split_turn(non_system(first.request))
    return [m.content.strip() for m in asked] == [m.content.strip() for m in non_system(view.request) if m.role == "user"]


def chain_roots(tree: SpanTree, views: dict[str, SpanView], calls: Sequence[str]) -> list[ChainRoot]:
    """Read the candidate chain spans (added to ``views``) and pick the runs among them (see the module rule).

    ``calls`` are the trace's model-call span ids (duplicates removed). Only for traces with no agent span.
    """
    candidates = {}
    for span in tree.spans:
        if span.span_id not in views and (view := read_chain(span)) is not None:
            candidates[span.span_id] = view
    views.update(candidates)
    below = {sid: set(tree.descendants(sid)) for sid in candidates}
    qualifies = [sid for sid in candidates if not calls or below[sid] & set(calls)]
    roots = []
    for sid in qualifies:
        if any(a in qualifies for a in tree.ancestors(sid)):
            continue
        view = candidates[sid]
        mine = [views[c] for c in calls if c in below[sid]]
        found = _io(view.span)
        label = found[1] if found is not None else "span"
        if mine:
            reason = (f"no agent span in the trace: the top-most {label} that carries the run's input and output, "
                      f"above {len(mine)} model call(s)")
        else:
            reason = f"no agent span and no model call in the trace: the top-most {label} that carries the conversation"
        roots.append(ChainRoot(view, mine, reason))
    return roots
