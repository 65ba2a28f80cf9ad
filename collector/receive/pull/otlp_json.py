"""Spans as backends return them in OTLP's JSON shape -> the adapters' `TraceSpan`.

Phoenix (``/spans/otlpv1``) and MLflow (``traces/batchGet``) both answer with OTLP ``Span``
objects in JSON, each its own way: ids in hex (Phoenix) or base64 (MLflow, proto3 JSON),
``null`` for unset fields (Phoenix), enum names for the kind. Both are normalised to proto3
JSON and parsed into the OTLP protobuf ``Span``, then decoded by the same function the
receivers' spans go through (`adapters.spans_from_resource_spans`): a span pulled back is
decoded exactly as it was when it arrived live.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

from adapters import TraceSpan, spans_from_resource_spans
from collector.errors import PullError

_ID_KEYS = {"trace_id": 32, "span_id": 16, "parent_span_id": 16, "traceId": 32, "spanId": 16, "parentSpanId": 16}


def _drop_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _drop_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_nulls(v) for v in node]
    return node


def _id_base64(value: str, hex_digits: int) -> str:
    """An id as proto3 JSON wants it (base64): hex of the right length is converted, anything
    else is taken as base64 already.

    Example:
        >>> _id_base64("0a0ae730dba93e2c", 16), _id_base64("CgrnMNupPiw=", 16)
        ('CgrnMNupPiw=', 'CgrnMNupPiw=')
    """
    if len(value) == hex_digits and re.fullmatch(r"[0-9a-fA-F]+", value):
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    return value


def span_proto(document: Mapping[str, Any], where: str = "") -> Span:
    """One OTLP span in JSON (hex or base64 ids, nulls allowed) as the protobuf ``Span``.

    Raises:
        PullError: it does not parse as an OTLP span.

    Example:
        >>> s = span_proto({"trace_id": "ab" * 16, "span_id": "cd" * 8, "parent_span_id": None,
        ...                 "name": "chat", "kind": "SPAN_KIND_CLIENT", "events": None})
        >>> (s.span_id.hex(), s.kind, s.parent_span_id)
        ('cdcdcdcdcdcdcdcd', 3, b'')
    """
    try:
        clean = _drop_nulls(dict(document))
        for key, digits in _ID_KEYS.items():
            if isinstance(clean.get(key), str) and clean[key]:
                clean[key] = _id_base64(clean[key], digits)
        return json_format.ParseDict(clean, Span(), ignore_unknown_fields=True)
    except Exception as err:  # ParseError, ValueError, TypeError: the backend's JSON is not a span
        raise PullError(f"{where + ': ' if where else ''}a span is not OTLP JSON: {str(err)[:200]}") from None


def _key_values(attributes: Mapping[str, Any]) -> list[KeyValue]:
    """Plain values (a resource kept as a mapping) as OTLP key-values.

    Example:
        >>> [kv.value.string_value for kv in _key_values({"service.name": "bot", "n": None})]
        ['bot']
    """
    out = []
    for key, value in attributes.items():
        any_value = _any_value(value)
        if any_value is not None:
            out.append(KeyValue(key=key, value=any_value))
    return out


def _any_value(value: Any) -> AnyValue | None:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    return None


def trace_spans(documents: Iterable[Mapping[str, Any]], resource: Mapping[str, Any] | None = None,
                scope: tuple[str, str] = ("", ""), where: str = "") -> list[TraceSpan]:
    """Decode a backend's spans (OTLP JSON) with the ``resource`` and ``scope`` it kept for them
    (``where``: the request they came from, named in an error).

    Example:
        >>> (span,) = trace_spans([{"trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "chat",
        ...     "attributes": [{"key": "gen_ai.operation.name", "value": {"string_value": "chat"}}]}],
        ...     {"service.name": "bot"})
        >>> (span.service, span.attributes, span.parent_span_id)
        ('bot', {'gen_ai.operation.name': 'chat'}, None)
    """
    rs = ResourceSpans()
    rs.resource.attributes.extend(_key_values(resource or {}))
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = scope
    ss.spans.extend(span_proto(d, where) for d in documents)
    return spans_from_resource_spans([rs])
