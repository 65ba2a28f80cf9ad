"""The arguments of ``tracescore judges``: list (the default) or ``resume MODEL``."""

from __future__ import annotations

import argparse

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
