"""The evaluation span every backend gets (SPEC §5): typed score attributes on the span, EVALUATOR
span kinds, the scored span's resource with tracescore as the scope, anchored or actual time."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import example, given
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from collector.common.ids import run_id_for, score_span_id_for
from collector.common.session_types import SessionScore
from collector.common.types import RunRecord, ScoreJob, ScoreRecord
from collector.export.evaluation import build_span
from collector.export.timestamps import scored_at

TRACE, SPAN = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
RESOURCE = {"service.name": "support-bot", "deployment.environment": "prod", "host.ids": ["a", "b"],
            "k8s": {"pod": "p-1"}}


def record(**kw: object) -> ScoreRecord:
    base: dict = dict(key=f"{TRACE}/{SPAN}/quality/1", trace_id=TRACE, span_id=SPAN,
                      score_span_id=score_span_id_for(f"{TRACE}/{SPAN}/quality/1"), scorer_id="quality",
                      scorer_name="Quality", scorer_version="1", run_id=run_id_for(TRACE, SPAN), score=1,
                      start_ns=5_000_000_000, end_ns=5_250_000_000, scored_end_ns=2_000_000_000,
                      service="support-bot", resource=RESOURCE)
    base.update(kw)
    return ScoreRecord(**base)


def test_score_attributes_are_on_the_span_typed_and_the_span_is_an_evaluator() -> None:
    span = build_span(record())
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.evaluation.score.value"] == 1.0 and isinstance(attrs["gen_ai.evaluation.score.value"], float)
    assert attrs["gen_ai.evaluation.name"] == "Quality"
    assert attrs["openinference.span.kind"] == attrs["mlflow.spanType"] == "EVALUATOR"
    assert attrs["tracescore.run.id"] == run_id_for(TRACE, SPAN)
    assert dict(span.events[0].attributes or {}) == attrs  # the event carries the same attributes


def test_the_scored_spans_resource_and_tracescore_as_the_scope() -> None:
    span = build_span(record())
    assert dict(span.resource.attributes) == {
        "service.name": "support-bot", "deployment.environment": "prod", "host.ids": ("a", "b"),
        "k8s": json.dumps({"pod": "p-1"})}
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "tracescore" and span.instrumentation_scope.version
    old = build_span(record(resource={}))  # a record queued before resources were kept
    assert dict(old.resource.attributes) == {"service.name": "support-bot"}


def test_a_batch_from_several_services_is_grouped_per_resource() -> None:
    spans = [build_span(record(resource={"service.name": svc}, key=f"k{n}", score_span_id=f"{n + 1:016x}"))
             for n, svc in enumerate(["a", "b", "a", "b", "a"])]
    request = encode_spans(spans)
    services = [next(kv.value.string_value for kv in rs.resource.attributes if kv.key == "service.name")
                for rs in request.resource_spans]
    assert sorted(services) == ["a", "b"]
    assert sorted(len(rs.scope_spans[0].spans) for rs in request.resource_spans) == [2, 3]
    assert {rs.scope_spans[0].scope.name for rs in request.resource_spans} == {"tracescore"}


def test_anchored_time_is_the_scored_spans_end_and_actual_is_when_scoring_ran() -> None:
    anchored = build_span(record())
    assert anchored.start_time == anchored.end_time == 2_000_000_000
    assert anchored.events[0].timestamp == 2_000_000_000
    attrs = dict(anchored.attributes or {})
    assert attrs["tracescore.score.duration_ms"] == 250.0
    assert attrs["tracescore.scored_at"] == "1970-01-01T00:00:05.000Z"
    actual = build_span(record(), "actual")
    assert (actual.start_time, actual.end_time) == (5_000_000_000, 5_250_000_000)
    unknown = build_span(record(scored_end_ns=0))  # queued before the scored span's end was kept
    assert (unknown.start_time, unknown.end_time) == (5_000_000_000, 5_250_000_000)


def test_records_and_runs_queued_by_an_earlier_version_still_load() -> None:
    old_run = json.dumps({"trace_id": TRACE, "span_id": SPAN, "span_name": "invoke_agent", "service": "bot"})
    assert RunRecord.from_json(old_run).resource == {}
    old_record = json.dumps({"key": "k", "trace_id": TRACE, "span_id": SPAN, "score_span_id": "00f067aa0ba902b7",
                             "scorer_id": "q", "scorer_name": "Q", "score": 0.5, "service": "bot"})
    loaded = ScoreRecord.from_json(old_record)
    assert (loaded.resource, loaded.scored_end_ns, loaded.llm_judged) == ({}, 0, False)
    newer = json.dumps({**json.loads(old_record), "a_field_of_a_later_version": 1})
    assert ScoreRecord.from_json(newer).key == "k"


def test_the_run_id_is_one_per_agent_run_and_the_score_span_id_one_per_score() -> None:
    run = RunRecord(TRACE, SPAN)
    a, b = ScoreJob(run, "quality", "1"), ScoreJob(run, "brevity", "1")
    assert run.run_id == run_id_for(TRACE, SPAN) != run_id_for(TRACE, "0" * 15 + "1")
    assert score_span_id_for(a.key) != score_span_id_for(b.key)
    assert score_span_id_for(a.key) == score_span_id_for(ScoreJob(RunRecord(TRACE, SPAN), "quality", "1").key)


def test_spans_encoded_directly_are_the_ones_the_sdk_encodes() -> None:
    """The score exporter encodes evaluation spans itself (half the CPU of the SDK's encoder): the
    request must be exactly what the SDK makes of `build_span`'s spans, for every kind of record."""
    from collector.export.evaluation import encode_spans as encode_directly

    records = [
        record(),
        record(key="k2", score=0.25, label="fail", reason="too short", response_id="resp_1", judge_models=["m1", "m2"],
               input_tokens=12, output_tokens=3, cost_usd=0.0004, judge_attempts=2, preprocess_json='{"a": 1}',
               analyze_json="[1]"),
        record(key="k3", score=None, error_type="JudgeError", error_message="429 from provider",
               resource={"service.name": "other", "n": 3, "ok": True, "x": 1.5, "ids": [1, 2], "none": None}),
        record(key="k4", resource={}, service="only-service", scored_end_ns=0),
        record(key="k5", resource={}, service="", scorer_version=None),
        record(key="k6", score=0.5),  # the first record's resource again: one resource entry for both
        session_record(),  # a conversation score: the session's attributes (text, int)
        session_record(key="k7", session={**session_record().session, "partial": True}),  # and a bool
    ]
    for span_time in ("anchored", "actual"):
        direct = encode_directly(records, span_time)
        sdk = encode_spans([build_span(r, span_time) for r in records])
        assert direct == sdk, span_time
        assert direct.SerializeToString() == sdk.SerializeToString()
    assert [len(rs.scope_spans[0].spans) for rs in encode_directly(records).resource_spans] == [5, 1, 1, 1]


def session_record(**kw: object) -> ScoreRecord:
    """A conversation score: on the last turn's run span, naming its session."""
    session = SessionScore("support-bot/chat-42", "chat-42", turns=3, revision=2, first_trace_id="01" * 16,
                           first_span_id="02" * 8, trace_ids=["01" * 16, "03" * 16, TRACE])
    key = f"session/{session.scope}/2/goal/1"
    base: dict = dict(key=key, score_span_id=score_span_id_for(key), scorer_id="goal", scorer_name="Goal met",
                      session=session.to_dict())
    base.update(kw)
    return record(**base)


def test_a_conversation_score_names_its_session_on_the_last_turns_run() -> None:
    span = build_span(session_record())
    assert format(span.context.trace_id, "032x") == TRACE and format(span.parent.span_id, "016x") == SPAN
    attrs = dict(span.attributes or {})
    assert attrs["session.id"] == attrs["gen_ai.conversation.id"] == "chat-42"
    assert (attrs["tracescore.session.turns"], attrs["tracescore.session.revision"]) == (3, 2)
    assert "tracescore.session.partial" not in attrs
    assert dict(span.events[0].attributes or {})["session.id"] == "chat-42"
    partial = dict(build_span(session_record(session={**session_record().session, "partial": True})).attributes or {})
    assert partial["tracescore.session.partial"] is True
    assert "session.id" not in dict(build_span(record()).attributes or {})  # a run's score names no session


def test_every_optional_attribute_is_written_when_set_in_one_order_and_none_when_unset() -> None:
    from collector.export.evaluation import record_attributes

    full = record_attributes(record(label="pass", reason="good", response_id="resp-1", judge_models=["m1", "m2"],
                                    input_tokens=10, output_tokens=5, cost_usd=0.25, judge_attempts=2,
                                    preprocess_json='{"p": 1}', analyze_json='{"a": 1}', error_type="E",
                                    error_message="bad", supersedes="ab" * 8))
    assert list(full)[7:] == [
        "gen_ai.evaluation.score.value", "gen_ai.evaluation.score.label", "gen_ai.evaluation.explanation",
        "gen_ai.response.id", "tracescore.scorer.version", "tracescore.judge.model",
        "tracescore.judge.usage.input_tokens", "tracescore.judge.usage.output_tokens", "tracescore.judge.cost_usd",
        "tracescore.judge.attempts", "tracescore.preprocess.result", "tracescore.analyze.result",
        "tracescore.scored.service",
        "error.type", "tracescore.error.message", "tracescore.supersedes"]
    assert (full["tracescore.judge.model"], full["tracescore.judge.cost_usd"], full["gen_ai.evaluation.score.value"]) == (
        "m1,m2", 0.25, 1.0)
    bare = record_attributes(record(score=None, scorer_version=None, service="", judge_models=[], input_tokens=0))
    assert list(bare) == ["gen_ai.evaluation.name", "openinference.span.kind", "mlflow.spanType",
                          "tracescore.scorer.id", "tracescore.run.id", "tracescore.score.duration_ms", "tracescore.scored_at"]


_YEAR_10000_NS = 253_402_300_800 * 10**9  # datetime's last second ends here


@given(st.one_of(
    st.integers(-(10**18), _YEAR_10000_NS - 10**9),  # before 1970 too: a fraction of a negative time
    # near a millisecond's or a second's end, where rounding to microseconds carries over
    st.builds(lambda s, tail: s * 10**9 - tail, st.integers(1, 253_402_300_799), st.integers(0, 2_000)),
    st.builds(lambda ms, tail: ms * 10**6 - tail, st.integers(1, 10**12), st.integers(0, 2_000)),
))
@example(1_700_000_000_999_999_600)  # rounds up into the next second
@example(1_700_000_000_123_999_500)  # half a microsecond: rounded half to even
@example(0)
def test_scored_at_is_the_datetime_text_of_the_scoring_start(start_ns: int) -> None:
    """`scored_at` formats each second once; its text is still exactly what datetime makes of
    the start (``tracescore.scored_at`` is the one wall-clock time a score span carries)."""
    expected = datetime.fromtimestamp(start_ns / 1e9, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert scored_at(start_ns) == expected
