"""OTLP file readers and decoding: protobuf and OTLP/JSON (hex ids, enum names, int64 strings),
gzip, logs, clear errors; assembly; the ingest-path candidate check."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from adapters_support import FIXTURES, TRACE, log_request, request, sid, span

from adapters import (
    OtlpFileError,
    assemble,
    is_logs_file,
    is_run_candidate,
    logs_from_resource_logs,
    read_logs_file,
    read_trace_file,
    spans_from_resource_spans,
)

OTLP_JSON = {
    "resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "bot"}}]},
        "scopeSpans": [{
            "scope": {"name": "s", "version": "1"},
            "spans": [{
                "traceId": TRACE, "spanId": sid(2), "parentSpanId": sid(1), "name": "chat",
                "kind": "SPAN_KIND_CLIENT", "startTimeUnixNano": "1700000000000000001", "endTimeUnixNano": 1700000000000000002,
                "attributes": [
                    {"key": "n", "value": {"intValue": "7"}},
                    {"key": "b", "value": {"bytesValue": "AAE="}},
                    {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "x", "value": {"doubleValue": 1.5}}]}}},
                ],
                "status": {"code": "STATUS_CODE_ERROR"},
                "events": [{"name": "e", "timeUnixNano": "3", "attributes": []}],
            }],
        }],
    }]
}


def test_otlp_json_with_hex_ids_and_enum_names(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(OTLP_JSON))
    (s,) = spans_from_resource_spans(read_trace_file(path).resource_spans)
    assert (s.trace_id, s.span_id, s.parent_span_id) == (TRACE, sid(2), sid(1))
    assert (s.kind, s.status_code, s.start_ns, s.end_ns) == (3, 2, 1700000000000000001, 1700000000000000002)
    assert s.attributes == {"n": 7, "b": "AAE=", "kv": {"x": 1.5}}
    assert (s.service, s.scope_name, s.scope_version, s.events[0].name) == ("bot", "s", "1", "e")


def test_protobuf_json_and_gzip_read_the_same(tmp_path: Path) -> None:
    pb = (FIXTURES / "openai-v2" / "S3.pb").read_bytes()
    (tmp_path / "a.pb.gz").write_bytes(gzip.compress(pb))
    (tmp_path / "b.json.gz").write_bytes(gzip.compress((FIXTURES / "openai-v2" / "S3.json").read_bytes()))
    plain = read_trace_file(FIXTURES / "openai-v2" / "S3.pb")
    assert read_trace_file(tmp_path / "a.pb.gz") == plain
    assert read_trace_file(tmp_path / "b.json.gz") == plain


def test_logs_files_and_joining(tmp_path: Path) -> None:
    logs = read_logs_file(FIXTURES / "openai-v2-events" / "S1.logs.json")
    assert logs == read_logs_file(FIXTURES / "openai-v2-events" / "S1.logs.pb")
    records = logs_from_resource_logs(logs.resource_logs)
    assert records[0].event_name == "gen_ai.client.inference.operation.details"
    assert isinstance(records[0].attributes["gen_ai.input.messages"], list)
    spans = spans_from_resource_spans(read_trace_file(FIXTURES / "openai-v2-events" / "S1.pb").resource_spans)
    (trace,) = assemble(spans, records)
    assert len(trace.logs) == 1


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b"\x1f\x8b not gzip", "bad gzip"), (b"{not json", "invalid JSON"), (b"[1, 2]", "JSON object"),
     (b'{"resourceSpans": 5}', "OTLP/JSON"), (b"\xff\xff\xff\xff", "protobuf")],
)
def test_bad_files_raise_otlp_file_error(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "bad.pb"
    path.write_bytes(content)
    with pytest.raises(OtlpFileError) as info:
        read_trace_file(path)
    assert needle in str(info.value) and str(path) in str(info.value)


def test_missing_file() -> None:
    with pytest.raises(OtlpFileError, match="No such file"):
        read_trace_file("/nonexistent/x.pb")


def test_is_logs_file() -> None:
    assert [is_logs_file(p) for p in ("a.logs.pb", "a.logs.json.gz", "a.pb", "logs.json")] == [True, True, False, False]


def test_assemble_groups_by_trace_and_drops_orphan_logs() -> None:
    other = "cd" * 16
    req = request(("x", [span(1, "a"), span(2, "b", trace_id=other), span(3, "c", 1)]))
    spans = spans_from_resource_spans(req.resource_spans)
    logs = logs_from_resource_logs(log_request((1, "gen_ai.choice", {}, {"index": 0})).resource_logs)
    traces = assemble(spans, [*logs, logs[0].__class__(trace_id="ef" * 16, span_id=None, event_name="x")])
    assert [(t.trace_id, len(t.spans), len(t.logs)) for t in traces] == [(TRACE, 2, 1), (other, 1, 0)]


@pytest.mark.parametrize(
    ("name", "keys", "expected"),
    [
        ("invoke_agent bot", [], True),
        ("openai.chat", ["gen_ai.prompt.0.role"], True),
        ("response", ["llm.input_messages.0.message.role"], True),
        ("ai.generateText", [], True),
        ("agent_step", ["mastra.span.type"], True),
        ("weather_agent.agent", ["traceloop.span.kind"], True),
        ("SELECT", ["db.system", "db.statement"], False),
        ("turn", ["openinference.span.kind"], True),
    ],
)
def test_is_run_candidate(name: str, keys: list[str], expected: bool) -> None:
    assert is_run_candidate(name, keys) is expected


def test_json_lines_are_merged(tmp_path: Path) -> None:
    path = tmp_path / "lines.json"
    path.write_text(json.dumps(OTLP_JSON) + "\n" + (FIXTURES / "traceloop" / "S1.json").read_text().replace("\n", "") + "\n")
    spans = spans_from_resource_spans(read_trace_file(path).resource_spans)
    assert [s.name for s in spans] == ["chat", "openai.chat"]


@pytest.mark.parametrize(("name", "content", "message"), [
    ("empty.json", "", "empty file"),
    ("empty.pb", "", "empty file"),
    ("blank.json", "  \n", "empty file"),
    ("hello.json", "hello", "not OTLP/JSON: the file does not start with a JSON object"),
    ("other.json", '{"foo": 1}', "no 'resourceSpans' (keys: foo)"),
    ("spans.logs.json", '{"resourceSpans": []}', "no 'resourceLogs'"),
])
def test_files_that_hold_no_otlp_request_are_errors(tmp_path: Path, name: str, content: str, message: str) -> None:
    from adapters.otlp_files import OtlpFileError, read_logs_file, read_trace_file

    path = tmp_path / name
    path.write_text(content)
    read = read_logs_file if ".logs." in name else read_trace_file
    with pytest.raises(OtlpFileError, match=re.escape(message)):
        read(path)


def test_an_empty_json_request_is_a_valid_empty_request(tmp_path: Path) -> None:
    from adapters.otlp_files import read_trace_file

    path = tmp_path / "none.json"
    path.write_text("{}")
    assert len(read_trace_file(path).resource_spans) == 0
