"""``tracescore gate --min-kappa K [--scorer ID]`` (SPEC §11): fail CI when a judge agrees with
people less than K.

For every configured scorer (or ``--scorer``), the series of its current version and judge
revision (a few-shot scorer's: with the examples in force) is measured; the gate fails (exit 1) when one with at least ``[labels] min_labels``
labelled items has a κ below K. A series with fewer labels is named and passes (there is not
enough evidence either way); a κ that is undefined (one verdict only, on both sides) passes.
Exit codes: 0 passed; 1 failed, or the store cannot be reached; 2 a bad configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from collector.commands.dead_letters import unreachable
from collector.commands.label_context import Deployment, deployment, measured
from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.work.few_shot import revisions_in_force


def gate_findings(rows: Sequence[Mapping[str, Any]], current: Mapping[str, tuple[str, str]], min_kappa: float,
                  min_labels: int) -> tuple[list[str], list[str]]:
    """(why the gate fails, what it passed) for the series of each scorer's current version and revision.

    Example:
        >>> rows = [{"scorer": "tone", "version": "1", "revision": "r2", "n": 30, "kappa": 0.31},
        ...         {"scorer": "tone", "version": "1", "revision": "r1", "n": 90, "kappa": 0.9},
        ...         {"scorer": "facts", "version": "", "revision": "f", "n": 5, "kappa": 0.1}]
        >>> failed, passed = gate_findings(rows, {"tone": ("1", "r2"), "facts": ("", "f")}, 0.6, 20)
        >>> failed
        ['tone (version 1, revision r2): kappa 0.310 over 30 labelled items is below 0.6']
        >>> passed
        ['facts (version -, revision f): 5 labelled items, fewer than min_labels 20: not gated']
    """
    failed, passed = [], []
    by_series = {(r["scorer"], r["version"] or "", r["revision"] or ""): r for r in rows}
    for scorer, (version, revision) in sorted(current.items()):
        name = f"{scorer} (version {version or '-'}, revision {revision or '-'})"
        row = by_series.get((scorer, version, revision))
        n = row["n"] if row else 0
        if n < min_labels:
            passed.append(f"{name}: {n} labelled items, fewer than min_labels {min_labels}: not gated")
        elif row is not None and row["kappa"] is None:
            passed.append(f"{name}: kappa undefined over {n} items (one verdict only)")
        elif row is not None and row["kappa"] < min_kappa:
            failed.append(f"{name}: kappa {row['kappa']:.3f} over {n} labelled items is below {min_kappa:g}")
        elif row is not None:
            passed.append(f"{name}: kappa {row['kappa']:.3f} over {n} labelled items")
    return failed, passed


async def _act(args: argparse.Namespace, found: Deployment) -> int:
    entries = [e for e in found.registry.entries if args.scorer in (None, e.scorer_id)]
    if not entries:
        print(f"tracescore: no configured scorer {args.scorer or ''} to gate".replace("  ", " "), file=sys.stderr)
        return 2
    store = found.store()
    try:
        revisions = await revisions_in_force(store, entries)
        current = {e.scorer_id: (e.version or "", revisions[(e.scorer_id, e.version)]) for e in entries}
        report = await measured(store, found.rules, time.time() - found.config.labels.retain_s, scorer=args.scorer)
    finally:
        await store.close()
    failed, passed = gate_findings([s.to_json() for s in report.series], current, args.min_kappa,
                                   found.config.labels.min_labels)
    for line in passed:
        print(f"ok: {line}")
    for line in failed:
        print(f"FAILED: {line}")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    """Gate; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml", scorer=None, min_kappa=0.5))
        2
    """
    try:
        found = deployment(args)
    except ConfigError as err:
        report_config_error(err)
        return 2
    try:
        return asyncio.run(_act(args, found))
    except unreachable(found.config) as err:
        print(f"tracescore: cannot reach the store at {found.config.queue.display_url}: {err}", file=sys.stderr)
        return 1
