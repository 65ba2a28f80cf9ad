"""The evaluation span: one `collector.common.types.ScoreRecord` -> the ``evaluation <scorer>`` child span.

SPEC §5. The span is a child of the scored span (same trace, kind INTERNAL) named
``evaluation {scorer name}``, with one ``gen_ai.evaluation.result`` event. It is built so
that every backend shows the score beside the run without changing the run:

* the score attributes (``gen_ai.evaluation.*``, typed: the score value a double) are on
  the span itself as well as on the event, since backends filter spans by attribute and
  not by event;
* it is typed for the backends that type spans: ``openinference.span.kind`` (Phoenix) and
  ``mlflow.spanType`` (MLflow) are ``EVALUATOR``;
* its resource is the scored span's resource (``service.name`` and every other attribute):
  MLflow rewrites a trace's service from each batch's resource, and Phoenix files a trace
  in the project its resource names. tracescore is named in the instrumentation scope;
* with ``span_time = "anchored"`` (the default) it starts and ends when the scored span
  ended, so trace durations and latency charts are unchanged; the real scoring start and
  duration are ``tracescore.scored_at`` and ``tracescore.score.duration_ms``.
  ``"actual"`` uses the wall-clock scoring interval.

A conversation score (``ScoreRecord.session``, SPEC §7) lands in the session's last turn's
trace, child of its run span, and names its session: ``session.id`` and
``gen_ai.conversation.id`` (the key as the spans carry it), ``tracescore.session.turns``,
``tracescore.session.revision``, and ``tracescore.session.partial`` when it was scored early.

A score's span has status OK; a scorer that failed gives the same span with ``error.type``
and status ERROR. The span id derives from the score's key and its outcome
(`collector.common.ids.score_span_id_for`): a new outcome of the same job (a dead letter replayed)
is a new span, with ``tracescore.supersedes`` naming the span it replaces, because backends
keep the first copy of a span id (Phoenix, MLflow) or show every copy (Jaeger, Tempo).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, Literal

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope as PbScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, SpanFlags
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from collector.common.session_types import SessionScore
from collector.common.types import ScoreRecord
from collector.export.span_templates import SpanTemplates
from collector.export.timestamps import scored_at

SpanTime = Literal["anchored", "actual"]

# OpenTelemetry GenAI evaluation attributes (semantic conventions).
EVENT_NAME = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
ERROR_TYPE = "error.type"
# Span types of the backends that type spans.
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
MLFLOW_SPAN_TYPE = "mlflow.spanType"
EVALUATOR = "EVALUATOR"
# tracescore extensions.
TS_SCORER_ID = "tracescore.scorer.id"
TS_SCORER_VERSION = "tracescore.scorer.version"
TS_RUN_ID = "tracescore.run.id"
TS_JUDGE_MODEL = "tracescore.judge.model"
TS_JUDGE_INPUT_TOKENS = "tracescore.judge.usage.input_tokens"
TS_JUDGE_OUTPUT_TOKENS = "tracescore.judge.usage.output_tokens"
TS_JUDGE_COST_USD = "tracescore.judge.cost_usd"
TS_JUDGE_ATTEMPTS = "tracescore.judge.attempts"
TS_DURATION_MS = "tracescore.score.duration_ms"
TS_SCORED_AT = "tracescore.scored_at"
TS_PREPROCESS = "tracescore.preprocess.result"
TS_ANALYZE = "tracescore.analyze.result"
TS_SCORED_SERVICE = "tracescore.scored.service"
TS_ERROR_MESSAGE = "tracescore.error.message"
TS_SUPERSEDES = "tracescore.supersedes"
# A conversation score's session: the key as the spans carry it, under both standard names.
SESSION_ID = "session.id"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
TS_SESSION_TURNS = "tracescore.session.turns"
TS_SESSION_REVISION = "tracescore.session.revision"
TS_SESSION_PARTIAL = "tracescore.session.partial"


def _version() -> str:
    try:
        return metadata.version("tracescore")
    except metadata.PackageNotFoundError:
        return "unknown"


SCOPE = InstrumentationScope("tracescore", _version())
"""The instrumentation scope of every evaluation span (and score log record)."""

TRACESCORE_RESOURCE = Resource({"service.name": "tracescore"})
"""The resource of what tracescore reports about itself (score metrics), not of scores."""


def record_attributes(record: ScoreRecord) -> dict[str, Any]:
    """The attributes a score span and its event carry (None values left out).

    Example:
        >>> attrs = record_attributes(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality",
        ...     scorer_version="1", run_id="r1", score=1, reason="good"))
        >>> attrs["gen_ai.evaluation.score.value"], attrs["gen_ai.evaluation.name"], attrs["mlflow.spanType"]
        (1.0, 'Quality', 'EVALUATOR')
    """
    attrs: dict[str, Any] = {
        GEN_AI_EVALUATION_NAME: record.scorer_name,
        OPENINFERENCE_SPAN_KIND: EVALUATOR,
        MLFLOW_SPAN_TYPE: EVALUATOR,
        TS_SCORER_ID: record.scorer_id,
        TS_RUN_ID: record.run_id,
        TS_DURATION_MS: (record.end_ns - record.start_ns) / 1e6,
        TS_SCORED_AT: scored_at(record.start_ns),
    }
    # The optional ones, in this order, each only when not None (set one by one: this runs for
    # every score exported, and a dict of them filtered again cost twice as much).
    for key, value in (
        (GEN_AI_EVALUATION_SCORE_VALUE, None if record.score is None else float(record.score)),
        (GEN_AI_EVALUATION_SCORE_LABEL, record.label),
        (GEN_AI_EVALUATION_EXPLANATION, record.reason),
        (GEN_AI_RESPONSE_ID, record.response_id),
        (TS_SCORER_VERSION, record.scorer_version),
        (TS_JUDGE_MODEL, ",".join(record.judge_models) or None),
        (TS_JUDGE_INPUT_TOKENS, record.input_tokens or None),
        (TS_JUDGE_OUTPUT_TOKENS, record.output_tokens or None),
        (TS_JUDGE_COST_USD, record.cost_usd),
        (TS_JUDGE_ATTEMPTS, record.judge_attempts or None),
        (TS_PREPROCESS, record.preprocess_json),
        (TS_ANALYZE, record.analyze_json),
        (TS_SCORED_SERVICE, record.service or None),
        (ERROR_TYPE, record.error_type),
        (TS_ERROR_MESSAGE, record.error_message),
        (TS_SUPERSEDES, record.supersedes),
    ):
        if value is not None:
            attrs[key] = value
    if record.session is not None:
        attrs.update(session_attributes(SessionScore.from_dict(record.session)))
    return attrs


def session_attributes(session: SessionScore) -> dict[str, Any]:
    """The attributes that name the session a conversation score scored (``partial`` only when true).

    Example:
        >>> session_attributes(SessionScore("bot/c1", "c1", turns=3, revision=2))
        {'session.id': 'c1', 'gen_ai.conversation.id': 'c1', 'tracescore.session.turns': 3, 'tracescore.session.revision': 2}
        >>> session_attributes(SessionScore("bot/c1", "c1", partial=True))["tracescore.session.partial"]
        True
    """
    attrs: dict[str, Any] = {
        SESSION_ID: session.session_id,
        GEN_AI_CONVERSATION_ID: session.session_id,
        TS_SESSION_TURNS: session.turns,
        TS_SESSION_REVISION: session.revision,
    }
    if session.partial:
        attrs[TS_SESSION_PARTIAL] = True
    return attrs


_SORTED_JSON = json.JSONEncoder(sort_keys=True, default=str)  # json.dumps's encoder for these options, made once


def _attribute_value(value: Any) -> Any:
    """A resource value as an OTel attribute: scalars and lists of one scalar type as they are,
    anything else (maps, mixed lists) as JSON text."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, bool, int, float)) for v in value):
        if len({type(v) for v in value}) == 1:
            return list(value)
    return _SORTED_JSON.encode(value)


