"""`tracescore inspect --explain`: per trace, each span's convention and verdict, as text and as JSON.

Checked on a smolagents capture whose model calls sit two levels below the agent span
(AGENT -> CHAIN step -> LLM).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO

from collector.cli import main

CAPTURES = REPO / "tests" / "adapters" / "captures"
NESTED = CAPTURES / "smolagents-openinference" / "S3.pb"
TRACESCORE = Path(sys.executable).parent / "tracescore"


def _explain_json(capsys: pytest.CaptureFixture[str], *files: Path) -> list[dict]:
    assert main(["inspect", "--explain", *map(str, files), "--format", "jsonl"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def test_text_shows_the_run_and_why_each_span_is_or_is_not_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["inspect", "--explain", str(NESTED), "--format", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    run_id = _explain_json(capsys, NESTED)[0]["runs"][0]["span_id"]
    assert lines[0].endswith(": 1 run(s), 7 span(s)")
    assert lines[1] == f"  run terse_agent.run ({run_id}, openinference): agent span without an agent name above 2 model call(s)"
    agent = next(i for i, line in enumerate(lines) if line.startswith("  terse_agent.run [openinference agent, smolagents] run:"))
    assert "'task' argument" in lines[agent + 1]
    steps = [line for line in lines if "Step " in line]
    assert len(steps) == 2 and all("[not read] not_read: OpenInference CHAIN span" in line for line in steps)
    calls = [line for line in lines if "OpenAIModel.generate" in line]
    assert calls == [f"      OpenAIModel.generate [openinference llm, smolagents] in_run of run {run_id}: "
                     "model call inside the agent run"] * 2
    assert any("FinalAnswerTool" in line and "in_run" in line for line in lines)
    assert any("final answer, not a tool call" in line for line in lines)


def test_jsonl_is_one_object_per_trace_with_every_span(capsys: pytest.CaptureFixture[str]) -> None:
    (trace,) = _explain_json(capsys, NESTED)
    assert set(trace) == {"trace_id", "runs", "spans"} and len(trace["trace_id"]) == 32
    (run,) = trace["runs"]
    by_name: dict[str, list[dict]] = {}
    for span in trace["spans"]:
        by_name.setdefault(span["name"], []).append(span)
    (agent,) = by_name["terse_agent.run"]
    assert (agent["status"], agent["run_span_id"], agent["depth"]) == ("run", run["span_id"], 0)
    for call in by_name["OpenAIModel.generate"]:
        assert (call["status"], call["run_span_id"], call["depth"], call["kind"]) == (
            "in_run", run["span_id"], 2, "llm")
        step = next(s for s in trace["spans"] if s["span_id"] == call["parent_span_id"])
        assert (step["status"], step["convention"]) == ("not_read", None)
    assert [s["name"] for s in trace["spans"]][:3] == ["terse_agent.run", "Step 1", "OpenAIModel.generate"]


def test_json_is_the_same_objects_as_one_array(capsys: pytest.CaptureFixture[str]) -> None:
    files = [NESTED, CAPTURES / "agno-openinference" / "S3.pb"]
    lines = _explain_json(capsys, *files)
    assert main(["inspect", "--explain", *map(str, files), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == lines and len(lines) == 2


def test_format_json_without_explain_is_an_array_of_the_jsonl_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(NESTED), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["inspect", str(NESTED), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == rows
    assert rows[0]["input"]["input_messages"][0]["content"] == "What is the weather in Paris?"


def test_unreadable_file_exits_non_zero_and_the_others_are_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "broken.pb"
    bad.write_bytes(b"\xff\xff\xff")
    code = main(["inspect", "--explain", str(bad), str(NESTED), "--format", "jsonl"])
    captured = capsys.readouterr()
    assert code == 1 and "broken.pb" in captured.err
    assert len(captured.out.splitlines()) == 1


def test_installed_command_explains_every_new_capture() -> None:
    files = sorted(str(p) for name in ("smolagents-openinference", "smolagents-openinference-custom-model",
                                       "agno-openinference", "autogen-openinference")
                   for p in (CAPTURES / name).glob("S?.pb"))
    proc = subprocess.run([str(TRACESCORE), "inspect", "--explain", *files, "--format", "jsonl"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    traces = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(traces) >= len(files) and sum(len(t["runs"]) for t in traces) == len(files)
