"""Turning span views into an `AgentRun`: conversation chaining and the SPEC §2 message split.

Owned by the adapters. Split rule: ``system_messages`` = the system prompts;
``input_messages`` = the trailing user messages of the run's first request;
``remembered_messages`` = the non-system messages before them; output = every message the
run produced after that request, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters._dialect import answer_of, answer_tools, step_tools
from adapters._messages import Call, Msg, link_tool_results, msg_key, text_of
from adapters._runs import AgentRun, RunMessages
from adapters._trace import TraceSpan
from adapters._view import SpanView

__all__ = ["build_run", "chain", "chained", "continues", "non_system", "recover_tool_calls", "split_turn"]


def non_system(msgs: Sequence[Msg]) -> list[Msg]:
    """The messages that are not system prompts.

    Example:
        >>> [m.role for m in non_system([Msg("system", "s"), Msg("user", "u")])]
        ['user']
    """
    return [m for m in msgs if m.role != "system"]


def _same_reply(replayed: Msg, produced: Msg) -> bool:
    if replayed.role != produced.role:
        return False
    if replayed.tool_calls and produced.tool_calls:
        # parallel calls of one reply may be replayed as one message per call (Responses API)
        if not {c.name for c in replayed.tool_calls} <= {c.name for c in produced.tool_calls}:
            return False
    a, b = replayed.content.strip(), produced.content.strip()
    return not (a and b and a != b)


def _answers(msg: Msg, reply: Sequence[Msg]) -> bool:
    """Whether ``msg`` is the result of one of the tool calls in ``reply`` (matched by call id)."""
    return msg.role == "tool" and bool(msg.tool_call_id) and any(
        c.id == msg.tool_call_id for m in reply for c in m.tool_calls)


def _reply_left_out(new: Sequence[Msg], reply: Sequence[Msg]) -> bool:
    """Whether a replay goes on with the results of ``reply``'s tool calls but leaves out ``reply`` itself
    (OpenLIT drops an assistant message that has no text from ``gen_ai.input.messages``)."""
    return bool(new) and _answers(new[0], reply)


def chained(prev: SpanView, nxt: SpanView) -> bool:
    """Whether ``nxt`` goes on from ``prev``'s response on the server (the Responses API's
    ``previous_response_id``): its ``gen_ai.conversation.id`` is ``prev``'s ``gen_ai.response.id``,
    and its request holds only what is new.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat")
        >>> first = SpanView(span, "genai", "llm", context={"response_id": "resp_1"})
        >>> chained(first, SpanView(span, "genai", "llm", context={"conversation_id": "resp_1"}))
        True
    """
    response_id = prev.context.get("response_id")
    return bool(response_id) and nxt.context.get("conversation_id") == response_id


def continues(prev: SpanView, nxt: SpanView) -> bool:
    """Whether ``nxt``'s request replays ``prev``'s request and response (a tool-call loop step).

    A request that replays ``prev``'s request and then the results of ``prev``'s tool calls
    continues it too, when the instrumentation left the tool-call message out of the replay;
    so does a request `chained` to ``prev``'s response, which replays nothing.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat")
        >>> a = SpanView(span, "genai", "llm", request=[Msg("user", "Hi")], response=[Msg("assistant", "Yo")])
        >>> b = SpanView(span, "genai", "llm", request=[Msg("user", "Hi"), Msg("assistant", "Yo"), Msg("user", "More")])
        >>> (continues(a, b), continues(b, a))
        (True, False)
        >>> calling = SpanView(span, "genai", "llm", request=[Msg("user", "Weather?")],
        ...                    response=[Msg("assistant", "", (Call("c1", "w"),))])
        >>> continues(calling, SpanView(span, "genai", "llm", request=[Msg("user", "Weather?"),
        ...                                                          Msg("tool", "sunny", tool_call_id="c1")]))
        True
    """
    prev_req, req = non_system(prev.request), non_system(nxt.request)
    if chained(prev, nxt):
        return bool(req)
    n = len(prev_req)
    if n == 0 or len(req) <= n:
        return False
    if any(msg_key(x) != msg_key(y) for x, y in zip(prev_req, req, strict=False)):
        return False
    return not prev.response or _same_reply(req[n], prev.response[0]) or _reply_left_out(req[n:], prev.response)


def chain(calls: Sequence[SpanView]) -> tuple[SpanView | None, list[SpanView]]:
    """The first call with a request and the calls continuing it, in order (start-time sorted input).

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat")
        >>> a = SpanView(span, "genai", "llm", request=[Msg("user", "Hi")], response=[Msg("assistant", "Yo")])
        >>> first, used = chain([a])
        >>> (first is a, len(used))
        (True, 1)
    """
    first = next((c for c in calls if non_system(c.request)), None)
    if first is None:
        return None, []
    used = [first]
    for call in calls:
        if call is first or call.span.start_ns < first.span.start_ns:
            continue
        if continues(used[-1], call):
            used.append(call)
    return first, used


def split_turn(first_request: Sequence[Msg]) -> tuple[list[Msg], list[Msg]]:
    """Split a first request (system messages removed) into (remembered, input).

    Example:
        >>> rem, inp = split_turn([Msg("user", "My name is Ada."), Msg("assistant", "Hi Ada."),
        ...                        Msg("user", "What is my name?")])
        >>> ([m.content for m in rem], [m.content for m in inp])
        (['My name is Ada.', 'Hi Ada.'], ['What is my name?'])
    """
    msgs = non_system(first_request)
    k = len(msgs)
    while k > 0 and msgs[k - 1].role == "user":
        k -= 1
    return msgs[:k], msgs[k:]


def _dedupe(texts: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for text in texts:
        if text and text not in seen:
            seen.add(text)
            out.append(text)
    return out


def _conversation_split(view: SpanView, calls: Sequence[SpanView]) -> tuple[list[Msg], list[Msg]]:
    conv = non_system(view.conversation or [])
    first = next((c for c in calls if non_system(c.request)), None)
    if first is not None:
        req = non_system(first.request)
        if len(req) <= len(conv) and all(msg_key(a) == msg_key(b) for a, b in zip(req, conv, strict=False)):
            return conv[: len(req)], conv[len(req) :]
    last_user = max((i for i, m in enumerate(conv) if m.role == "user"), default=-1)
    return conv[: last_user + 1], conv[last_user + 1 :]


def _sum_usage(views: Sequence[SpanView]) -> dict[str, int]:
    total: dict[str, int] = {}
    for view in views:
        for key, value in view.usage.items():
            total[key] = total.get(key, 0) + value
    return total


def _prefer_reply(replayed: Sequence[Msg], reply: Sequence[Msg]) -> list[Msg]:
    # The replayed copy of a reply is kept (it is what was sent), unless it lost detail the
    # recorded reply has: a placeholder, or tool calls without their ids.
    out = []
    for i, msg in enumerate(replayed):
        recorded = reply[i] if i < len(reply) and reply[i].role == msg.role else None
        lossy = msg.placeholder or bool(
            recorded is not None and recorded.tool_calls and not all(c.id for c in msg.tool_calls)
        )
        out.append(recorded if recorded is not None and lossy else msg)
    return out


def _produced(used: Sequence[SpanView], notes: list[str]) -> list[Msg]:
    """Everything after the first request: each call's new replayed messages, then the last reply."""
    conv = non_system(used[0].request)
    produced: list[Msg] = []
    prev = used[0]
    left_out = on_server = 0
    for call in used[1:]:
        req = non_system(call.request)
        if chained(prev, call):  # the server keeps the conversation: the request holds only what is new
            produced += [*prev.response, *req]
            conv, prev = [*conv, *prev.response, *req], call
            on_server += 1
            continue
        new = req[len(conv) :]
        if _reply_left_out(new, prev.response):
            produced += [*prev.response, *new]  # the recorded reply, where the replay left it out
            left_out += 1
        else:
            produced += _prefer_reply(new[: len(prev.response)], prev.response) + new[len(prev.response) :]
        conv, prev = req, call
    if on_server:
        notes.append(f"{on_server} model request(s) go on from the previous call's response on the server "
                     "(gen_ai.conversation.id = its gen_ai.response.id): they send only what is new")
    if left_out:
        notes.append(f"{left_out} model request(s) replay the tool results without the tool-call message before "
                     "them: that message taken from the previous call's response")
    return produced + list(prev.response)


