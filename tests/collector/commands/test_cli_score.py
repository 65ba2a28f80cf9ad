"""`tracescore score`: rows per (run, scorer), summary, failures, bounded concurrency, exit codes."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from repo_paths import FIXTURES, REPO

from collector.cli import main

TRACESCORE = Path(sys.executable).parent / "tracescore"
S1_FILES = sorted(str(p) for p in FIXTURES.glob("*/S1.pb"))

SCORERS = textwrap.dedent(
    """
    import asyncio
    from scorers import create_scorer, not_scorable

    in_flight = 0
    peak = 0

    async def _slow(run):
        global in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return 1.0 if run.output and run.output[-1].content else 0.0

    answered = (
        create_scorer(id="answered", type="agent", description="1 when the run ends with an answer")
        .generate_score(_slow)
        .generate_reason(lambda score: f"score {score}")
    )
    broken = create_scorer(id="broken", description="always fails").generate_score(lambda run: 1 / 0)
    skipper = create_scorer(id="skipper", description="never scorable").generate_score(
        lambda run: not_scorable("nothing to judge"))
    context = (
        create_scorer(id="context", description="the keys of run.additional_context")
        .generate_score(lambda run: float(len(run.additional_context)))
        .generate_reason(lambda run: repr(run.additional_context))
    )
    """
)

JUDGED = textwrap.dedent(
    """
    import sys
    from scorers import Judge, create_scorer

    judged = (
        create_scorer(id="judged", description="judged by the fake server", judge=Judge(
            model="openai/gpt-4o-mini", instructions="Grade.", model_settings={"api_base": API_BASE, "api_key": "k"}))
        .preprocess(lambda run: {"litellm_loaded": "litellm" in sys.modules})  # the first step of the first score
        .generate_score(description="Rate it", create_prompt=lambda run: "Rate the answer.")
        .generate_reason(lambda results: f"litellm loaded: {results.preprocess_step_result['litellm_loaded']}")
    )
    """
)


@pytest.fixture
def scorer_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"cli_scorers_{os.getpid()}_{tmp_path.name}".replace("-", "_")
    (tmp_path / f"{name}.py").write_text(SCORERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_jsonl_rows_per_run_and_scorer(scorer_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["score", *S1_FILES, "--scorer", f"{scorer_module}:answered", "--scorer", f"{scorer_module}:broken",
                 "--scorer", f"{scorer_module}:skipper", "--format", "jsonl", "--concurrency", "3"])
    captured = capsys.readouterr()
    assert code == 0
    rows = _rows(captured.out)  # stdout is pure JSONL
    assert len(rows) == 3 * len(S1_FILES)
    assert [r["scorer"] for r in rows[:3]] == ["answered", "broken", "skipper"]
    keys = {"trace_id", "span_id", "span_name", "service", "convention", "scorer", "score", "reason", "error",
            "input", "output"}
    assert all(set(r) == keys for r in rows)
    answered = [r for r in rows if r["scorer"] == "answered"]
    assert all(r["error"] is None and r["reason"] == f"score {r['score']}" for r in answered)
    assert sum(r["score"] for r in answered) == len(S1_FILES) - 1  # openai-v2-events S1 has no content without logs
    broken = [r for r in rows if r["scorer"] == "broken"]
    assert all(r["score"] is None and "division by zero" in r["error"] for r in broken)
    skipped = [r for r in rows if r["scorer"] == "skipper"]
    assert all(r["score"] is None and r["error"] is None and "nothing to judge" in r["reason"] for r in skipped)
    assert "scores per scorer" in captured.err and "broken" in captured.err
    assert importlib.import_module(scorer_module).peak <= 3


def test_table_format_and_file_path_ref(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "my_scorers.py"
    path.write_text(SCORERS)
    code = main(["score", str(FIXTURES / "openai-v2" / "S3.pb"), "--scorer", f"{path}:answered", "--format", "table"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 score(s)" in out and "scores per scorer" in out and "answered" in out and "1.000" in out


def test_the_default_is_the_table_off_a_terminal_too(scorer_module: str, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 19 (9): stdout that is not a terminal (a CI log) gets the scores' table and the summary,
    not a JSONL row per score with the whole run's messages (that takes ``--format jsonl``)."""
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["score", *S1_FILES, "--scorer", f"{scorer_module}:answered", "--scorer", f"{scorer_module}:broken"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"{2 * len(S1_FILES)} score(s)" in out and "scores per scorer" in out and "division by zero" in out
    assert not any(line.startswith("{") for line in out.splitlines())
    assert "input_messages" not in out and "The capital of France" not in out


def test_steps_read_an_empty_additional_context(scorer_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 19 (5): ``run.additional_context`` is ``{}`` for the runs of saved files, as every step
    may read it; it used to fail every score with an AttributeError."""
    code = main(["score", *S1_FILES, "--scorer", f"{scorer_module}:context", "--format", "jsonl"])
    rows = _rows(capsys.readouterr().out)
    assert code == 0 and len(rows) == len(S1_FILES)
    assert {(r["score"], r["reason"], r["error"]) for r in rows} == {(0.0, "{}", None)}


async def test_v_with_a_judge_scorer_loads_litellm_first_and_logs_its_lines_once(tmp_path: Path, server: Any) -> None:
    """Issue 19 (10), as a user runs it (a fresh process): litellm is imported before the first score
    starts (its first step sees it loaded, so no score's duration includes the import), a line is
    logged per score with its duration, and litellm's INFO lines go once to stderr, never also to
    stdout through litellm's own handler (stdout stays pure JSONL)."""
    (tmp_path / "judged_scorers.py").write_text(f"API_BASE = {server.url + '/v1'!r}\n" + JUDGED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "collector.cli", "score", str(FIXTURES / "openai-v2" / "S1.pb"),
        "--scorer", "judged_scorers:judged", "--format", "jsonl", "-v", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    raw_out, raw_err = await asyncio.wait_for(proc.communicate(), 240)  # a failure detector: imports take seconds
    out, err = raw_out.decode(), raw_err.decode()
    assert proc.returncode == 0, err
    (row,) = _rows(out)  # every stdout line is a JSON row
    assert (row["score"], row["reason"], row["error"]) == (0.5, "litellm loaded: True", None)
    assert "LiteLLM" not in out and err.count("LiteLLM completion() model= gpt-4o-mini") >= 1
    loaded = err.index("judge client (litellm) ready after")
    scored = err.index(f"scored judged on trace {row['trace_id']} span {row['span_id']}: 0.5 (")
    assert loaded < scored


def test_bad_file_still_scores_the_others(scorer_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["score", "/nonexistent.pb", str(FIXTURES / "openai-v2" / "S1.pb"),
                 "--scorer", f"{scorer_module}:answered", "--format", "jsonl"])
    captured = capsys.readouterr()
    assert code == 1
    assert [r["score"] for r in _rows(captured.out)] == [1.0]
    assert "/nonexistent.pb" in captured.err


def test_a_scorer_given_twice_exits_2(scorer_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    ref = f"{scorer_module}:answered"
    assert main(["score", S1_FILES[0], "--scorer", ref, "--scorer", ref, "--format", "jsonl"]) == 2
    assert "scorer id 'answered' is already given" in capsys.readouterr().err


def test_unloadable_scorer_ref_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", S1_FILES[0], "--scorer", "no_such_module_xyz:thing", "--format", "jsonl"]) == 2
    assert "no_such_module_xyz" in capsys.readouterr().err
    assert main(["score", S1_FILES[0], "--scorer", "json:dumps", "--format", "jsonl"]) == 2


def test_installed_command(tmp_path: Path) -> None:
    (tmp_path / "sub_scorers.py").write_text(SCORERS)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([str(TRACESCORE), "score", str(FIXTURES / "traceloop" / "S1.pb"),
                           "--scorer", "sub_scorers:answered", "--format", "jsonl"],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    (row,) = _rows(proc.stdout)
    assert (row["scorer"], row["score"], row["convention"]) == ("answered", 1.0, "traceloop")
    assert "scores per scorer" in proc.stderr


def test_a_module_beside_the_user_is_found(tmp_path: Path) -> None:
    """`--scorer my_scorers:x` run in the folder that holds my_scorers.py, no PYTHONPATH: the
    console script's own sys.path does not hold the working directory, so the loader adds it."""
    (tmp_path / "beside_scorers.py").write_text(SCORERS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(TRACESCORE), "score", str(FIXTURES / "traceloop" / "S1.pb"),
                           "--scorer", "beside_scorers:answered", "--format", "jsonl"],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (row,) = _rows(proc.stdout)
    assert (row["scorer"], row["score"]) == ("answered", 1.0)
