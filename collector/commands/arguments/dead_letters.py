"""The arguments of ``tracescore dead-letters``: its actions and theirs."""

from __future__ import annotations

import argparse

from collector.commands.flags import add_global_flags

ACTIONS = (("list", "list the dead letters"), ("show", "show one dead letter whole"),
           ("replay", "queue dead letters again (same idempotency key)"), ("purge", "delete dead letters"))
"""Each action and its help line, in the order ``--help`` lists them."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the actions and their arguments; ``--config`` goes before or after the action.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> a = p.parse_args(["replay", "3", "4", "--config", "ts.toml"])
        >>> a.action, a.ids, a.config, a.all
        ('replay', ['3', '4'], 'ts.toml', False)
        >>> p.parse_args(["--config", "ts.toml", "list", "--format", "json"]).config
        'ts.toml'
    """
    parser.add_argument("--config", "-c", metavar="FILE", default=None,
                        help="the daemon's configuration (its queue.url names the store)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in ACTIONS:
        action = actions.add_parser(name, help=text, description=text)
        add_global_flags(action)
        action.add_argument("--config", "-c", metavar="FILE", default=argparse.SUPPRESS,
                            help="the daemon's configuration (its queue.url names the store)")
        if name in ("list", "show"):
            action.add_argument("--format", choices=("table", "json"), default="table")
        if name == "show":
            action.add_argument("id", metavar="ID")
        if name in ("replay", "purge"):
            action.add_argument("ids", nargs="*", metavar="ID")
            action.add_argument("--all", action="store_true", help=f"{name} every dead letter")