def _after_overlap(produced: Sequence[Msg], answer: Sequence[Msg]) -> list[Msg]:
    """The agent span's messages that do not repeat the end of what the model calls produced (an
    agent span that records the whole run's output, where a later model call replayed nothing).

    Example:
        >>> call = Msg("assistant", "", (Call("c1", "w"),))
        >>> [m.role for m in _after_overlap([call], [call, Msg("tool", "sunny"), Msg("assistant", "Sunny.")])]
        ['tool', 'assistant']
    """
    keys = [msg_key(m) for m in produced]
    for k in range(min(len(keys), len(answer)), 0, -1):
        if keys[-k:] == [msg_key(m) for m in answer[:k]]:
            return list(answer[k:])
    return list(answer)


def _tool_msg(call: Call, tool: SpanView) -> Msg:
    result = tool.tool_result
    part = {"type": "tool-result", "tool_call_id": call.id, "tool_name": call.name, "result": result}
    content = result if isinstance(result, str) else text_of(result)
    return Msg("tool", content, tool_call_id=call.id or None, name=call.name or None, parts=(part,))


def _fill_tool_results(produced: list[Msg], tools: Sequence[SpanView]) -> list[Msg]:
    # Tool results the model requests do not show (the run ended, or the framework replays
    # only a placeholder): take them from the tools' own spans, matched by call id, else by
    # name when that tool span has no id.
    unused = [t for t in tools if t.tool_result is not None]

    def take(call: Call) -> SpanView | None:
        match = next((t for t in unused if call.id and t.tool_call_id == call.id), None) or next(
            (t for t in unused if t.tool_name == call.name and (t.tool_call_id is None or not call.id)), None
        )
        if match is not None:
            unused.remove(match)
        return match

    out: list[Msg] = []
    pending: list[Call] = []
    for msg in produced:
        if msg.role == "assistant" and msg.tool_calls:
            pending = list(msg.tool_calls)
        elif msg.role == "tool" and msg.placeholder:
            call = next((c for c in pending if c.name == msg.name), pending[0] if pending else Call("", msg.name or ""))
            if call in pending:
                pending.remove(call)
            tool = take(call)
            out.append(
                _tool_msg(call, tool) if tool is not None else Msg("tool", "", tool_call_id=call.id or None, name=msg.name)
            )
            continue
        out.append(msg)
    answered = {m.tool_call_id for m in out if m.role == "tool" and m.tool_call_id}
    filled: list[Msg] = []
    for msg in out:
        filled.append(msg)
        for call in msg.tool_calls if msg.role == "assistant" else ():
            if call.id and call.id not in answered and (tool := take(call)) is not None:
                answered.add(call.id)
                filled.append(_tool_msg(call, tool))
    return filled


