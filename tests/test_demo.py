"""``tracescore demo`` scores the bundled sample runs with the example scorers and prints them."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from collector.cli import main
from collector.commands import demo
from collector.demo_scorers import DEMO_SCORERS
from scorers import Scorer, create_scorer


def test_bundled_samples_load_and_include_a_tool_call() -> None:
    samples = demo.load_samples()
    assert len(samples) >= 3
    assert any("tool_calls" in json.dumps(s.output) or "tool-invocation" in json.dumps(s.output)
               for s in samples)  # fmt: skip


async def test_every_sample_is_scored_by_every_scorer() -> None:
    samples = demo.load_samples()
    rows = await demo.score_samples(samples)
    assert len(rows) == len(samples) * len(DEMO_SCORERS)
    by_pair = {(r.sample, r.scorer): r for r in rows}
    assert by_pair[("weather_tool_call", "Tool results")].score == 1.0
    assert by_pair[("mastra_failed_tool", "Tool results")].score == 0.5
    assert by_pair[("mastra_failed_tool", "Tool results")].reason == "no result for: book_flight"
    assert by_pair[("capital_of_france", "Ground truth match")].score == 1.0
    assert by_pair[("refund_follow_up", "Ground truth match")].score == 0.0
    assert by_pair[("capital_of_france", "Tool results")].reason == (
        "not scorable: the agent called no tool"
    )
    assert not any(r.reason.startswith("error:") for r in rows)


async def test_a_failing_scorer_is_shown_as_an_error_row() -> None:
    broken: Scorer[Any, Any] = create_scorer(id="broken", description="d").generate_score(
        lambda: 1 / 0
    )
    rows = await demo.score_samples(demo.load_samples()[:1], (broken,))
    assert rows[0].score is None and rows[0].reason == "error: Scorer Run Failed: division by zero"


def test_render_prints_a_table_with_scores() -> None:
    console = Console(record=True, width=200)
    demo.render(
        [demo.Row("s1", "Scorer A", 0.5, "half"), demo.Row("s1", "B", None, "n/a")], console
    )
    text = console.export_text()
    assert "0.50" in text and "Scorer A" in text and "half" in text


def test_samples_option_reads_another_directory(tmp_path: Path) -> None:
    (tmp_path / "one.json").write_text(
        json.dumps({"input": "What is 2+2?", "output": "2+2 is 4.", "ground_truth": "4"})
    )
    args = argparse.Namespace(samples=tmp_path)
    assert demo.run(args) == 0
    assert [s.name for s in demo.load_samples(tmp_path)] == ["one"]


def test_cli_demo_exits_zero_and_prints_scores(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "weather_tool_call" in out and "Ground truth match" in out


def test_tracescore_demo_console_script() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "collector.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Keyword coverage" in proc.stdout and "1.00" in proc.stdout
    assert "not scorable" in proc.stdout
