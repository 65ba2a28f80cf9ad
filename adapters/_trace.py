"""Decoded OTLP data the adapters read: `TraceSpan`, `SpanEvent`, `TraceLog`, `AssembledTrace`.

Owned by the adapters. These are plain frozen dataclasses holding Python values (ids as
lowercase hex strings, attribute values converted from OTLP ``AnyValue`` to
str/int/float/bool/list/dict), so every stage after decoding is free of protobuf.
Invariant: ``trace_id`` is 32 hex digits and ``span_id`` 16 hex digits when the producer
sent valid ids; an empty parent id is ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """One span event (name, time and attributes).

    Example:
        >>> SpanEvent(name="gen_ai.choice", time_ns=1, attributes={"index": 0}).name
        'gen_ai.choice'
    """

    name: str
    time_ns: int = 0
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TraceSpan:
    """One span with its resource and instrumentation scope.

    Example:
        >>> span = TraceSpan(trace_id="ab" * 16, span_id="cd" * 8, parent_span_id=None,
        ...                  name="chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat"})
        >>> (span.name, span.attributes["gen_ai.operation.name"], span.service)
        ('chat gpt-4o-mini', 'chat', '')
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int = 0
    start_ns: int = 0
    end_ns: int = 0
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    status_code: int = 0
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    parent_is_remote: bool | None = None  # OTLP span flags: the parent lives in another process (None: not said)
    _key_prefixes: frozenset[str] | None = field(default=None, init=False, repr=False, compare=False)

    def has_key_prefix(self, *prefixes: str) -> bool:
        """Whether an attribute key starts with one of ``prefixes``, each one or two dotted
        segments with their dot (``"haystack."``, ``"gen_ai.prompt."``): the convention modules
        ask this of every span, so the keys' prefixes are gathered once per span, not scanned
        for each question.

        Example:
            >>> span = TraceSpan("a" * 32, "b" * 16, None, "x", attributes={"gen_ai.prompt.0.role": "user"})
            >>> span.has_key_prefix("gen_ai.prompt."), span.has_key_prefix("gen_ai."), span.has_key_prefix("gen_ai.completion.")
            (True, True, False)
        """
        known = self._key_prefixes
        if known is None:
            found: set[str] = set()
            for key in self.attributes:
                first = key.find(".")
                if first >= 0:
                    found.add(key[: first + 1])
                    second = key.find(".", first + 1)
                    if second >= 0:
                        found.add(key[: second + 1])
            known = frozenset(found)
            object.__setattr__(self, "_key_prefixes", known)  # frozen: set once, like a cached property
        return not known.isdisjoint(prefixes)

    @property
    def service(self) -> str:
        """The resource's ``service.name`` ("" when absent or not a string).

        Example:
            >>> TraceSpan("a" * 32, "b" * 16, None, "x", resource={"service.name": "bot"}).service
            'bot'
        """
        value = self.resource.get("service.name")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class TraceLog:
    """One OTLP log record linked to a span (how some conventions carry message content).

    ``event_name`` is the record's ``event_name`` field, or its ``event.name`` attribute for
    older SDKs that only set the attribute.

    Example:
        >>> log = TraceLog(trace_id="ab" * 16, span_id="cd" * 8,
        ...                event_name="gen_ai.client.inference.operation.details")
        >>> log.body is None
        True
    """

    trace_id: str
    span_id: str | None
    event_name: str
    time_ns: int = 0
    body: Any = None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AssembledTrace:
    """All spans of one trace (any order), plus the log records that belong to it.

    Example:
        >>> trace = AssembledTrace(trace_id="ab" * 16, spans=())
        >>> (trace.trace_id[:4], trace.logs)
        ('abab', ())
    """

    trace_id: str
    spans: tuple[TraceSpan, ...]
    logs: tuple[TraceLog, ...] = ()
