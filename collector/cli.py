"""The `tracescore` command line: dispatches to one module per subcommand.

Only this module configures logging handlers. Global flags (``-v``, ``--log-format``) are
accepted before or after the subcommand: ``tracescore -v serve`` and ``tracescore serve -v``
are the same. Building the parser imports no command's implementation
(`collector.commands.table`): ``--version``, ``--help`` and each command start with only
the modules they use.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from collector.commands.flags import add_global_flags
from collector.commands.table import COMMANDS

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class VersionAction(argparse.Action):
    """``--version``: print ``tracescore <version>`` and exit. The version is read from the
    package metadata only then, not each time the parser is built.

    Example:
        >>> parser = argparse.ArgumentParser(prog="ts")
        >>> _ = parser.add_argument("--version", action=VersionAction)
        >>> parser.parse_args([])  # not given: nothing read, nothing set
        Namespace()
        >>> try:
        ...     parser.parse_args(["--version"])
        ... except SystemExit as exit:
        ...     print("exit code", exit.code)
        ts ...
        exit code 0
    """

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str = "show program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from collector.common.version import build_version

        print(f"{parser.prog} {build_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand (their implementations are not imported).

    Example:
        >>> parser = build_parser()
        >>> parser.prog
        'tracescore'
        >>> [parser.parse_args(argv).verbose for argv in (["-v", "check", "t.toml"], ["check", "t.toml", "-vv"])]
        [1, 2]
    """
    parser = argparse.ArgumentParser(
        prog="tracescore",
        description="Score the agent runs in your OpenTelemetry traces.",
    )
    add_global_flags(parser, top=True)
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        sub_parser = sub.add_parser(command.name, help=command.help, description=command.help)
        add_global_flags(sub_parser)
        command.add_arguments(sub_parser)
        sub_parser.set_defaults(_command=command)
    return parser


def configure_logging(verbose: int, log_format: str) -> None:
    """Log to stderr at WARNING, INFO (``-v``) or DEBUG (``-vv``), as text or one JSON object
    per line (``time``, ``level``, ``logger``, ``message``, and ``exc_info`` with a traceback).

    Like `logging.basicConfig`, this does nothing when the root logger already has handlers
    (a program or test that calls `main` keeps its own).
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.StreamHandler()
    if log_format == "json":
        from pythonjsonlogger.json import JsonFormatter

        handler.setFormatter(JsonFormatter(TEXT_FORMAT.replace(": ", " "), rename_fields={
            "asctime": "time", "levelname": "level", "name": "logger"}))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tracescore` console script; returns the exit code.

    Example:
        >>> try:
        ...     main(["--version"])
        ... except SystemExit as exit:
        ...     print("exit code", exit.code)
        tracescore ...
        exit code 0
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose, args.log_format)
    return args._command.run(args)


if __name__ == "__main__":
    sys.exit(main())
