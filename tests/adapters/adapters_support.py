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
