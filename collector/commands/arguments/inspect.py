"""The arguments of ``tracescore inspect``, and the FILE... and ``--format`` it shares with ``score``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def add_common_arguments(parser: argparse.ArgumentParser, formats: Sequence[str] = ("jsonl", "table"),
                         default: str | None = None,
                         format_help: str = "output format (default: table on a terminal, jsonl otherwise)",
                         files: str = "+") -> None:
    """Add FILE... and ``--format`` with the given choices and default (shared by ``inspect`` and
    ``score``; None: the command decides); ``files``: how many FILEs (``*`` when another
    source may stand in for them, as ``score --from``).

    Example:
        >>> p = argparse.ArgumentParser(); add_common_arguments(p)
        >>> p.parse_args(["a.pb", "--format", "jsonl"]).format, p.parse_args(["a.pb"]).format
        ('jsonl', None)
    """
    parser.add_argument(
        "files",
        nargs=files,
        metavar="FILE",
        help="OTLP request files (.pb or .json, optionally gzip; *.logs.pb / *.logs.json hold logs), "
             "directories (every such file under them) or glob patterns",
    )
    parser.add_argument("--format", choices=tuple(formats), default=default, help=format_help)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``inspect`` arguments.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> p.parse_args(["S1.pb", "S1.logs.pb"]).files
        ['S1.pb', 'S1.logs.pb']
        >>> p.parse_args(["S1.pb", "--explain", "--format", "json"]).explain
        True
        >>> p.parse_args(["S1.pb", "--sessions"]).sessions
        True
    """
    add_common_arguments(parser, ("jsonl", "json", "table"))
    parser.add_argument(
        "--explain",
        action="store_true",
        help="per trace: each span's convention, which span is the run and why the others are not",
    )
    parser.add_argument(
        "--sessions",
        action="store_true",
        help="the conversations instead of the runs: per session key and service, its turns and first/last time",
    )
    add_session_key_argument(parser)


def add_session_key_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--session-key ATTR`` (repeatable): an attribute that names a run's session besides
    the standard ones (SPEC §7).

    Example:
        >>> p = argparse.ArgumentParser(); add_session_key_argument(p)
        >>> p.parse_args(["--session-key", "thread.id", "--session-key", "chat"]).session_key
        ['thread.id', 'chat']
    """
    parser.add_argument(
        "--session-key", action="append", metavar="ATTR",
        help="also take this span attribute as a run's session key, after the standard ones (repeatable)",
    )