@functools.lru_cache(maxsize=1024)
def _resource(frozen: str) -> Resource:
    return Resource({k: _attribute_value(v) for k, v in json.loads(frozen).items() if v is not None})


def resource_of(record: ScoreRecord) -> Resource:
    """The scored span's resource, or one naming only ``record.service`` (records queued before
    resources were kept). Equal resources are the same object: the OTLP encoder groups the
    spans of one batch by resource, so one request carries each resource once.

    Example:
        >>> rec = ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q",
        ...                   resource={"service.name": "bot", "env": "prod"})
        >>> dict(resource_of(rec).attributes)
        {'env': 'prod', 'service.name': 'bot'}
        >>> resource_of(rec) is resource_of(rec)
        True
    """
    return _resource(_resource_key(record))


def span_times(record: ScoreRecord, span_time: SpanTime = "anchored") -> tuple[int, int]:
    """The evaluation span's start and end: both the scored span's end when anchored (and known),
    else the wall-clock scoring interval.

    Example:
        >>> rec = ScoreRecord("k", "t", "s", "x", "q", "q", start_ns=50, end_ns=90, scored_end_ns=10)
        >>> span_times(rec), span_times(rec, "actual")
        ((10, 10), (50, 90))
    """
    if span_time == "anchored" and record.scored_end_ns > 0:
        return record.scored_end_ns, record.scored_end_ns
    return record.start_ns, record.end_ns


