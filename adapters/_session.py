"""Which conversation a run belongs to: its session key (SPEC §7).

A run's session is named by the first of `SESSION_KEYS` (then the deployment's extra keys)
found on the run span, else on the spans above it, nearest first, up to the trace's root
span. The value is kept exactly as the spans carry it (the backends group a session by
that value), but on MLflow's spans, where every value set through MLflow is JSON text: a
JSON string there (``"\"chat-7\""``) names the session by the text it encodes, as MLflow's
server reads it (`adapters.mlflow.session_text`). A run without one belongs to no
conversation. Two services never share a session: the collector scopes a session by service
(`collector.common.session_types.session_scope`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters._tree import SpanTree
from adapters.mlflow import session_text

__all__ = ["SESSION_KEYS", "run_session", "session_of"]

SESSION_KEYS: tuple[str, ...] = (
    "session.id",
    "langfuse.session.id",
    "gen_ai.conversation.id",
    "ai.telemetry.metadata.sessionId",
    "ai.telemetry.metadata.conversationId",
    "traceloop.association.properties.session_id",
    "traceloop.association.properties.chat_id",
    "mlflow.trace.session",
    "mlflow.traceTag.session_id",
)
"""The attributes that name a run's session, in the order they are looked for."""


def session_of(attributes: Mapping[str, Any], keys: Sequence[str] = SESSION_KEYS) -> str | None:
    """The session named by the first of ``keys`` that one span's attributes carry.

    A value counts when it is a non-blank string or an integer (not a bool); other values
    (lists, blanks) are passed over, as if absent.

    Example:
        >>> session_of({"gen_ai.conversation.id": "conv-7", "session.id": "s-1"})
        's-1'
        >>> session_of({"session.id": "  ", "langfuse.session.id": 42})
        '42'
        >>> session_of({"session.id": True}) is None
        True
    """
    if attributes.keys().isdisjoint(keys):  # most spans carry none: one check instead of one lookup per key
        return None
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return str(value)
        if isinstance(value, str) and value.strip():
            return value
    return None


def run_session(tree: SpanTree, span_id: str, extra_keys: Sequence[str] = ()) -> str | None:
    """The session key of the run scored on span ``span_id`` of the trace ``tree`` holds (None:
    no session).

    Example:
        >>> from adapters._trace import TraceSpan
        >>> root = TraceSpan("a" * 32, "1" * 16, None, "POST /chat", attributes={"session.id": "s-9"})
        >>> run = TraceSpan("a" * 32, "2" * 16, "1" * 16, "invoke_agent bot", attributes={})
        >>> run_session(SpanTree([root, run]), "2" * 16)
        's-9'
        >>> tagged = TraceSpan("a" * 32, "2" * 16, "1" * 16, "agent", attributes={"thread": "t-1"})
        >>> run_session(SpanTree([root, tagged]), "2" * 16)  # "thread" is no session key
        's-9'
        >>> run_session(SpanTree([root, tagged]), "2" * 16, extra_keys=["thread"])  # the run span first
        't-1'
        >>> agent = TraceSpan("a" * 32, "3" * 16, None, "agent", attributes={"mlflow.spanType": '"AGENT"',
        ...                   "session.id": '"chat-7"'})
        >>> run_session(SpanTree([agent]), "3" * 16)  # MLflow's JSON text: the text it encodes
        'chat-7'
    """
    if span_id not in tree.by_id:
        return None
    keys = (*SESSION_KEYS, *(k for k in extra_keys if k not in SESSION_KEYS))
    for above in (span_id, *tree.ancestors(span_id)):
        span = tree.by_id[above]
        found = session_of(span.attributes, keys)
        if found is not None:
            return session_text(span, found)
    return None
