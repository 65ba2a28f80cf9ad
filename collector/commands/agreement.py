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

from collector.commands.dead_letters import unreachable
from collector.commands.label_context import Deployment, deployment, measured, since_of
from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.status.agreement import AgreementReport


def _f(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def _ci(pair: Sequence[float] | None) -> str:
    return "" if not pair else f" [{_f(pair[0])}, {_f(pair[1])}]"


def series_lines(row: Mapping[str, Any]) -> list[str]:
    """One series as ``tracescore agreement`` prints it on a terminal (80 columns).

    Example:
        >>> row = {"scorer": "relevance", "version": "1", "revision": "5f0c2e9a", "n": 60, "n_scored": 400,
        ...        "accuracy": 0.7333, "kappa": 0.4514, "kappa_ci": [0.2176, 0.6802], "mae": None,
        ...        "annotators_kappa": 0.9155, "judge_mean": 0.5202, "corrected_mean": 0.4969,
        ...        "corrected_ci": [0.3737, 0.6201], "confusion": {"pass": {"pass": 17, "fail": 8},
        ...                                                        "fail": {"pass": 8, "fail": 27}}}
        >>> print("\\n".join(series_lines(row)))
        relevance  version 1  judge revision 5f0c2e9a
          labelled items         60 (of 400 scored)
          accuracy               0.733
          Cohen's kappa          0.451 [0.218, 0.680]
          people's own kappa     0.915
          judge mean             0.520, corrected by the labels 0.497 [0.374, 0.620]
          people x judge         pass: pass 17, fail 8; fail: pass 8, fail 27
    """
    lines = [f"{row['scorer']}  version {row['version'] or '-'}  judge revision {row['revision'] or '-'}",
             f"  labelled items         {row['n']} (of {row['n_scored']} scored)",
             f"  accuracy               {_f(row['accuracy'])}",
             f"  Cohen's kappa          {_f(row['kappa'])}{_ci(row.get('kappa_ci'))}",
             f"  people's own kappa     {_f(row.get('annotators_kappa'))}"]
    if row.get("mae") is not None:
        lines.append(f"  MAE / RMSE / Spearman  {_f(row['mae'])} / {_f(row.get('rmse'))} / {_f(row.get('spearman'))}")
    lines.append(f"  judge mean             {_f(row['judge_mean'])}, corrected by the labels "
                 f"{_f(row['corrected_mean'])}{_ci(row.get('corrected_ci'))}")
    cells = [f"{human}: " + ", ".join(f"{judge} {count}" for judge, count in judged.items())
             for human, judged in (row.get("confusion") or {}).items()]
    lines.append("  people x judge         " + "; ".join(cells))
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
        for row in rows:
            print("\n".join(series_lines(row)))
            for d in row.get("disagreements") or ():
                where = f"session {d['session_id']}" if d.get("session_id") else f"trace {d['trace_id']} span {d['span_id']}"
                print(f"  disagrees: {where}: judge {d['score']}, people {json.dumps(d['label'])}"
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
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        return 0
    except unreachable(found.config) as err:
        print(f"tracescore: cannot reach the store at {found.config.queue.display_url}: {err}", file=sys.stderr)
        return 1