def build_span(record: ScoreRecord, span_time: SpanTime = "anchored") -> ReadableSpan:
    """The score span: child of the scored span, same trace, kind INTERNAL, one event.

    Example:
        >>> span = build_span(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", score=0.5))
        >>> (span.name, format(span.parent.span_id, "016x"), span.events[0].name, span.status.status_code.name)
        ('evaluation Quality', 'cdcdcdcdcdcdcdcd', 'gen_ai.evaluation.result', 'OK')
    """
    trace_id = int(record.trace_id, 16)
    flags = TraceFlags(TraceFlags.SAMPLED)
    ctx = SpanContext(trace_id, int(record.score_span_id, 16), is_remote=False, trace_flags=flags)
    parent = SpanContext(trace_id, int(record.span_id, 16), is_remote=True, trace_flags=flags)
    attrs = record_attributes(record)
    status = (
        Status(StatusCode.ERROR, record.error_message or record.error_type)
        if record.error_type
        else Status(StatusCode.OK)
    )
    start, end = span_times(record, span_time)
    return ReadableSpan(
        name=f"evaluation {record.scorer_name}",
        context=ctx,
        parent=parent,
        resource=resource_of(record),
        attributes=attrs,
        events=[Event(EVENT_NAME, attributes=attrs, timestamp=end)],
        kind=SpanKind.INTERNAL,
        status=status,
        start_time=start,
        end_time=end,
        instrumentation_scope=SCOPE,
    )


# ----------------------------------------------------------------- the same spans, encoded here

_REMOTE_PARENT = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_PB_SCOPE = PbScope(name=SCOPE.name, version=SCOPE.version or "")


def any_value(value: Any) -> AnyValue:
    """An attribute value as OTLP protobuf (as the SDK's encoder writes it).

    Example:
        >>> any_value(0.5).double_value, any_value(True).bool_value, [v.int_value for v in any_value([1, 2]).array_value.values]
        (0.5, True, [1, 2])
    """
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, (list, tuple)):
        return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    raise TypeError(f"not an attribute value: {value!r}")


def _key_values(attributes: Mapping[str, Any]) -> list[KeyValue]:
    return [_text_key_value(key, value) if type(value) is str else KeyValue(key=key, value=any_value(value))
            for key, value in attributes.items()]


@functools.lru_cache(maxsize=4096)
def _text_key_value(key: str, value: str) -> KeyValue:
    """A text attribute, built once: scorer names, ids, versions and span kinds repeat on every
    score (the message is copied into each span, which costs less than building it)."""
    return KeyValue(key=key, value=AnyValue(string_value=value))


@functools.lru_cache(maxsize=1024)
def _pb_resource(frozen: str) -> PbResource:
    return PbResource(attributes=_key_values(dict(_resource(frozen).attributes)))


def _resource_key(record: ScoreRecord) -> str:
    """The scored span's resource as sorted JSON: equal resources, equal keys."""
    attributes = record.resource or ({"service.name": record.service} if record.service else {})
    return _SORTED_JSON.encode(attributes)


def _id_bytes(hex_id: str, size: int) -> bytes:
    return int(hex_id, 16).to_bytes(size, "big")


def encode_span(record: ScoreRecord, span_time: SpanTime = "anchored") -> Span:
    """`build_span`'s span as the OTLP protobuf message the SDK's encoder makes of it, built
    directly (a score's export then costs half the CPU).

    Example:
        >>> span = encode_span(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", score=0.5))
        >>> (span.name, span.parent_span_id.hex(), span.events[0].name, span.attributes[0].value.string_value)
        ('evaluation Quality', 'cdcdcdcdcdcdcdcd', 'gen_ai.evaluation.result', 'Quality')
    """
    return _fill_span(Span(), record, span_time)


