"""`tracescore inspect`: JSONL rows, table output, logs joining, unreadable files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from collector.cli import main

TRACESCORE = Path(sys.executable).parent / "tracescore"
MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id"}


def _rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_jsonl_rows_have_the_spec_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["inspect", str(FIXTURES / "openai-v2" / "S3.pb"), "--format", "jsonl"])
    out = capsys.readouterr().out
    assert code == 0
    (row,) = _rows(out)
    assert set(row) == {"trace_id", "span_id", "span_name", "service", "convention", "input", "output"}
    assert len(row["trace_id"]) == 32 and row["trace_id"] == row["trace_id"].lower()
    assert len(row["span_id"]) == 16
    assert (row["span_name"], row["service"], row["convention"]) == ("weather_turn", "acceptance-openai-v2", "genai")
    assert set(row["input"]) == {"input_messages", "remembered_messages", "system_messages", "tagged_system_messages"}
    assert row["input"]["tagged_system_messages"] == {}
    for message in row["output"] + row["input"]["input_messages"] + row["input"]["system_messages"]:
        assert set(message) == MESSAGE_KEYS
    call = row["output"][0]["tool_calls"][0]
    assert call == {"id": "call_68e4854238118622674403a6", "name": "get_weather", "arguments": {"city": "Paris"}}
    assert row["output"][1]["tool_call_id"] == "call_68e4854238118622674403a6"


def test_logs_file_is_joined_to_the_traces(capsys: pytest.CaptureFixture[str]) -> None:
    base = FIXTURES / "openai-v2-events" / "S1"
    assert main(["inspect", f"{base}.pb", "--format", "jsonl"]) == 0
    (bare,) = _rows(capsys.readouterr().out)
    assert bare["output"] == [] and bare["input"]["input_messages"] == []
    assert main(["inspect", f"{base}.logs.json", f"{base}.json", "--format", "jsonl"]) == 0
    (joined,) = _rows(capsys.readouterr().out)
    assert joined["output"][0]["content"] == "The capital of France is Paris."


def test_table_format(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["inspect", str(FIXTURES / "pydantic-ai" / "S1.pb"), "--format", "table"]) == 0
    captured = capsys.readouterr()
    assert "1 agent run(s)" in captured.out and "pydantic-ai" in captured.out
    assert not captured.out.lstrip().startswith("{")


def test_bad_file_exits_non_zero_and_good_files_still_print(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "broken.pb"
    bad.write_bytes(b"\xff\xff\xff")
    code = main(["inspect", str(bad), str(FIXTURES / "traceloop" / "S1.json"), "/nonexistent.json",
                 "--format", "jsonl"])
    captured = capsys.readouterr()
    assert code == 1
    assert len(_rows(captured.out)) == 1
    assert "broken.pb" in captured.err and "/nonexistent.json" in captured.err


def test_installed_command_on_every_fixture() -> None:
    files = sorted(str(p) for p in FIXTURES.glob("*/*.pb"))
    proc = subprocess.run([str(TRACESCORE), "inspect", *files, "--format", "jsonl"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stdout)
    assert len(rows) == 11  # one run per trace file; the logs file joins its trace
    assert {r["convention"] for r in rows} == {"genai", "openinference", "traceloop", "pydantic-ai", "mastra"}


def test_default_format_is_jsonl_when_piped() -> None:
    proc = subprocess.run([str(TRACESCORE), "inspect", str(FIXTURES / "openai-v2" / "S1.pb")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and json.loads(proc.stdout)["span_name"] == "chat gpt-4o-mini"
    assert proc.stderr == ""


def test_error_lines_are_never_wrapped(tmp_path: Path) -> None:
    """A path in an error stays whole (rich wraps at 80 columns unless told not to)."""
    import os

    missing = tmp_path / ("a-rather-long-folder-name-" * 4) / "missing_capture_file_name.pb"
    proc = subprocess.run([str(TRACESCORE), "inspect", str(missing),
                           "--format", "jsonl"], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "COLUMNS": "80"})
    assert proc.returncode == 1
    assert str(missing) in proc.stderr
