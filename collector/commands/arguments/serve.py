"""The arguments of ``tracescore serve``."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config``, ``--scorer`` and ``--role``.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> p.parse_args(["--scorer", "m:s", "--scorer", "m:t"]).scorer
        ['m:s', 'm:t']
        >>> p.parse_args(["--role", "worker"]).role, p.parse_args([]).role
        ('worker', 'all')
    """
    parser.add_argument("--config", "-c", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--scorer", action="append", default=[], metavar="REF",
                        help="scorer to run (module:attr or path/file.py:attr); repeatable")
    parser.add_argument("--role", choices=("all", "receiver", "worker"), default="all",
                        help="receiver: receive and assemble; worker: score and export "
                             "(both need a redis:// queue.url); all: everything (default)")
