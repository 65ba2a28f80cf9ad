"""What ``tracescore align`` prints and writes (SPEC §11).

`AlignReport` holds the figures; `AlignReport.to_json` is the one object ``--json`` prints
(``scorer``, ``labels``, ``holdout_n``, ``current`` ``{kappa, kappa_ci, accuracy}``,
``candidates`` (each ``{instructions, few_shot, kappa, kappa_ci, accuracy}``, a failed one
with its ``error``), ``adopted``, ``out``, ``calls``, ``usd``) and `print_table` the table on
a terminal. `write_instructions` writes ``DIR/<scorer id>.toml`` atomically: a temporary
file in DIR, flushed to disk, renamed over the target, so an align interrupted at any point
leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from collector.commands.align.judging import Agreement
from collector.commands.estimate import EstimateRow
from collector.commands.layout import print_table as show

__all__ = ["AlignReport", "Candidate", "estimate_table", "toml_text", "write_instructions"]


@dataclass(frozen=True)
class Candidate:
    """One measured candidate: its instructions (the proposer's reply for a failed one), with or
    without few-shot examples (``few_shot``: how many), and its holdout agreement; or ``error``."""

    number: int
    instructions: str | None
    few_shot: int | None = None
    agreement: Agreement | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The candidate as ``--json`` prints it.

        Example:
            >>> Candidate(2, None, error="empty reply").to_json()
            {'candidate': 2, 'instructions': None, 'few_shot': None, 'kappa': None, 'kappa_ci': None, 'accuracy': None, 'n': None, 'error': 'empty reply'}
        """
        figures = self.agreement.to_json() if self.agreement is not None else \
            {"kappa": None, "kappa_ci": None, "accuracy": None, "n": None}
        return {"candidate": self.number, "instructions": self.instructions, "few_shot": self.few_shot,
                "kappa": figures["kappa"], "kappa_ci": figures["kappa_ci"], "accuracy": figures["accuracy"],
                "n": figures["n"], "error": self.error}


@dataclass
class AlignReport:
    """An align's outcome."""

    scorer: str
    labels: int
    train_n: int
    holdout_n: int
    disagreements: int
    current: Agreement
    candidates: list[Candidate] = field(default_factory=list)
    instructions: str = ""  # the current instructions
    best: Candidate | None = None
    adopted: bool = False
    out: str | None = None
    calls: int = 0
    usd: float | None = 0.0

    def to_json(self) -> dict[str, Any]:
        """The one object ``align --json`` prints."""
        current = self.current.to_json()
        return {"scorer": self.scorer, "labels": self.labels, "train_n": self.train_n, "holdout_n": self.holdout_n,
                "disagreements": self.disagreements,
                "current": {k: current[k] for k in ("kappa", "kappa_ci", "accuracy", "n")},
                "candidates": [c.to_json() for c in self.candidates],
                "best": None if self.best is None else {"candidate": self.best.number, "few_shot": self.best.few_shot},
                "adopted": self.adopted, "out": self.out, "calls": self.calls, "usd": self.usd}

    def lines(self) -> list[str]:
        """What follows the table: the verdict, the file, the spend, how to adopt."""
        lines = [f"{self.labels} labelled item(s): {self.train_n} train ({self.disagreements} where the current "
                 f"judge disagrees), {self.holdout_n} holdout; {self.calls} call(s), "
                 + ("unpriced USD" if self.usd is None else f"{self.usd:.6f} USD")]
        if self.adopted and self.out and self.best is not None:
            lines.append(f"candidate {self.best.number}{_with(self.best)} beats the current judge on the holdout: "
                         f"its instructions are in {self.out}")
            lines.append(f'adopt them with  instructions_file = "{self.out}"  in the scorer\'s [[scorers]] entry'
                         + (f" (and few_shot = {self.best.few_shot}: it was measured with examples)"
                            if self.best.few_shot else "") + "; nothing running changes by itself")
        else:
            lines.append("no candidate beats the current judge on the holdout: nothing written")
        return lines


def _with(candidate: Candidate) -> str:
    return f" with {candidate.few_shot} few-shot example(s)" if candidate.few_shot else ""


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _figures(a: Agreement | None) -> list[str]:
    if a is None:
        return ["-", "-", "-", "-"]
    ci = f"[{_f(a.kappa_ci[0])}, {_f(a.kappa_ci[1])}]" if a.kappa_ci else "-"
    return [_f(a.kappa), ci, _f(a.accuracy), f"{a.n}" + (f" ({a.failed} failed)" if a.failed else "")]


def print_table(report: AlignReport, console: Console | None = None) -> None:
    """The report on a terminal: a row for the current judge and each candidate, then `lines`."""
    table = Table(title=f"align {report.scorer}: agreement with people on {report.holdout_n} holdout item(s)")
    for name in ("judge", "few-shot", "kappa", "95% interval", "accuracy", "items", "instructions / error"):
        table.add_column(name, overflow="fold")
    table.add_row("current", "-", *_figures(report.current), " ".join(report.instructions.split())[:160],
                  end_section=True)
    for c in report.candidates:
        best = " (best)" if c is report.best else ""
        text = c.error if c.error is not None else " ".join((c.instructions or "").split())[:160]
        table.add_row(f"candidate {c.number}{best}", "-" if c.few_shot is None else str(c.few_shot),
                      *_figures(c.agreement), text)
    console = console or Console()
    show(console, table)
    for line in report.lines():
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def estimate_table(rows: Sequence[EstimateRow]) -> Table:
    """``align --estimate``'s table: a row per phase and the total (the last row).

    Example:
        >>> from collector.commands.estimate import Tally
        >>> estimate_table([EstimateRow("proposer", 4, 0, Tally(calls=4))]).row_count
        1
    """
    table = Table(title="align: judge and proposer cost estimate (nothing was sent)")
    for name in ("phase", "items", "calls", "prompt tokens", "output tokens", "USD", "worst-case output tokens",
                 "worst-case USD"):
        table.add_column(name, justify="left" if name == "phase" else "right")
    for i, row in enumerate(rows):
        table.add_row(*row.cells(), end_section=i == len(rows) - 2)
    return table


def toml_text(instructions: str, note: str = "") -> str:
    r'''The instructions file: comment lines (``note``), then ``instructions = """..."""`` (a
    TOML multi-line basic string, escaped so that reading it gives ``instructions`` back).

    Example:
        >>> text = toml_text('Say "pass" only when\nthe answer is polite. \\o/', "written by tracescore align")
        >>> print(text)
        # written by tracescore align
        instructions = """
        Say \"pass\" only when
        the answer is polite. \\o/"""
        <BLANKLINE>
        >>> tomllib.loads(text)["instructions"]
        'Say "pass" only when\nthe answer is polite. \\o/'
    '''
    body = instructions.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "\\r")
    body = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", body)
    comments = "".join(f"# {line}\n" for line in note.splitlines())
    text = f'{comments}instructions = """\n{body}"""\n'
    if tomllib.loads(text).get("instructions") != instructions:  # never write what would read back otherwise
        text = f"{comments}instructions = {json.dumps(instructions, ensure_ascii=False)}\n"
    return text


def write_instructions(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file beside it, flushed and synced,
    renamed over ``path`` (the old file, if any, stays whole until then); the temporary file
    is removed if anything fails.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> write_instructions(folder / "tone.toml", 'instructions = "Be kind."\\n')
        >>> sorted(p.name for p in folder.iterdir()), (folder / "tone.toml").read_text()
        (['tone.toml'], 'instructions = "Be kind."\\n')
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), 0o644)  # as a file written by hand, not mkstemp's 0600
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # the rename itself is durable once the folder is synced
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
