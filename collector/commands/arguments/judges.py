"""The arguments of ``tracescore judges``: list (the default), ``resume MODEL`` or ``budget SCOPE --usd N``."""

from __future__ import annotations

import argparse

from collector.commands.arguments.score import positive_usd
from collector.commands.flags import add_global_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config``, ``--format`` and the optional action.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> a = p.parse_args(["--config", "ts.toml"])
        >>> a.action, a.config, a.format
        (None, 'ts.toml', 'table')
        >>> a = p.parse_args(["resume", "openai/gpt-4o-mini", "-c", "ts.toml"])
        >>> a.action, a.model, a.config
        ('resume', 'openai/gpt-4o-mini', 'ts.toml')
        >>> a = p.parse_args(["budget", "model:openai/gpt-4o", "--usd", "12.5", "-c", "ts.toml"])
        >>> a.action, a.scope, a.usd
        ('budget', 'model:openai/gpt-4o', 12.5)
    """
    parser.add_argument("--config", "-c", metavar="FILE", default=None,
                        help="the daemon's configuration (its queue.url names the store, [judge] the budgets)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    actions = parser.add_subparsers(dest="action", required=False, metavar="ACTION")
    text = "close the circuit breakers of a judge model by hand (its parked jobs run again)"
    resume = actions.add_parser("resume", help=text, description=text)
    add_global_flags(resume)
    resume.add_argument("--config", "-c", metavar="FILE", default=argparse.SUPPRESS,
                        help="the daemon's configuration (its queue.url names the store)")
    resume.add_argument("model", metavar="MODEL", help="the judge model, as the scorers name it (openai/gpt-4o-mini)")
    text = ("set the limit of a configured judge budget for every replica, without a restart (its parked jobs "
            "run again); it holds until that budget's configured limit changes")
    budget = actions.add_parser("budget", help=text, description=text)
    add_global_flags(budget)
    budget.add_argument("--config", "-c", metavar="FILE", default=argparse.SUPPRESS,
                        help="the daemon's configuration (its queue.url names the store, [judge.budgets] the budgets)")
    budget.add_argument("scope", metavar="SCOPE",
                        help="the budget, as `tracescore judges` names it: global, scorer:ID or model:MODEL")
    budget.add_argument("--usd", type=positive_usd, required=True, metavar="N",
                        help="its new limit in USD per window (the configured limit again: back to the configuration)")
