"""`tracescore score` as a CI gate: directories and globs, the per-scorer summary, and the
exit status set by --fail-under, --max-failures and a run where every score failed."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from collector.cli import main

SCORERS = textwrap.dedent(
    """
    from scorers import create_scorer

    answered = create_scorer(id="answered", type="agent", description="1 when the run ends with an answer"
        ).generate_score(lambda run: 1.0 if run.output and run.output[-1].content else 0.0)
    broken = create_scorer(id="broken", description="always fails").generate_score(lambda run: 1 / 0)
    """
)


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """A folder of saved traces (three runs, each with an answer), one in a subfolder."""
    folder = tmp_path / "traces"
    (folder / "older").mkdir(parents=True)
    for name in ("S1.pb", "S2.pb"):
        (folder / name).write_bytes((FIXTURES / "openai-v2" / name).read_bytes())
    (folder / "older" / "S3.pb").write_bytes((FIXTURES / "openai-v2" / "S3.pb").read_bytes())
    (folder / "README.txt").write_text("not a trace: left out of the folder's files")
    return folder


@pytest.fixture
def scorer_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"gate_scorers_{os.getpid()}_{tmp_path.name}".replace("-", "_")
    (tmp_path / f"{name}.py").write_text(SCORERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _scored(out: str) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return sorted((r["trace_id"], r["scorer"]) for r in rows)


def test_a_directory_and_a_glob_name_their_otlp_files(scorer_module: str, traces: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    ref = f"{scorer_module}:answered"
    assert main(["score", str(traces), "--scorer", ref, "--format", "jsonl"]) == 0
    from_directory = _scored(capsys.readouterr().out)
    assert len(from_directory) == 3
    assert main(["score", str(traces / "**" / "S*.pb"), "--scorer", ref, "--format", "jsonl"]) == 0
    assert _scored(capsys.readouterr().out) == from_directory
    assert main(["score", str(traces / "S1.pb"), str(traces / "*.pb"), "--scorer", ref, "--format", "jsonl"]) == 0
    assert len(_scored(capsys.readouterr().out)) == 2  # S1 named twice counts once
    assert main(["score", str(traces / "nothing*.pb"), "--scorer", ref, "--format", "jsonl"]) == 1
    assert "nothing*.pb: no OTLP files there" in capsys.readouterr().err


def test_the_summary_has_every_column_per_scorer(scorer_module: str, traces: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["score", str(traces), "--scorer", f"{scorer_module}:answered", "--scorer",
                 f"{scorer_module}:broken", "--format", "table"])
    out = capsys.readouterr().out
    assert code == 0  # some scores failed, not all: no gate was set
    header = next(line for line in out.splitlines() if "not scorable" in line)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == [
        "scorer", "runs", "scored", "not scorable", "failed", "mean", "p50", "min"]
    answered = next(line for line in out.splitlines() if line.startswith("│ answered"))
    assert [c.strip() for c in answered.strip("│ ").split("│")] == [
        "answered", "3", "3", "0", "0", "1.000", "1.000", "1.000"]
    broken = next(line for line in out.splitlines() if line.startswith("│ broken"))
    assert [c.strip() for c in broken.strip("│ ").split("│")] == ["broken", "3", "0", "0", "3", "-", "-", "-"]


@pytest.mark.parametrize(("gate", "code", "says"), [
    (["--fail-under", "answered=1.0"], 0, None),
    (["--fail-under", "answered=1.01"], 1, "gate failed: answered: mean score 1.000 is below 1.01"),
    (["--fail-under", "broken=0.1"], 1, "gate failed: broken: no score to compare with 0.1"),
    (["--max-failures", "3"], 0, None),
    (["--max-failures", "2"], 1, "gate failed: 3 score(s) failed, more than --max-failures 2"),
    (["--fail-under", "nobody=0.5"], 2, "--fail-under names no given scorer: nobody"),
])
def test_gate_thresholds_set_the_exit_status(scorer_module: str, traces: Path, capsys: pytest.CaptureFixture[str],
                                             gate: list[str], code: int, says: str | None) -> None:
    refs = ["--scorer", f"{scorer_module}:answered", "--scorer", f"{scorer_module}:broken"]
    assert main(["score", str(traces), *refs, "--format", "jsonl", *gate]) == code
    err = capsys.readouterr().err
    if says is None:
        assert "gate failed" not in err
    else:
        assert says in err


def test_every_score_failed_exits_1(scorer_module: str, traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", str(traces), "--scorer", f"{scorer_module}:broken", "--format", "jsonl"]) == 1
    assert "gate failed: every score failed (3)" in capsys.readouterr().err


def test_a_bad_threshold_is_a_usage_error(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["score", str(traces), "--scorer", "scorers.builtin:completeness", "--fail-under", "0.5"])
    assert exit_.value.code == 2 and "expected SCORER=VALUE" in capsys.readouterr().err


def test_a_zero_argument_factory_is_a_scorer_ref(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", str(FIXTURES / "openai-v2" / "S1.pb"), "--scorer", "scorers.builtin:completeness",
                 "--format", "jsonl", "--fail-under", "completeness=0"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["scorer"] == "completeness" and row["error"] is None and 0 <= row["score"] <= 1
