"""The builder is generic for type checkers: mypy sees the scorer's input and output types."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """
from pydantic import BaseModel
from scorers import ScorerRun, create_scorer

class Q(BaseModel):
    question: str

class A(BaseModel):
    text: str

reveal_type(create_scorer(id="a", description="d", type="agent"))
reveal_type(create_scorer(id="c", description="d", type="conversation"))
typed = create_scorer(id="t", description="d", input_type=Q, output_type=A)
reveal_type(typed)
reveal_type(create_scorer(id="u", description="d"))
reveal_type(create_scorer(id="i", description="d", input_type=Q))

def score(run: ScorerRun[Q, A]) -> float:
    reveal_type(run.input)
    return float(len(run.output.text))

result = typed.generate_score(score).analyze(lambda run, results: 1).run_sync(input={"question": "q"})
reveal_type(result.output)
reveal_type(result.score)
"""


@pytest.mark.long  # a mypy run: half a minute without a warm cache
def test_mypy_infers_scorer_and_result_types(tmp_path: Path) -> None:
    source = tmp_path / "typed_scorer.py"
    source.write_text(SNIPPET)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context", str(source)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    revealed = re.findall(r'Revealed type is "([^"]+)"', proc.stdout)
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert errors == [], proc.stdout
    assert revealed == [
        "scorers._builder.Scorer[scorers._agent_types.ScorerRunInputForAgent, "
        "scorers._agent_types.ScorerRunOutputForAgent]",
        "scorers._builder.Scorer[scorers._agent_types.ScorerRunInputForAgent, "
        "scorers._agent_types.ScorerRunOutputForAgent]",
        "scorers._builder.Scorer[typed_scorer.Q, typed_scorer.A]",
        "scorers._builder.Scorer[Any, Any]",
        "scorers._builder.Scorer[typed_scorer.Q, Any]",
        "typed_scorer.Q",
        "typed_scorer.A",
        "float | None",
    ], proc.stdout
