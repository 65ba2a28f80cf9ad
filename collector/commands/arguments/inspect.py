"""The arguments of ``tracescore inspect``, and the FILE..., ``--format`` and ``--from`` it shares with ``score``."""

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
        >>> a = p.parse_args(["--from", "phoenix+http://h:6006/bot", "--since", "1h", "--limit", "50"])
        >>> (a.files, a.source, a.since, a.limit)
        ([], 'phoenix+http://h:6006/bot', '1h', 50)
    """
    add_common_arguments(parser, ("jsonl", "json", "table"), files="*")
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
    add_window_arguments(parser, "print the runs already in a backend instead of FILEs")
    parser.add_argument("--limit", type=positive_int, default=1000, metavar="N",
                        help="with --from: read at most N traces (default 1000; narrow the window with --since)")
    parser.add_argument("--config", "-c", metavar="FILE",
                        help="with --from: TOML configuration whose [sinks.*] keys authenticate to the backend")


def positive_int(text: str) -> int:
    """Parse an integer of at least 1 (the argument of ``--concurrency``).

    Example:
        >>> positive_int("4")
        4
        >>> positive_int("0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: must be at least 1
    """
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_window_arguments(parser: argparse.ArgumentParser, what: str, page_note: str = "") -> None:
    """Add ``--from URL`` (``what`` it does: a backend's traces instead of FILEs), ``--since``,
    ``--until``, ``--filter`` and ``--page-size`` (``page_note``: what a page is to the command):
    the reading of a backend that ``inspect`` and ``score`` share (`collector.receive.pull`).

    Example:
        >>> p = argparse.ArgumentParser(); add_window_arguments(p, "read a backend")
        >>> a = p.parse_args(["--from", "mlflow+http://h:5000/3", "--until", "2026-12-01", "--page-size", "20"])
        >>> (a.source, a.since, a.until, a.filter, a.page_size)
        ('mlflow+http://h:5000/3', None, '2026-12-01', None, 20)
    """
    parser.add_argument("--from", dest="source", metavar="URL",
                        help=f"{what}: phoenix+http://HOST:6006/PROJECT, mlflow+http://HOST:5000/EXPERIMENT_ID or "
                             "langfuse+https://HOST (keys from [sinks.*] of --config, or the backend's usual "
                             "environment variables)")
    parser.add_argument("--since", metavar="TIME",
                        help="with --from: traces that started at or after TIME (ISO 8601, or back from now: 12h, 7d)")
    parser.add_argument("--until", metavar="TIME",
                        help="with --from: traces that started before TIME (ISO 8601, or back from now)")
    parser.add_argument("--filter", metavar="EXPR",
                        help="with --from: the backend's own filter, passed through (a Phoenix trace filter "
                             "expression, an MLflow search filter, Langfuse JSON filter conditions)")
    parser.add_argument("--page-size", type=positive_int, default=None, metavar="N",
                        help=f"with --from: traces per page read from the backend (default 100; Langfuse 50)"
                             f"{page_note}")


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
