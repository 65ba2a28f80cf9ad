"""``tracescore judges [--format table|json]``, ``tracescore judges resume MODEL`` and
``tracescore judges budget SCOPE --usd N`` (SPEC §8).

Reads the judge ledger of the store ``--config FILE`` names (``queue.url``), while the
daemon runs: every judge budget of ``[judge.budgets]`` (spent, reserved, limit, what is
left and when the window resets), every open circuit breaker (model, the provider's
answer that opened it, since when, the next probe) and the jobs parked per reason.
``resume MODEL`` closes that model's breakers by hand and wakes the jobs parked on a
breaker: the workers take them at once (a job of another model whose breaker is still open
parks again). ``budget SCOPE --usd N`` sets a configured budget's limit in the ledger, for
every replica at once and without a restart, and wakes the jobs parked on a budget; the
limit holds until the configured limit of that budget changes (then the configuration's
holds again), and N equal to the configured limit removes it. Exit codes: 0 done; 1 the
store cannot be reached, or ``resume`` found no open breaker for MODEL; 2 a bad
configuration, or a SCOPE the configuration has no budget for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from collector.commands.dead_letters import open_judge_ledger, unreachable, when_utc
from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.config import Config, load_config
from collector.store.judge_interface import JudgeLedgerAdmin
from collector.work.governor import judge_report


def print_report(report: dict[str, Any], fmt: str) -> None:
    """Print a `collector.work.governor.judge_report`: JSON, or three short tables.

    Example:
        >>> print_report({"budgets": [], "breakers": [], "parked": {"budget_exhausted": 0}}, "table")
        judge budgets: none configured
        circuit breakers: all closed
        parked jobs: budget_exhausted 0
    """
    if fmt == "json":
        print(json.dumps(report, indent=2))
        return
    if not report["budgets"]:
        print("judge budgets: none configured")
    for row in report["budgets"]:
        by_hand = "" if row.get("configured", row["limit"]) == row["limit"] else (
            f" (set by `tracescore judges budget`; configured {row['configured']:g})")
        print(f"judge budget {row['scope']} ({row['window']}): spent {row['spent']:.6f}, reserved "
              f"{row['reserved']:.6f}, limit {row['limit']:g}{by_hand}, remaining {row['remaining']:.6f} USD; "
              f"resets {when_utc(row['reset'])}")
    if not report["breakers"]:
        print("circuit breakers: all closed")
    for row in report["breakers"]:
        print(f"circuit breaker {row['model']} open since {when_utc(row['since'])}: {row['reason']}; "
              f"next probe {when_utc(row['next_probe'])} (every {row['interval_s']:g} s)")
    print("parked jobs: " + ", ".join(f"{reason} {count}" for reason, count in report["parked"].items()))


async def _set_budget(ledger: JudgeLedgerAdmin, config: Config, scope: str, usd: float) -> int:
    """``budget SCOPE --usd N``: set the limit over the configured one and wake the parked jobs."""
    configured = dict(config.judge.budgets.all_limits())
    if scope not in configured:
        known = ", ".join(configured) or "none"
        print(f"tracescore: [judge.budgets] of the configuration has no budget {scope!r} (configured: {known}); "
              "add it to the configuration (and restart) to create a budget", file=sys.stderr)
        return 2
    await ledger.set_judge_limit(scope, usd, configured[scope])
    woken = await ledger.wake_parked_jobs("budget_exhausted")
    source = "back to the configured limit" if usd == configured[scope] else f"configured {configured[scope]:g}"
    print(f"judge budget {scope}: limit {usd:g} USD per window for every replica ({source}); "
          f"{woken} parked job(s) run now")
    return 0


async def _act(args: argparse.Namespace, config: Any) -> int:
    ledger = open_judge_ledger(config)
    try:
        if args.action == "resume":
            closed = await ledger.close_judge_breakers(model=args.model)
            if not closed:
                print(f"tracescore: no open circuit breaker for judge model {args.model}", file=sys.stderr)
                return 1
            woken = await ledger.wake_parked_jobs("judge_unavailable")
            print(f"closed {closed} circuit breaker(s) of {args.model}: {woken} parked job(s) run now")
            return 0
        if args.action == "budget":
            return await _set_budget(ledger, config, args.scope, args.usd)
        print_report(await judge_report(ledger, config.judge), args.format)
        return 0
    finally:
        await ledger.close()


def run(args: argparse.Namespace) -> int:
    """List or resume; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml", action=None, format="json"))
        2
    """
    try:
        config = load_config(args.config, secrets=False)  # the store and [judge] only: no sink key needed
    except ConfigError as err:
        report_config_error(err)
        return 2
    try:
        return asyncio.run(_act(args, config))
    except unreachable(config) as err:
        print(f"tracescore: cannot reach the store at {config.queue.display_url}: {err}", file=sys.stderr)
        return 1