def recover_tool_calls(tools: Sequence[SpanView]) -> list[Msg]:
    """Tool calls and results rebuilt from tool spans, in order, for runs whose model calls do not show them.

    Each named tool span becomes an assistant message calling it (its arguments as
    recorded) and the tool result. A span without a call id gets ``call_<span id>``: ours,
    and the same every time the trace is read.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "get_weather")
        >>> tool = SpanView(span, "openinference", "tool", tool_name="get_weather",
        ...                 tool_arguments={"city": "Paris"}, tool_result="sunny")
        >>> [(m.role, m.content, [(c.id, c.arguments) for c in m.tool_calls]) for m in recover_tool_calls([tool])]
        [('assistant', '', [('call_bbbbbbbbbbbbbbbb', {'city': 'Paris'})]), ('tool', 'sunny', [])]
    """
    out: list[Msg] = []
    for tool in tools:
        if not tool.tool_name:
            continue
        call = Call(tool.tool_call_id or f"call_{tool.span.span_id}", tool.tool_name, tool.tool_arguments)
        out += [Msg("assistant", "", (call,)), _tool_msg(call, tool)]
    return out


def _with_tool_spans(
    produced: list[Msg], first_request: Sequence[Msg], tools: Sequence[SpanView], notes: list[str]
) -> list[Msg]:
    """Put the tool spans' calls before the final answer when no message of the run shows a tool call."""
    if not tools or any(m.tool_calls for m in (*first_request, *produced)):
        return produced
    recovered = recover_tool_calls(tools)
    if not recovered:
        return produced
    notes.append(f"{len(recovered) // 2} tool call(s) recovered from tool spans (no model call recorded them)")
    k = len(produced)
    while k > 0 and produced[k - 1].role == "assistant" and not produced[k - 1].tool_calls:
        k -= 1
    return [*produced[:k], *recovered, *produced[k:]]


