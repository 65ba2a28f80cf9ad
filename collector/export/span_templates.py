"""Evaluation spans copied from a template of the same shape, rather than built attribute by attribute.

A score's span carries a dozen attributes twice (on the span and on its event), and most of
them are the same for every score of a scorer: its name and id, the span kinds, its version,
the service, the label. Building them costs one protobuf message per attribute and a copy of
each into the span and the event; copying a finished span of the same shape is one C call. So
the first span of a shape is built, kept, and every later one is a copy of it with the
attributes that differ from score to score (the run id, the times, the score, the reason...)
written into their places.

A shape is the attributes' keys in order, the type of every value (``True == 1``, but one is
written as a bool and the other as an int), and the value itself of each ``shared`` key: two
spans of one shape differ only in the values of the other keys, and in the fields every span
sets afterwards (ids, times). Only text, bool, int and float values are copied this way; a
span with any other value (a list) is built every time.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

__all__ = ["SpanTemplates"]

_FIELD_OF_TYPE = {str: "string_value", bool: "bool_value", int: "int_value", float: "double_value"}
"""Each scalar type's field in an OTLP ``AnyValue`` (as the SDK's encoder writes it: bool before int)."""
_SCALARS = frozenset(_FIELD_OF_TYPE)


@functools.lru_cache(maxsize=256)
def _shared_values(keys: tuple[str, ...], shared: frozenset[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A function giving, as a tuple, the values of those of ``keys`` that are ``shared`` (made
    once per set of keys)."""
    wanted = [key for key in keys if key in shared]
    if not wanted:
        return lambda attributes: ()
    if len(wanted) == 1:
        key = wanted[0]
        return lambda attributes: (attributes[key],)
    return operator.itemgetter(*wanted)


class _Template:
    __slots__ = ("per_score", "span")

    def __init__(self, span: Span, per_score: list[tuple[int, str, str]]) -> None:
        self.span = span
        self.per_score = per_score  # (attribute index, key, AnyValue field) of each value written per span


class SpanTemplates:
    """Templates of evaluation spans by shape (at most ``limit``, the oldest forgotten first).

    Example:
        >>> from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
        >>> def build(span, attributes):
        ...     kvs = [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()]
        ...     span.attributes.extend(kvs)
        ...     span.events.add(name="gen_ai.evaluation.result").attributes.extend(kvs)
        >>> templates = SpanTemplates(shared=frozenset({"gen_ai.evaluation.name"}))
        >>> spans = [Span(), Span()]
        >>> for span, run in zip(spans, ["r1", "r2"]):
        ...     templates.fill(span, {"gen_ai.evaluation.name": "Q", "tracescore.run.id": run}, build)
        >>> [(s.attributes[1].value.string_value, s.events[0].attributes[1].value.string_value) for s in spans]
        [('r1', 'r1'), ('r2', 'r2')]
        >>> len(templates)  # the second span was copied from the first one's template
        1
    """

    __slots__ = ("_by_shape", "_limit", "_shared")

    def __init__(self, shared: frozenset[str], limit: int = 256) -> None:
        self._shared = shared
        self._limit = limit
        self._by_shape: dict[Hashable, _Template] = {}

    def __len__(self) -> int:
        return len(self._by_shape)

    def fill(self, span: Span, attributes: Mapping[str, Any],
             build: Callable[[Span, Mapping[str, Any]], None]) -> None:
        """Write into ``span`` (new and empty) what ``build(span, attributes)`` writes: a copy of
        the template of ``attributes``' shape with their values written in, or, the first time
        (and for a shape with a value that is not a scalar), what ``build`` itself writes. ``build``
        must write ``attributes`` in their order onto the span and onto its first event."""
        shape = self._shape_of(attributes)
        template = None if shape is None else self._by_shape.get(shape)
        if template is None:
            build(span, attributes)
            if shape is not None:
                self._keep(shape, span, attributes)
            return
        span.CopyFrom(template.span)
        own, event = span.attributes, span.events[0].attributes
        for index, key, field in template.per_score:
            value = attributes[key]
            setattr(own[index].value, field, value)
            setattr(event[index].value, field, value)

    def _shape_of(self, attributes: Mapping[str, Any]) -> Hashable | None:
        """The shape of a span with ``attributes``, or None when one of them is not a scalar.
        (Asked for every span: each part is made by one call.)"""
        types = tuple(map(type, attributes.values()))
        if not _SCALARS.issuperset(types):
            return None
        keys = tuple(attributes)
        return keys, types, _shared_values(keys, self._shared)(attributes)

    def _keep(self, shape: Hashable, span: Span, attributes: Mapping[str, Any]) -> None:
        kept = Span()
        kept.CopyFrom(span)
        per_score = [(index, key, _FIELD_OF_TYPE[type(value)])
                     for index, (key, value) in enumerate(attributes.items()) if key not in self._shared]
        by_shape = self._by_shape
        by_shape[shape] = _Template(kept, per_score)
        if len(by_shape) > self._limit:
            by_shape.pop(next(iter(by_shape)), None)  # pop: safe if two threads evict
