"""The `tracescore` command line: dispatches to one module per subcommand.

Only this module configures logging handlers.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from importlib import metadata

# Subcommands in the order `tracescore --help` lists them; each is collector/commands/<name>.py.
COMMANDS: tuple[str, ...] = ("demo", "serve", "check", "inspect", "score")


def _version() -> str:
    try:
        return metadata.version("tracescore")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand.

    Example:
        >>> parser = build_parser()
        >>> parser.prog
        'tracescore'
    """
    parser = argparse.ArgumentParser(
        prog="tracescore",
        description="Score the agent runs in your OpenTelemetry traces.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument("--version", action="version", version=f"tracescore {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"collector.commands.{name}")
        sub_parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_command_module=module)
    return parser


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
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return int(args._command_module.run(args))


if __name__ == "__main__":
    sys.exit(main())