def build_run(
    run_span: TraceSpan,
    run_view: SpanView | None,
    calls: Sequence[SpanView],
    tools: Sequence[SpanView] = (),
    *,
    framework: str | None = None,
    notes: list[str] | None = None,
    converse: bool = True,
) -> AgentRun:
    """Build one `AgentRun` scored on ``run_span`` from its agent view (if any) and its LLM calls.

    ``calls`` are the LLM views that belong to the run, sorted by start time; ``tools`` its
    tool spans (for tool results the model requests do not show, and for the tool calls
    themselves when no model call shows any). The tools that are ``framework``'s way of
    answering (smolagents' ``final_answer``) are the answer, not tool calls, and its own
    control steps (DSPy ReAct's ``finish``) are neither. ``converse=False`` says the model
    calls prompt in the framework's own format (DSPy): the conversation is then the run
    view's, and the calls give only the system prompt (the first one's), model and usage.
    ``notes`` receives how the run was put together.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat", resource={"service.name": "bot"})
        >>> call = SpanView(span, "genai", "llm", request=[Msg("system", "Be terse."), Msg("user", "Hi")],
        ...                 response=[Msg("assistant", "Hello")])
        >>> run = build_run(span, None, [call])
        >>> (run.input.system_messages[0].content, run.input.input_messages[0].content, run.output[0].content)
        ('Be terse.', 'Hi', 'Hello')
    """
    notes = [] if notes is None else notes
    answer_names = answer_tools(framework)
    answers = [t for t in tools if t.tool_name in answer_names]
    steps = [t for t in tools if t.tool_name in step_tools(framework)]
    tools = [t for t in tools if t.tool_name not in answer_names and t not in steps]
    if steps:
        notes.append(f"{len(steps)} {framework} control step(s) ({', '.join(sorted({str(t.tool_name) for t in steps}))}) "
                     "left out: not tool calls of the agent")
    system: list[str] = list(run_view.system) if run_view is not None else []
    produced: list[Msg]
    if run_view is not None and not converse and not run_view.conversation:
        first_call = next((c for c in calls if c.request or c.system), None)
        if first_call is not None:
            system += first_call.system + [m.content for m in first_call.request if m.role == "system"]
        system += [m.content for m in run_view.request if m.role == "system"]
        first_request, produced = non_system(run_view.request), list(run_view.response)
        notes.append("the model requests do not hold the run's input (the framework's own prompt format): input and "
                     "answer from the run span, system prompt from the first model request, tool calls from tool spans")
    elif run_view is not None and run_view.conversation:
        system += [m.content for m in run_view.conversation if m.role == "system"]
        first_call = next((c for c in calls if c.request or c.system), None)
        if first_call is not None:
            system += first_call.system + [m.content for m in first_call.request if m.role == "system"]
        first_request, produced = _conversation_split(run_view, calls)
    else:
        first, used = chain(calls)
        if first is not None:
            system += first.system + [m.content for m in first.request if m.role == "system"]
            first_request = non_system(first.request)
            produced = _produced(used, notes)
            if run_view is not None and run_view.response:
                # the agent span's own answer, when the model calls do not end with it: the run
                # ended on a tool step, or a later call did not replay the conversation
                ends_open = not produced or produced[-1].role == "tool" or bool(produced[-1].tool_calls)
                broken = any(c.span.start_ns > used[-1].span.start_ns and c not in used for c in calls)
                final = run_view.response[-1].content.strip()
                if (ends_open or broken) and not any(m.content.strip() == final for m in produced):
                    produced += _after_overlap(produced, run_view.response)
        elif run_view is not None:
            system += [m.content for m in run_view.request if m.role == "system"]
            first_request = non_system(run_view.request)
            produced = list(run_view.response)
            if not produced:
                produced = [r for c in calls for r in c.response][-1:]
        else:
            first_request = []
            produced = [r for c in calls for r in c.response]
    if answers and not any(m.role == "assistant" and m.content and not m.tool_calls for m in produced[-1:]):
        produced.append(Msg("assistant", text_of(answer_of(answers[-1]))))
    produced = _with_tool_spans(produced, first_request, tools, notes)
    if tools or any(m.placeholder for m in produced):
        produced = _fill_tool_results(produced, tools)
    linked = link_tool_results([*first_request, *produced])
    first_request, produced = linked[: len(first_request)], linked[len(first_request) :]
    remembered, inp = split_turn(first_request)
    messages = RunMessages(inp, remembered, [Msg("system", t) for t in _dedupe(system)], produced)
    convention = run_view.convention if run_view is not None else (calls[0].convention if calls else "")
    return AgentRun.from_messages(
        messages,
        trace_id=run_span.trace_id,
        span_id=run_span.span_id,
        span_name=run_span.name,
        service=run_span.service or next((c.span.service for c in calls if c.span.service), ""),
        convention=convention,
        start_ns=run_span.start_ns,
        end_ns=run_span.end_ns,
        request_context=_context(run_span, run_view, calls),
        resource=dict(run_span.resource),
    )


def _context(run_span: TraceSpan, run_view: SpanView | None, calls: Sequence[SpanView]) -> dict[str, Any]:
    ctx: dict[str, Any] = {}
    service = run_span.service or next((c.span.service for c in calls if c.span.service), "")
    if service:
        ctx["service"] = service
    sources = ([run_view] if run_view is not None else []) + list(reversed(calls))
    for view in sources:
        for key, value in view.context.items():
            if key == "response_id" or value is None:
                continue
            ctx.setdefault(key, value)
    own = run_view if run_view is not None else next((c for c in calls if c.span is run_span), None)
    if own is not None and own.context.get("response_id"):
        ctx["response_id"] = own.context["response_id"]
    usage = run_view.usage if run_view is not None and run_view.usage else _sum_usage(calls)
    if usage:
        ctx["usage"] = dict(usage)
    return ctx
