"""``tracescore agreement [--scorer ID] [--since 30d] [--json] [--disagreements]`` (SPEC §11).

How far each judge agrees with the people who labelled its runs and conversations, per
scorer, version and judge revision, over the scores kept in the window: a table on a terminal
(with each series' confusion matrix, and the disagreements when asked), or one JSON object a
line (`collector.status.agreement.SeriesAgreement.to_json`). Exit codes: 0 done; 1 the store
cannot be reached; 2 a bad configuration or ``--since``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from collector.commands.dead_letters import unreachable
from collector.commands.label_context import Deployment, deployment, measured, since_of
from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.status.agreement import AgreementReport


def _f(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def _ci(pair: Sequence[float] | None) -> str:
    return "" if not pair else f" [{_f(pair[0])}, {_f(pair[1])}]"


def series_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """The series as a rich table.

    Example:
        >>> row = {"scorer": "tone", "version": "1", "revision": "3f2a9c1e", "n": 40, "n_scored": 900,
        ...        "accuracy": 0.9, "kappa": 0.78, "kappa_ci": [0.6, 0.9], "mae": None, "rmse": None,
        ...        "spearman": None, "annotators_kappa": None, "judge_mean": 0.7, "corrected_mean": 0.64,
        ...        "corrected_ci": [0.6, 0.68]}
        >>> series_table([row]).row_count
        1
    """
    table = Table(title="judge agreement with people's labels", title_justify="left")
    for name in ("scorer", "version", "revision", "n", "scored", "accuracy", "kappa [95% CI]", "people's kappa",
                 "MAE / RMSE / rho", "judge mean", "corrected mean [95% CI]"):
        table.add_column(name, justify="left" if name in ("scorer", "version", "revision") else "right")
    for r in rows:
        numeric = "-" if r.get("mae") is None else f"{_f(r['mae'])} / {_f(r['rmse'])} / {_f(r['spearman'])}"
        table.add_row(r["scorer"], r["version"] or "-", r["revision"] or "-", str(r["n"]), str(r["n_scored"]),
                      _f(r["accuracy"]), _f(r["kappa"]) + _ci(r.get("kappa_ci")), _f(r.get("annotators_kappa")),
                      numeric, _f(r["judge_mean"]), _f(r["corrected_mean"]) + _ci(r.get("corrected_ci")))
    return table


def confusion_lines(row: Mapping[str, Any]) -> list[str]:
    """A series' confusion matrix as text lines (people's verdict by row, the judge's by column).

    Example:
        >>> confusion_lines({"scorer": "tone", "version": "1", "revision": "r",
        ...                  "confusion": {"pass": {"pass": 12, "fail": 3}, "fail": {"pass": 1, "fail": 9}}})
        ['tone v1 @r: people (rows) x judge (columns)', '  fail: fail 9, pass 1', '  pass: fail 3, pass 12']
    """
    lines = [f"{row['scorer']} v{row['version'] or '-'} @{row['revision'] or '-'}: people (rows) x judge (columns)"]
    for human, judged in sorted((row.get("confusion") or {}).items()):
        lines.append(f"  {human}: " + ", ".join(f"{judge} {count}" for judge, count in sorted(judged.items())))
    return lines


def print_report(report: AgreementReport, *, as_json: bool, disagreements: bool) -> None:
    """Print the report: JSON lines, or the table, the confusion matrices and what did not match."""
    rows = [series.to_json(disagreements=disagreements) for series in report.series]
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    if not rows:
        print("no score has a label yet: label runs in a backend ([labels] from) or `tracescore labels import`")
    else:
        Console(width=200).print(series_table(rows))
        for row in rows:
            print("\n".join(confusion_lines(row)))
            for d in row.get("disagreements") or ():
                where = f"session {d['session_id']}" if d.get("session_id") else f"trace {d['trace_id']} span {d['span_id']}"
                print(f"  disagree: {where}: judge {d['score']}, people {json.dumps(d['label'])}"
                      + (f" ({d['annotator']})" if d.get("annotator") else "")
                      + (f": {d['rationale']}" if d.get("rationale") else ""))
    if unmatched := sum(report.unmatched.values()):
        print(f"{unmatched} label(s) have no kept score yet (scored later, or outside the window)")
    if report.unreadable:
        print(f"{len(report.unreadable)} label(s) cannot be read as a verdict: `tracescore labels list` says why")


async def _act(args: argparse.Namespace, found: Deployment, since: float) -> int:
    store = found.store()
    try:
        report = await measured(store, found.rules, since, scorer=args.scorer)
    finally:
        await store.close()
    print_report(report, as_json=args.json, disagreements=args.disagreements)
    return 0


def run(args: argparse.Namespace) -> int:
    """Measure and print; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml", scorer=None, since=None, json=True,
        ...                        disagreements=False))
        2
    """
    try:
        found = deployment(args)
        since = since_of(args, found.config)
    except ConfigError as err:
        report_config_error(err)
        return 2
    try:
        return asyncio.run(_act(args, found, since))
    except unreachable(found.config) as err:
        print(f"tracescore: cannot reach the store at {found.config.queue.display_url}: {err}", file=sys.stderr)
        return 1
