"""Spans as backends return them in OTLP's JSON shape -> the adapters' `TraceSpan`.

Phoenix (``/spans/otlpv1``) and MLflow (``traces/batchGet``) both answer with OTLP ``Span``
objects in JSON, each its own way: ids in hex (Phoenix) or base64 (MLflow, proto3 JSON),
``null`` for unset fields (Phoenix), the kind as an enum name or number, snake_case or
camelCase keys, 64-bit integers as numbers or strings. Values decode as the receivers decode
protobuf (`adapters.any_value_to_python`: bytes as base64 text, arrays and key-value lists
as lists and dicts), read straight from the JSON: going through protobuf's ``ParseDict``
first cost more than everything else of a page.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any

from adapters import SpanEvent, TraceSpan
from collector.common.errors import PullError

_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
          "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
_STATUS = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # OTLP SpanFlags


def _get(node: Mapping[str, Any], snake: str) -> Any:
    """A field by its snake_case name or its camelCase JSON name."""
    value = node.get(snake)
    if value is None and "_" in snake:
        head, *rest = snake.split("_")
        value = node.get(head + "".join(part.title() for part in rest))
    return value


def hex_id(value: Any, hex_digits: int) -> str:
    """An id as lowercase hex: hex of the right length as it is, else decoded from base64
    ("" when absent).

    Example:
        >>> hex_id("0A0AE730DBA93E2C", 16), hex_id("CgrnMNupPiw=", 16), hex_id(None, 16)
        ('0a0ae730dba93e2c', '0a0ae730dba93e2c', '')
    """
    if not value:
        return ""
    text = str(value)
    if len(text) == hex_digits and re.fullmatch(r"[0-9a-fA-F]+", text):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        raise ValueError(f"not a hex or base64 id: {text[:40]!r}") from None


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` in JSON as a Python value (None when unset).

    Example:
        >>> any_value({"array_value": {"values": [{"int_value": "3"}, {"kvlistValue": {"values": [
        ...     {"key": "k", "value": {"bool_value": True}}]}}]}, "string_value": None})
        [3, {'k': True}]
        >>> any_value({"bytes_value": "AQI="}), any_value({"double_value": 0.5}), any_value({})
        ('AQI=', 0.5, None)
    """
    if not isinstance(value, Mapping):
        return None
    for key, cast in (("string_value", str), ("bool_value", bool), ("int_value", int), ("double_value", float)):
        found = _get(value, key)
        if found is not None:
            return cast(found)
    found = _get(value, "array_value")
    if found is not None:
        return [any_value(v) for v in found.get("values") or ()]
    found = _get(value, "kvlist_value")
    if found is not None:
        return key_values(found.get("values") or ())
    found = _get(value, "bytes_value")
    return None if found is None else str(found)


def key_values(items: Iterable[Any]) -> dict[str, Any]:
    """A repeated ``KeyValue`` in JSON as a dict (the last value of a repeated key wins)."""
    return {str(kv["key"]): any_value(kv.get("value")) for kv in items}


def _enum(value: Any, names: Mapping[str, int]) -> int:
    return names.get(value, 0) if isinstance(value, str) else int(value or 0)


def trace_span(document: Mapping[str, Any], resource: Mapping[str, Any] | None = None,
               scope: tuple[str, str] = ("", "")) -> TraceSpan:
    """One OTLP span in JSON as a `TraceSpan`, with the ``resource`` and ``scope`` the backend kept.

    Raises:
        ValueError, KeyError, TypeError: it is not an OTLP span (`trace_spans` reports it).

    Example:
        >>> s = trace_span({"trace_id": "ab" * 16, "span_id": "cd" * 8, "parent_span_id": None, "name": "chat",
        ...     "kind": "SPAN_KIND_CLIENT", "events": None, "status": {"code": 2}, "flags": 0x300,
        ...     "start_time_unix_nano": "5", "attributes": [{"key": "a", "value": {"int_value": "7"}}]})
        >>> (s.span_id, s.parent_span_id, s.kind, s.status_code, s.start_ns, s.attributes, s.parent_is_remote)
        ('cdcdcdcdcdcdcdcd', None, 3, 2, 5, {'a': 7}, True)
    """
    flags = int(_get(document, "flags") or 0)
    status = _get(document, "status") or {}
    return TraceSpan(
        trace_id=hex_id(_get(document, "trace_id"), 32),
        span_id=hex_id(_get(document, "span_id"), 16),
        parent_span_id=hex_id(_get(document, "parent_span_id"), 16) or None,
        name=str(document.get("name") or ""),
        kind=_enum(document.get("kind"), _KINDS),
        start_ns=int(_get(document, "start_time_unix_nano") or 0),
        end_ns=int(_get(document, "end_time_unix_nano") or 0),
        attributes=key_values(document.get("attributes") or ()),
        events=tuple(SpanEvent(str(e.get("name") or ""), int(_get(e, "time_unix_nano") or 0),
                               key_values(e.get("attributes") or ())) for e in document.get("events") or ()),
        status_code=_enum(status.get("code"), _STATUS),
        resource=dict(resource or {}),
        scope_name=scope[0], scope_version=scope[1],
        parent_is_remote=bool(flags & _IS_REMOTE) if flags & _HAS_IS_REMOTE else None,
    )


def trace_spans(documents: Iterable[Any], resource: Mapping[str, Any] | None = None,
                scope: tuple[str, str] = ("", ""), where: str = "") -> list[TraceSpan]:
    """Decode a backend's spans (OTLP JSON) with the ``resource`` and ``scope`` it kept for them
    (``where``: the request they came from, named in an error).

    Raises:
        PullError: one of them is not an OTLP span.

    Example:
        >>> (span,) = trace_spans([{"trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "chat",
        ...     "attributes": [{"key": "gen_ai.operation.name", "value": {"string_value": "chat"}}]}],
        ...     {"service.name": "bot"})
        >>> (span.service, span.attributes, span.parent_span_id)
        ('bot', {'gen_ai.operation.name': 'chat'}, None)
        >>> trace_spans([{"trace_id": "ab" * 16, "span_id": "cd" * 8, "start_time_unix_nano": "soon"}],
        ...             where="GET http://h/x")
        Traceback (most recent call last):
        ...
        collector.common.errors.PullError: GET http://h/x: a span is not OTLP JSON: ValueError: invalid literal for int() with base 10: 'soon'
    """
    shared = dict(resource or {})
    try:
        return [trace_span(d, shared, scope) for d in documents]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise PullError(f"{where + ': ' if where else ''}a span is not OTLP JSON: "
                        f"{type(err).__name__}: {str(err)[:200]}") from None
