"""`SpanView`: what one convention module reads from one span, in a convention-neutral form.

Owned by the adapters. A convention module turns a span it recognises into a `SpanView`
of kind ``agent`` (a run span), ``llm`` (one model request) or ``tool``; `_detect`
groups the views into runs. Helpers here read the attributes many conventions share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters._messages import Msg, loads, text_of
from adapters._trace import TraceSpan

__all__ = [
    "Report",
    "SpanView",
    "call_arguments",
    "common_context",
    "int_attr",
    "str_attr",
    "system_texts",
    "usage_from",
]

#: Called with a skip reason when a span is degraded (bad JSON, bad attribute type...).
Report = Callable[[str], None]


@dataclass(slots=True)
class SpanView:
    """One span as seen by its convention module.

    ``request``/``response`` are an LLM span's request and response messages (system
    messages included in ``request`` when the convention sends them as messages), or an
    agent span's own input/output messages. ``conversation`` is a whole run's conversation
    when the agent span carries it (pydantic-ai). ``weak`` marks an agent claim that yields
    to an agent span below it (the OpenAI Agents SDK trace root). ``fallback`` marks an
    LLM view used only when its run has no other LLM views (Mastra's whole-generation span
    beside its per-step spans). ``tool_*`` describe a tool span's call (used to fill in a
    tool result that no later model request replayed, and to recover the call itself when
    no model call recorded it). ``framework`` names the agent framework whose dialect the
    span was read with (see `adapters._dialect`); ``notes`` say how the span was read, for
    ``inspect --explain``.

    Example:
        >>> span = TraceSpan("a" * 32, "b" * 16, None, "chat")
        >>> SpanView(span=span, convention="genai", kind="llm", request=[Msg("user", "Hi")]).has_content
        True
    """

    span: TraceSpan
    convention: str
    kind: str
    request: list[Msg] = field(default_factory=list)
    response: list[Msg] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    conversation: list[Msg] | None = None
    weak: bool = False
    fallback: bool = False
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_result: Any = None
    tool_arguments: Any = None
    framework: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def has_content(self) -> bool:
        """Whether the span carries any message text at all.

        Example:
            >>> SpanView(span=TraceSpan("a" * 32, "b" * 16, None, "x"), convention="genai", kind="llm").has_content
            False
        """
        return bool(self.request or self.response or self.system or self.conversation)


def str_attr(attrs: Mapping[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` whose value is a non-empty string (ints are converted).

    Example:
        >>> str_attr({"a": 1, "b": "x"}, "c", "b")
        'x'
    """
    for key in keys:
        value = attrs.get(key)
        if value is None:  # most keys asked for are absent
            continue
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def int_attr(attrs: Mapping[str, Any], *keys: str) -> int | None:
    """The first of ``keys`` holding an integer (numeric strings accepted, bools refused).

    Example:
        >>> int_attr({"a": "12", "b": True}, "b", "a")
        12
        >>> int_attr({"a": "¹", "b": "7"}, "a", "b")  # a superscript is a digit, not a number int() reads
        7
    """
    for key in keys:
        value = attrs.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().isdecimal():  # isdigit() takes "¹", int() does not
            return int(value.strip())
    return None


def usage_from(attrs: Mapping[str, Any], prefix: str = "gen_ai.usage.") -> dict[str, int]:
    """Token usage from ``<prefix>input_tokens`` / ``output_tokens`` (or prompt/completion names).

    Example:
        >>> usage_from({"gen_ai.usage.input_tokens": 17, "gen_ai.usage.output_tokens": 6})
        {'input_tokens': 17, 'output_tokens': 6, 'total_tokens': 23}
    """
    usage: dict[str, int] = {}
    keys = _USAGE_KEYS.get(prefix)
    if keys is None:
        keys = _USAGE_KEYS[prefix] = frozenset(
            [prefix + "input_tokens", prefix + "prompt_tokens", prefix + "output_tokens",
             prefix + "completion_tokens", prefix + "total_tokens", "llm.usage.total_tokens"])
    if keys.isdisjoint(attrs):  # asked of every span; most model calls say no usage at all
        return usage
    return token_usage(int_attr(attrs, prefix + "input_tokens", prefix + "prompt_tokens"),
                       int_attr(attrs, prefix + "output_tokens", prefix + "completion_tokens"),
                       int_attr(attrs, prefix + "total_tokens", "llm.usage.total_tokens"))


