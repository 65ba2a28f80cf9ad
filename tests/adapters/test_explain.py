"""`explain_trace`: every span with its convention and verdict, from the decisions `extract_runs` takes."""

from __future__ import annotations

from pathlib import Path

from adapters_support import extract, request, span

from adapters import (
    assemble,
    explain_trace,
    extract_runs,
    read_trace_file,
    spans_from_resource_spans,
)

CAPTURES = Path(__file__).resolve().parent / "captures"


def _explain(path: Path) -> list:
    traces = assemble(spans_from_resource_spans(read_trace_file(path).resource_spans))
    return [explain_trace(t) for t in traces]


def test_nested_model_calls_are_explained_as_part_of_the_agent_run() -> None:
    (ex,) = _explain(CAPTURES / "smolagents-openinference" / "S3.pb")
    (run,) = ex.runs
    rows = {(s.name, s.depth): s for s in ex.spans}
    agent = rows[("terse_agent.run", 0)]
    assert (agent.status, agent.convention, agent.kind, agent.framework) == ("run", "openinference", "agent",
                                                                             "smolagents")
    assert agent.run_span_id == run.span_id and "2 model call(s)" in run.reason
    assert any("'task' argument" in n for n in agent.notes)
    assert rows[("Step 1", 1)].status == "not_read" and "CHAIN" in rows[("Step 1", 1)].reason
    calls = [s for s in ex.spans if s.kind == "llm"]
    assert len(calls) == 2 and all(s.status == "in_run" and s.run_span_id == run.span_id and s.depth == 2
                                   for s in calls)
    final = rows[("FinalAnswerTool", 2)]
    assert final.status == "in_run" and any("final answer" in n for n in final.notes)


def test_explanation_agrees_with_extract_runs_on_every_capture() -> None:
    for path in sorted(CAPTURES.glob("*/S?.pb")):
        traces = assemble(spans_from_resource_spans(read_trace_file(path).resource_spans))
        for trace in traces:
            ex = explain_trace(trace)
            runs = extract_runs(trace).runs
            assert [r.span_id for r in ex.runs] == [r.span_id for r in runs], path
            assert {s.span_id for s in ex.spans} == {s.span_id for s in trace.spans}, path
            for s in ex.spans:
                assert (s.status == "run") == (s.span_id in {r.span_id for r in runs}), (path, s)
                assert s.status != "in_run" or s.run_span_id in {r.span_id for r in runs}, (path, s)


def test_tool_calls_recovered_from_tool_spans_are_noted_on_the_run() -> None:
    (ex,) = _explain(CAPTURES / "smolagents-openinference-custom-model" / "S3.pb")
    assert any("recovered from tool spans" in n for n in ex.runs[0].notes)


def test_unrecognised_spans_say_what_is_missing_and_duplicates_why() -> None:
    chat = {"gen_ai.operation.name": "chat",
            "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]'}
    spans = [span(1, "my_agent.run", None, {"framework.task": "Hi"}), span(2, "chat", 1, chat),
             span(3, "chat inner", 2, chat)]
    req = request(("x", spans))
    (trace,) = assemble(spans_from_resource_spans(req.resource_spans))
    rows = {s.name: s for s in explain_trace(trace).spans}
    assert rows["my_agent.run"].status == "not_read"
    assert "gen_ai.operation.name=invoke_agent" in rows["my_agent.run"].reason
    assert (rows["chat"].status, rows["chat inner"].status) == ("run", "duplicate")
    assert [s.reason for s in extract(req).skipped] == ["duplicate_llm_call"]


def test_to_dict_is_json_ready() -> None:
    import json

    (ex,) = _explain(CAPTURES / "smolagents-openinference" / "S1.pb")
    data = json.loads(json.dumps(ex.to_dict()))
    assert set(data) == {"trace_id", "runs", "spans"}
    assert set(data["spans"][0]) == {"span_id", "parent_span_id", "name", "scope", "depth", "convention", "kind",
                                     "framework", "status", "reason", "run_span_id", "notes", "skips"}
