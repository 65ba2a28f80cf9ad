"""``tracescore demo``: score the bundled sample agent runs with the example scorers.

No API key, no network, no Redis: the runs are JSON files in ``collector/samples/``
(agent-typed input and output, snake_case or Mastra's camelCase), the scorers are the
function scorers of `collector.demo_scorers`, and the scores are printed as a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from collector.demo_scorers import DEMO_SCORERS
from scorers import Scorer, ScorerResult, ScorerRunError

HELP = "Score the bundled sample agent runs with example scorers (no API key needed)."


@dataclass(frozen=True)
class Sample:
    """One sample run loaded from a JSON file."""

    name: str
    description: str
    input: Any
    output: Any
    ground_truth: Any = None


@dataclass(frozen=True)
class Row:
    """One (sample, scorer) outcome of the demo."""

    sample: str
    scorer: str
    score: float | None
    reason: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the demo's options.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> parser.parse_args([]).samples is None
        True
    """
    parser.add_argument(
        "--samples",
        type=Path,
        default=None,
        help="a directory of sample run JSON files (default: the bundled samples)",
    )


def load_samples(directory: Path | None = None) -> list[Sample]:
    """Load every ``*.json`` sample run of ``directory`` (default: the bundled ones), by name.

    Example:
        >>> [s.name for s in load_samples()][:2]
        ['capital_of_france', 'mastra_failed_tool']
    """
    root: Any = directory if directory is not None else resources.files("collector") / "samples"
    files = sorted((f for f in root.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
    samples = []
    for file in files:
        data = json.loads(file.read_text(encoding="utf-8"))
        samples.append(
            Sample(
                name=file.name.removesuffix(".json"),
                description=data.get("description", ""),
                input=data.get("input"),
                output=data.get("output"),
                ground_truth=data.get("ground_truth"),
            )
        )
    return samples


def _row(
    sample: Sample, scorer: Scorer[Any, Any], outcome: ScorerResult[Any, Any] | Exception
) -> Row:
    if isinstance(outcome, Exception):
        return Row(sample.name, scorer.name, None, f"error: {outcome}")
    if outcome.not_scorable is not None:
        reason = outcome.not_scorable.reason or ""
        return Row(sample.name, scorer.name, None, f"not scorable: {reason}".rstrip(": "))
    return Row(sample.name, scorer.name, outcome.score, str(outcome.reason or ""))


async def score_samples(
    samples: list[Sample], scorers: tuple[Scorer[Any, Any], ...] = DEMO_SCORERS
) -> list[Row]:
    """Run every scorer on every sample concurrently; one `Row` per pair, in order.

    Example:
        >>> rows = asyncio.run(score_samples(load_samples()[:1]))
        >>> [(r.scorer, r.score) for r in rows]
        [('Keyword coverage', 1.0), ('Tool results', None), ('Ground truth match', 1.0)]
    """

    async def one(sample: Sample, scorer: Scorer[Any, Any]) -> Row:
        try:
            result = await scorer.run(
                input=sample.input,
                output=sample.output,
                ground_truth=sample.ground_truth,
                run_id=f"demo-{sample.name}",
            )
        except ScorerRunError as exc:
            return _row(sample, scorer, exc)
        return _row(sample, scorer, result)

    return list(await asyncio.gather(*(one(s, sc) for s in samples for sc in scorers)))


def render(rows: list[Row], console: Console) -> None:
    """Print the rows as a table."""
    table = Table(title="tracescore demo: sample agent runs scored by example scorers")
    table.add_column("run")
    table.add_column("scorer")
    table.add_column("score", justify="right")
    table.add_column("reason")
    previous = None
    for row in rows:
        score = "-" if row.score is None else f"{row.score:.2f}"
        table.add_row(row.sample if row.sample != previous else "", row.scorer, score, row.reason)
        previous = row.sample
    console.print(table)


def run(args: argparse.Namespace) -> int:
    """Score the samples and print the table; returns the exit code (1 if a scorer failed)."""
    samples = load_samples(args.samples)
    rows = asyncio.run(score_samples(samples))
    render(rows, Console())
    return 1 if any(r.reason.startswith("error:") for r in rows) else 0
