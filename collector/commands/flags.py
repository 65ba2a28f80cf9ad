"""The global flags (``-v``, ``--log-format``), accepted before or after a subcommand."""

from __future__ import annotations

import argparse


def add_global_flags(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """Add ``-v``/``--verbose`` and ``--log-format`` to the top parser (``top``) or to a
    subcommand's: there their defaults are SUPPRESS, so a flag given only before the
    subcommand is not reset by the subcommand's parser.

    Example:
        >>> top, sub = argparse.ArgumentParser(), argparse.ArgumentParser()
        >>> add_global_flags(top, top=True); add_global_flags(sub)
        >>> top.parse_args([]).verbose, vars(sub.parse_args([])), sub.parse_args(["-vv"]).verbose
        (0, {}, 2)
    """
    suppress = argparse.SUPPRESS
    parser.add_argument("-v", "--verbose", action="count", default=0 if top else suppress,
                        help="more logging: -v INFO (a line per score, tracebacks of scorer failures), -vv DEBUG")
    parser.add_argument("--log-format", choices=("text", "json"), default="text" if top else suppress,
                        help="log lines as text (default) or as one JSON object per line")