def _fill_span(span: Span, record: ScoreRecord, span_time: SpanTime) -> Span:
    """Write `encode_span`'s span into ``span`` (a new, empty one: a request's own, so that it is
    not copied into the request afterwards): a copy of the span of its attributes' shape, then
    its own ids and times."""
    _TEMPLATES.fill(span, record_attributes(record), _build_shape)
    start, end = span_times(record, span_time)
    span.trace_id = _id_bytes(record.trace_id, 16)
    span.span_id = _id_bytes(record.score_span_id, 8)
    span.parent_span_id = _id_bytes(record.span_id, 8)
    span.start_time_unix_nano = start
    span.end_time_unix_nano = end
    span.events[0].time_unix_nano = end
    if record.error_type:
        span.status.message = record.error_message or record.error_type
    return span


def _build_shape(span: Span, attributes: Mapping[str, Any]) -> None:
    """What every span with these attributes has: its name, kind, attributes, event and status."""
    key_values = _key_values(attributes)
    span.name = f"evaluation {attributes[GEN_AI_EVALUATION_NAME]}"
    span.kind = Span.SPAN_KIND_INTERNAL
    span.attributes.extend(key_values)
    span.events.add(name=EVENT_NAME).attributes.extend(key_values)
    span.status.code = PbStatus.STATUS_CODE_ERROR if attributes.get(ERROR_TYPE) else PbStatus.STATUS_CODE_OK
    span.flags = _REMOTE_PARENT


# The attributes whose values are the same for many scores (a scorer's, a service's, a label):
# part of a span template's shape. Every other one is written into each copy.
_TEMPLATES = SpanTemplates(shared=frozenset({
    GEN_AI_EVALUATION_NAME, OPENINFERENCE_SPAN_KIND, MLFLOW_SPAN_TYPE, TS_SCORER_ID, TS_SCORER_VERSION,
    GEN_AI_EVALUATION_SCORE_LABEL, TS_JUDGE_MODEL, TS_SCORED_SERVICE, ERROR_TYPE, TS_SESSION_PARTIAL}))


def encode_spans(
    records: Sequence[ScoreRecord], span_time: SpanTime = "anchored",
    on_error: Callable[[ScoreRecord, Exception], None] | None = None,
) -> ExportTraceServiceRequest:
    """One OTLP export request holding the evaluation spans of ``records``: one resource entry per
    distinct resource, in order of first appearance, as the SDK's encoder groups them. Each span
    is built in its place in the request, never copied into it.

    A record that cannot become a span (`encode_span` raises ValueError or TypeError) is left
    out and handed to ``on_error`` with the error; without ``on_error`` the error is raised.

    Example:
        >>> recs = [ScoreRecord(str(i), "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q", service=s)
        ...         for i, s in enumerate(["a", "b", "a"])]
        >>> [len(rs.scope_spans[0].spans) for rs in encode_spans(recs).resource_spans]
        [2, 1]
        >>> bad = ScoreRecord("x", "not hex", "cd" * 8, "ef" * 8, "q", "Q", service="c")
        >>> failed = []
        >>> request = encode_spans([bad, *recs], on_error=lambda rec, err: failed.append(rec.key))
        >>> failed, [len(rs.scope_spans[0].spans) for rs in request.resource_spans]
        (['x'], [2, 1])
    """
    request = ExportTraceServiceRequest()
    scopes: dict[str, ScopeSpans] = {}
    for record in records:
        key = _resource_key(record)
        scope = scopes.get(key)
        new_resource = scope is None
        if scope is None:
            entry = request.resource_spans.add()
            entry.resource.CopyFrom(_pb_resource(key))
            scope = scopes[key] = entry.scope_spans.add()
            scope.scope.CopyFrom(_PB_SCOPE)
        try:
            _fill_span(scope.spans.add(), record, span_time)
        except (ValueError, TypeError) as err:
            del scope.spans[-1]  # the request is left as if the record had never been in it
            if new_resource:
                del request.resource_spans[-1]
                del scopes[key]
            if on_error is None:
                raise
            on_error(record, err)
    return request
