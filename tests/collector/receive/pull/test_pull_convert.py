"""Each backend's span shape -> the receivers' `TraceSpan`: the adapters find the runs the agent
sent (real answers of Phoenix 20.26.1 and MLflow 3.17.2 in ``tests/fixtures/pull``; Langfuse's
ingestion as its test server does it, applied to real captures of several conventions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langfuse_ingest import observation
from repo_paths import REPO

from adapters import (
    AssembledTrace,
    TraceSpan,
    assemble,
    extract_runs,
    read_trace_file,
    spans_from_resource_spans,
)
from collector.commands.inspect import run_row
from collector.common.errors import PullError
from collector.receive.pull.langfuse import observation_span, time_ns
from collector.receive.pull.mlflow import resource_of, search_filter
from collector.receive.pull.otlp_json import trace_spans
from collector.receive.pull.page import page_of
from collector.receive.pull.phoenix import drop_derived
from collector.receive.pull.source import Window

FIXTURES = REPO / "tests" / "fixtures"
QUESTION, ANSWER = "What is the capital of France?", "Paris."


def runs_of(spans: list[TraceSpan]) -> list[dict[str, Any]]:
    out = []
    for trace in assemble(spans, []):
        for run in extract_runs(trace).runs:
            out.append({**run_row(run), "session_id": run.session_id})
    return out


def only_run(spans: list[TraceSpan]) -> dict[str, Any]:
    (run,) = runs_of(spans)
    return run


def test_phoenix_spans_read_back_as_sent() -> None:
    rows = json.loads((FIXTURES / "pull" / "phoenix_otlpv1_spans.json").read_text())["data"]
    run = only_run([drop_derived(s) for s in trace_spans(rows)])
    assert (run["span_name"], run["convention"], run["session_id"], run["service"]) == (
        "invoke_agent support", "genai", "sess-1", "")  # Phoenix keeps no resource
    assert [m["content"] for m in run["input"]["input_messages"]] == [QUESTION]
    assert [(m["role"], m["content"]) for m in run["output"]] == [("assistant", ANSWER)]
    # Without dropping what Phoenix derived, the same messages are read by another convention.
    assert only_run(trace_spans(rows))["convention"] == "openinference"


def test_phoenix_keeps_a_spans_own_openinference_attributes() -> None:
    span = TraceSpan("a" * 32, "b" * 16, None, "agent", attributes={
        "openinference.span.kind": "AGENT", "input.value": "hi", "llm.model_name": "m"})
    assert drop_derived(span) is span


def test_mlflow_spans_read_back_as_sent_with_their_resource() -> None:
    (trace,) = json.loads((FIXTURES / "pull" / "mlflow_batchget.json").read_text())["traces"]
    spans = trace_spans(trace["spans"], resource_of(trace["trace_info"]))
    run = only_run(spans)
    assert (run["span_id"], run["convention"], run["session_id"], run["service"]) == (
        "0a0ae730dba93e2c", "genai", "sess-1", "support-bot")
    assert [m["content"] for m in run["input"]["input_messages"]] == [QUESTION]
    assert [(m["role"], m["content"]) for m in run["output"]] == [("assistant", ANSWER)]
    assert {s.parent_span_id for s in spans} == {None, "0a0ae730dba93e2c"}
    assert spans[0].resource == {"service.name": "support-bot", "service.version": "1.2.3",
                                 "deployment.environment": "test"}
    assert spans[0].start_ns == 1796434977784377559  # MLflow keeps nanoseconds


def test_mlflow_search_filter_ands_the_window_and_the_users_filter() -> None:
    from datetime import UTC, datetime
    window = Window(datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC))
    assert search_filter(window, "tag.env = 'prod'") == (
        "trace.timestamp_ms >= 1796083200000 AND trace.timestamp_ms < 1796169600000 AND tag.env = 'prod'")


@pytest.mark.parametrize("capture", ["openai-v2/S1.pb", "openai-v2/S3.pb", "openinference-openai/S1.pb",
                                     "openinference-openai/S2.pb", "traceloop/S1.pb", "pydantic-ai/S1.pb"])
def test_langfuse_observations_read_back_as_the_spans_sent(capture: str) -> None:
    """Each span of a real capture through Langfuse's ingestion (messages taken out of the
    attributes into input and output, values as text) and back: the adapters find the same runs."""
    sent = spans_from_resource_spans(read_trace_file(str(FIXTURES / capture)).resource_spans)
    observed = [json.loads(json.dumps(observation(span))) for span in sent]  # as the API's JSON
    back = [observation_span(o) for o in observed]
    assert runs_of(back) == runs_of(sent)
    assert runs_of(sent)  # the capture has runs


def test_a_langfuse_observation_keeps_ids_times_resource_and_scope() -> None:
    span = observation_span({
        "id": "cd" * 8, "traceId": "ab" * 16, "parentObservationId": "ef" * 8, "name": "chat",
        "startTime": "2026-12-01T00:00:00.123Z", "endTime": None, "level": "DEFAULT", "input": None, "output": None,
        "metadata": {"attributes": {"gen_ai.usage.input_tokens": "12"},
                     "resourceAttributes": '{"service.name": "bot"}', "scope": {"name": "s", "version": "2"}}})
    assert (span.span_id, span.parent_span_id, span.service, span.scope_version) == ("cd" * 8, "ef" * 8, "bot", "2")
    assert span.start_ns == span.end_ns == time_ns("2026-12-01T00:00:00.123Z") == 1796083200123000000


def test_a_span_that_is_not_otlp_json_is_a_pull_error() -> None:
    for bad in ({"trace_id": "ab" * 16, "span_id": "not an id!"}, ["not", "a", "span"], {"attributes": [{}]}):
        with pytest.raises(PullError, match=r"^GET http://h/x: a span is not OTLP JSON: "):
            trace_spans([bad], where="GET http://h/x")


def test_spans_decode_as_the_receivers_decode_them() -> None:
    """The JSON decoder and the receivers' protobuf one agree on a real capture's every span."""
    from google.protobuf import json_format

    request = read_trace_file(str(FIXTURES / "openinference-openai" / "S1.pb"))
    expected = spans_from_resource_spans(request.resource_spans)
    rs = request.resource_spans[0]
    resource = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
    for camel in (True, False):
        got = []
        for ss in rs.scope_spans:
            documents = [json_format.MessageToDict(s, preserving_proto_field_name=not camel) for s in ss.spans]
            got += trace_spans(documents, resource, (ss.scope.name, ss.scope.version))
        assert got == expected


def test_a_page_is_whole_traces_in_the_backends_order() -> None:
    a1, a2 = TraceSpan("a" * 32, "1" * 16, None, "x"), TraceSpan("a" * 32, "2" * 16, "1" * 16, "y")
    b = TraceSpan("b" * 32, "3" * 16, None, "z")
    page = page_of([a1, b, a2], ["b" * 32, "a" * 32, "c" * 32], "next", "this", 7)
    assert [(t.trace_id[0], len(t.spans)) for t in page.traces] == [("b", 1), ("a", 2)]
    assert (page.next, page.token, page.total, page.spans) == ("next", "this", 7, 3)
    assert isinstance(page.traces[0], AssembledTrace)


def test_the_phoenix_traces_list_is_what_the_puller_reads() -> None:
    body = json.loads((FIXTURES / "pull" / "phoenix_traces.json").read_text())
    assert set(body) == {"data", "next_cursor"}
    assert body["data"][0]["trace_id"] == "a1a1b26555f65679fe19e4cb6ff56e7d"
    assert Path(FIXTURES / "pull" / "README.md").exists()