def token_usage(inp: int | None, out: int | None, total: int | None) -> dict[str, int]:
    """A usage dict of the counts a span gave (the total, when not given, is input + output).

    Example:
        >>> token_usage(17, 6, None), token_usage(None, 6, None), token_usage(None, None, None)
        ({'input_tokens': 17, 'output_tokens': 6, 'total_tokens': 23}, {'output_tokens': 6}, {})
    """
    usage: dict[str, int] = {}
    if inp is not None:
        usage["input_tokens"] = inp
    if out is not None:
        usage["output_tokens"] = out
    if total is None and inp is not None and out is not None:
        total = inp + out
    if total is not None:
        usage["total_tokens"] = total
    return usage


_USAGE_KEYS: dict[str, frozenset[str]] = {}
"""Every attribute `usage_from` reads, per prefix (made on first use)."""


_CONTEXT_PAIRS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("agent_name", ("gen_ai.agent.name", "agent.name", "agent_name")),
    ("model", ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "model_name")),
    ("provider", ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")),
    ("conversation_id", ("gen_ai.conversation.id",)),
    ("session_id", ("session.id", "gen_ai.session.id", "traceloop.association.properties.session_id")),
    ("user_id", ("user.id", "enduser.id", "traceloop.association.properties.user_id")),
    ("response_id", ("gen_ai.response.id",)),
)
"""Each run-context entry `common_context` fills, with the attributes it is read from in order."""

_CONTEXT_KEYS = frozenset(key for _, keys in _CONTEXT_PAIRS for key in keys)


def common_context(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Run context from the attributes most conventions share (GenAI, OpenInference, Traceloop).

    Example:
        >>> common_context({"gen_ai.request.model": "gpt-4o-mini", "session.id": "s1"})
        {'model': 'gpt-4o-mini', 'session_id': 's1'}
    """
    ctx: dict[str, Any] = {}
    present = _CONTEXT_KEYS.intersection(attrs)  # asked of every span: look only where a key is
    if not present:
        return ctx
    for name, keys in _CONTEXT_PAIRS:
        if present.isdisjoint(keys):
            continue
        value = str_attr(attrs, *keys)
        if value is not None:
            ctx[name] = value
    return ctx


def system_texts(value: Any, report: Report | None = None) -> list[str]:
    """System prompt texts from ``gen_ai.system_instructions``-like values (JSON parts, list or plain text).

    Example:
        >>> system_texts('[{"type": "text", "content": "Be terse."}]')
        ['Be terse.']
        >>> system_texts("You are a terse assistant.")
        ['You are a terse assistant.']
    """
    if value is None:
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            return []
        if stripped[:1] in ("[", "{"):
            parsed = loads(stripped)
            if parsed is None:
                return [value]
            value = parsed
        else:
            return [value]
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, list):
        out = []
        for part in value:
            if isinstance(part, str):
                if part:
                    out.append(part)
            elif isinstance(part, dict):
                text = text_of([part]) if part.get("type", "text") == "text" else ""
                if text:
                    out.append(text)
        return out
    if report is not None:
        report("bad_attribute")
    return []


def call_arguments(value: Any) -> Any:
    """A tool span's arguments from its recorded input: parsed JSON, without a Python call's wrapping.

    Instrumentations that record the bound arguments of ``tool(*args, **kwargs)`` write
    ``{"args": [...], "kwargs": {...}}`` (smolagents adds ``sanitize_inputs_outputs``); the
    tool's arguments are then ``kwargs`` (or the only positional argument). Anything else is
    returned as parsed (plain text stays text).

    Example:
        >>> call_arguments('{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"city": "Paris"}}')
        {'city': 'Paris'}
        >>> call_arguments('{"city": "Paris"}'), call_arguments("Paris")
        ({'city': 'Paris'}, 'Paris')
    """
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        parsed = loads(value)
        value = value if parsed is None else parsed
    if isinstance(value, dict) and "kwargs" in value and set(value) <= {"args", "kwargs", "sanitize_inputs_outputs"}:
        kwargs, args = value.get("kwargs"), value.get("args")
        if kwargs or not isinstance(args, list) or len(args) != 1:
            return kwargs if kwargs is not None else {}
        return args[0]
    return value
