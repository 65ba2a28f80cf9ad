"""The arguments of ``tracescore check``."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the CONFIG argument.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> p.parse_args(["ts.toml"]).config
        'ts.toml'
    """
    parser.add_argument("config", metavar="CONFIG", help="TOML configuration file")
