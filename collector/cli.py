"""The `tracescore` command line: dispatches to one module per subcommand.

Only this module configures logging handlers. Global flags (``-v``, ``--log-format``) are
accepted before or after the subcommand: ``tracescore -v serve`` and ``tracescore serve -v``
are the same.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from pythonjsonlogger.json import JsonFormatter

from collector.commands.flags import add_global_flags
from collector.metrics import VERSION

# Subcommands in the order `tracescore --help` lists them; each is collector/commands/<name>.py
# (a dash in the command is an underscore in the module).
COMMANDS: tuple[str, ...] = ("demo", "serve", "status", "dead-letters", "check", "inspect", "score")

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand.

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
    parser.add_argument("--version", action="version", version=f"tracescore {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"collector.commands.{name.replace('-', '_')}")
        sub_parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
        add_global_flags(sub_parser)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_command_module=module)
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
    return int(args._command_module.run(args))


if __name__ == "__main__":
    sys.exit(main())
