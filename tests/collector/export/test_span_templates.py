"""Evaluation spans copied from templates (`collector.export.span_templates`) are exactly the spans
the SDK encodes, whatever scores come in whatever order: a template never leaks one score's
values into another's span, and a shape that cannot be copied is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.common.session_types import SessionScore
from collector.common.types import ScoreRecord
from collector.export.evaluation import any_value, build_span, encode_spans
from collector.export.span_templates import SpanTemplates

HEX16 = st.text("0123456789abcdef", min_size=16, max_size=16).filter(lambda s: s != "0" * 16)
TEXT = st.text(max_size=12)
SESSION = SessionScore("bot/c1", "c1", turns=3, revision=2, first_trace_id="01" * 16, first_span_id="02" * 8,
                       trace_ids=["01" * 16]).to_dict()


@st.composite
def score_records(draw: st.DrawFn) -> ScoreRecord:
    """Scores of a few scorers (so that shapes repeat) with any mix of optional fields."""
    start = draw(st.integers(0, 2**62))
    session = draw(st.sampled_from([None, SESSION, {**SESSION, "partial": True}]))
    return ScoreRecord(
        key=draw(TEXT), trace_id=draw(HEX16) * 2, span_id=draw(HEX16), score_span_id=draw(HEX16),
        scorer_id=draw(st.sampled_from(["q", "tone"])), scorer_name=draw(st.sampled_from(["Quality", "Tone"])),
        scorer_version=draw(st.sampled_from([None, "1", "2"])), run_id=draw(TEXT),
        score=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)),
        reason=draw(st.none() | TEXT), label=draw(st.sampled_from([None, "pass", "fail"])),
        response_id=draw(st.none() | TEXT), error_type=draw(st.sampled_from([None, "", "JudgeError"])),
        error_message=draw(st.none() | TEXT), start_ns=start, end_ns=start + draw(st.integers(0, 10**12)),
        judge_models=draw(st.sampled_from([[], ["m1"], ["m1", "m2"]])),
        input_tokens=draw(st.integers(0, 10**6)), output_tokens=draw(st.integers(0, 10**6)),
        cost_usd=draw(st.none() | st.floats(0, 10)), judge_attempts=draw(st.integers(0, 3)),
        preprocess_json=draw(st.none() | TEXT), analyze_json=draw(st.none() | TEXT),
        service=draw(st.sampled_from(["", "bot"])), resource=draw(st.sampled_from([{}, {"service.name": "bot"}])),
        scored_end_ns=draw(st.integers(0, 2**62)), supersedes=draw(st.none() | HEX16), session=session,
    )


@settings(max_examples=300)
@given(st.lists(score_records(), min_size=1, max_size=8), st.sampled_from(["anchored", "actual"]))
def test_copied_spans_are_the_spans_the_sdk_encodes(records: list[ScoreRecord], span_time: Any) -> None:
    direct = encode_spans(records, span_time)
    sdk = sdk_encode([build_span(r, span_time) for r in records])
    assert direct == sdk
    assert direct.SerializeToString() == sdk.SerializeToString()


def test_a_template_keeps_nothing_of_the_scores_copied_from_it() -> None:
    first = ScoreRecord("k1", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", run_id="r1", score=0.25,
                        start_ns=1, end_ns=2, reason="short")
    second = ScoreRecord("k2", "12" * 16, "34" * 8, "56" * 8, "q", "Quality", run_id="r2", score=0.75,
                         start_ns=3, end_ns=9, reason="long")
    before = encode_spans([first])
    encode_spans([second, second])  # copies of the template the first one left
    assert encode_spans([first]) == before == sdk_encode([build_span(first)])


def _build(span: Span, attributes: Mapping[str, Any]) -> None:
    values = [KeyValue(key=k, value=any_value(v)) for k, v in attributes.items()]
    span.attributes.extend(values)
    span.events.add(name="e").attributes.extend(values)


def test_a_span_with_a_list_value_is_built_and_the_templates_stay_bounded() -> None:
    templates = SpanTemplates(shared=frozenset({"name"}), limit=2)
    listed = Span()
    templates.fill(listed, {"name": "Q", "ids": [1, 2]}, _build)
    assert [v.int_value for v in listed.attributes[1].value.array_value.values] == [1, 2] and len(templates) == 0
    for name in ("A", "B", "C"):  # three shapes (a shared value each), two kept: the oldest goes
        templates.fill(Span(), {"name": name, "run": "r"}, _build)
    assert len(templates) == 2
    again = Span()
    templates.fill(again, {"name": "C", "run": "r9"}, _build)
    assert (again.attributes[0].value.string_value, again.events[0].attributes[1].value.string_value) == ("C", "r9")


def test_values_equal_across_types_get_spans_of_their_own_type() -> None:
    """``True == 1 == 1.0``: a shared value keeps its type apart, and so does a value written per span."""
    templates = SpanTemplates(shared=frozenset({"flag"}))
    spans = [Span() for _ in range(4)]
    for span, value in zip(spans, [True, 1, 1.0, True], strict=True):
        templates.fill(span, {"flag": value, "n": value}, _build)
    kinds = [(s.attributes[0].value.WhichOneof("value"), s.events[0].attributes[1].value.WhichOneof("value"))
             for s in spans]
    assert kinds == [("bool_value", "bool_value"), ("int_value", "int_value"), ("double_value", "double_value"),
                     ("bool_value", "bool_value")]
