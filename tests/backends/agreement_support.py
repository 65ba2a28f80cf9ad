"""Judge agreement against a real backend (SPEC §11), counted here by hand: the runs, the two
people's verdicts, Cohen's kappa from observed and chance agreement, and the checks of one
``agreement --json --disagreements`` row against them."""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ANSWERS = ["Paris."] * 7 + ["Lyon."] * 5
"""The runs' answers: ``relevance`` scores the first seven 0.9 (pass), the last five 0.2 (fail)."""
JUDGE = ["pass" if "Paris" in answer else "fail" for answer in ANSWERS]
ANA = [True, True, True, True, True, False, True, False, False, False, True, True]
BEN = [True, True, True, True, True, True, False, False, False, False, False, True]  # differs on 5, 6 and 10


def verdict(value: bool) -> str:
    return "pass" if value else "fail"


def kappa(a: list[str], b: list[str]) -> float:
    """Cohen's kappa of two raters: (observed - chance agreement) / (1 - chance)."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    chance = sum((a.count(c) / n) * (b.count(c) / n) for c in set(a) | set(b))
    return (observed - chance) / (1 - chance)


def people_s_verdicts(first: list[bool], later: list[bool]) -> list[str]:
    """Each item's human verdict: the majority of its two annotators; a tie (they differ) goes
    to the newest label, the later annotator's."""
    return [verdict(a) if a == b else verdict(b) for a, b in zip(first, later, strict=True)]


def check_row(row: dict[str, Any], runs: list[tuple[str, str]], shown: Callable[[bool], Any]) -> None:
    """One ``agreement --json --disagreements`` row of ``relevance`` equals what is counted here
    from the same verdicts (``runs``: trace and run span ids, in ``ANSWERS`` order). Every
    disagreement shows ben's label (the newest of its item: he labels after ana), its value as
    the backend gives it (``shown`` of his verdict) and his rationale ``"ben's call"``."""
    human = people_s_verdicts(ANA, BEN)
    pairs = list(zip(human, JUDGE, strict=True))
    assert (row["scorer"], row["version"], row["revision"], row["n"], row["n_scored"]) == (
        "relevance", "1", "", 12, 12)
    assert row["accuracy"] == pytest.approx(sum(h == j for h, j in pairs) / 12, abs=1e-4)
    assert row["kappa"] == pytest.approx(kappa(human, JUDGE), abs=1e-4)
    assert row["kappa_ci"][0] <= row["kappa"] <= row["kappa_ci"][1]
    assert row["confusion"] == {h: {j: pairs.count((h, j)) for j in ("pass", "fail")} for h in ("pass", "fail")}
    assert row["annotators_kappa"] == pytest.approx(kappa([verdict(v) for v in ANA], [verdict(v) for v in BEN]),
                                                    abs=1e-4)
    assert (row["mae"], row["rmse"], row["spearman"]) == (None, None, None)  # pass/fail labels: no numbers
    judge_mean = (7 * 0.9 + 5 * 0.2) / 12
    assert row["judge_mean"] == pytest.approx(judge_mean, abs=1e-4)
    # Every run labelled: mean(judge) + mean(human - judge) is the people's mean (an item's
    # number is the mean of its annotators' 1s and 0s).
    assert row["corrected_mean"] == pytest.approx((ANA.count(True) + BEN.count(True)) / 24, abs=1e-4)
    wrong = [(run, answer, later) for run, answer, later, h, j in zip(runs, ANSWERS, BEN, human, JUDGE, strict=True)
             if h != j]
    assert len(wrong) == 2  # runs 6 and 11 (were a tie ana's, runs 5, 10 and 11)
    assert sorted((d["trace_id"], d["span_id"], d["session_id"], d["score"], d["label"], d["annotator"],
                   d["rationale"]) for d in row["disagreements"]) == sorted(
        (trace_id, span_id, None, 0.9 if "Paris" in answer else 0.2, shown(later), "ben", "ben's call")
        for (trace_id, span_id), answer, later in wrong)


def tracescore(*args: str) -> subprocess.CompletedProcess[str]:
    """``tracescore ARGS`` run in this process (no interpreter to start, nothing imported again:
    the serial backend groups are the suite's longest path): its exit code and what it printed."""
    from collector.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def backfill_here(config: str, files: list[Path], workdir: Path, scorer: str) -> subprocess.CompletedProcess[str]:
    """``tracescore score FILES --scorer SCORER --export --config`` (the config written to
    ``workdir/backfill.toml``), in this process."""
    path = workdir / "backfill.toml"
    path.write_text(config)
    return tracescore("score", *map(str, files), "--scorer", scorer, "--format", "jsonl", "--export",
                      "--config", str(path), "--export-timeout", "60")
