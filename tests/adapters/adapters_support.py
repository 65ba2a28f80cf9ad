"""Helpers for adapter tests: load fixture files, normalise runs for comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters import (
    AgentRun,
    assemble,
    extract_runs,
    logs_from_resource_logs,
    read_logs_file,
    read_trace_file,
    spans_from_resource_spans,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def runs_from_files(trace_path: Path, logs_path: Path | None = None) -> list[AgentRun]:
    spans = spans_from_resource_spans(read_trace_file(trace_path).resource_spans)
    logs = logs_from_resource_logs(read_logs_file(logs_path).resource_logs) if logs_path else []
    runs: list[AgentRun] = []
    for trace in assemble(spans, logs):
        runs.extend(extract_runs(trace).runs)
    return runs


def _parse(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def norm_message(m: dict[str, Any]) -> list[Any]:
    role = m.get("role")
    content = m.get("content")
    if role == "tool":
        return ["tool", m.get("tool_call_id") or None, _parse(content)]
    calls = [[c.get("id"), c.get("name"), _parse(c.get("arguments"))] for c in m.get("tool_calls") or []]
    return [role, (content or "").strip(), calls]


def norm_expected(exp: dict[str, Any]) -> dict[str, Any]:
    return {
        "system": exp.get("system", []),
        "remembered": [norm_message(m) for m in exp.get("remembered", [])],
        "input": [norm_message(m) for m in exp.get("input", [])],
        "output": [norm_message(m) for m in exp.get("output", [])],
    }


def norm_run(run: AgentRun) -> dict[str, Any]:
    def dump(msgs: Any) -> list[list[Any]]:
        return [
            norm_message(
                {
                    "role": m.role,
                    "content": m.content,
                    "tool_call_id": m.tool_call_id,
                    "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls],
                }
            )
            for m in msgs
        ]

    return {
        "system": [m.content for m in run.input.system_messages],
        "remembered": dump(run.input.remembered_messages),
        "input": dump(run.input.input_messages),
        "output": dump(run.output),
    }


# --- hand-built OTLP traces -------------------------------------------------------------

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import (  # noqa: E402
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs  # noqa: E402
from opentelemetry.proto.resource.v1.resource_pb2 import Resource  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span  # noqa: E402

TRACE = "0af7651916cd43dd8448eb211c80319c"


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, (list, tuple)):
        return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=kvs(value)))
    return AnyValue()


def kvs(attrs: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=any_value(v)) for k, v in attrs.items()]


def sid(n: int) -> str:
    return f"{n:016x}"


def span(
    n: int,
    name: str,
    parent: int | None = None,
    attrs: dict[str, Any] | None = None,
    *,
    start: int | None = None,
    end: int | None = None,
    events: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    kind: int = 1,
    trace_id: str = TRACE,
) -> Span:
    begin = start if start is not None else 1_000 + n * 10
    return Span(
        trace_id=bytes.fromhex(trace_id),
        span_id=bytes.fromhex(sid(n)),
        parent_span_id=bytes.fromhex(sid(parent)) if parent is not None else b"",
        name=name,
        kind=kind,  # type: ignore[arg-type]
        start_time_unix_nano=begin,
        end_time_unix_nano=end if end is not None else begin + 5,
        attributes=kvs(attrs or {}),
        events=[Span.Event(name=ev, time_unix_nano=begin + 1, attributes=kvs(a)) for ev, a in events],
    )


def request(*scopes: tuple[str, list[Span]], service: str = "svc") -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=kvs({"service.name": service})),
                scope_spans=[
                    ScopeSpans(scope=InstrumentationScope(name=scope), spans=spans) for scope, spans in scopes
                ],
            )
        ]
    )


def log_request(*records: tuple[int, str, dict[str, Any], Any]) -> ExportLogsServiceRequest:
    """records: (span number, event name, attributes, body)."""
    logs = []
    for n, event_name, attrs, body in records:
        rec = LogRecord(
            trace_id=bytes.fromhex(TRACE),
            span_id=bytes.fromhex(sid(n)),
            event_name=event_name,
            attributes=kvs(attrs),
        )
        if body is not None:
            rec.body.CopyFrom(any_value(body))
        logs.append(rec)
    return ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=logs)])]
    )


def extract(req: ExportTraceServiceRequest, logs: ExportLogsServiceRequest | None = None) -> Any:
    from adapters import extract_runs as _extract

    traces = assemble(
        spans_from_resource_spans(req.resource_spans),
        logs_from_resource_logs(logs.resource_logs) if logs is not None else (),
    )
    assert len(traces) == 1
    return _extract(traces[0])


def gen_msgs(*msgs: tuple[str, Any]) -> str:
    """JSON of GenAI parts messages: ("user", "text") or ("assistant", [parts])."""
    out = []
    for role, content in msgs:
        parts = [{"type": "text", "content": content}] if isinstance(content, str) else content
        out.append({"role": role, "parts": parts})
    return json.dumps(out)


def brief(run: AgentRun) -> dict[str, Any]:
    """A compact view of a run for assertions."""
    return norm_run(run)
