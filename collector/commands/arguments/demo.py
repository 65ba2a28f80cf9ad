"""The arguments of ``tracescore demo``."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--samples`` and ``--timeout``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> args = parser.parse_args([])
        >>> (args.samples, args.timeout)
        (None, 30.0)
        >>> parser.parse_args(["--samples", "traces", "--timeout", "5"]).samples
        PosixPath('traces')
    """
    parser.add_argument(
        "--samples", type=Path, default=None, metavar="DIR",
        help="replay the OTLP trace files (.pb or OTLP/JSON) of DIR instead of the bundled samples",
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS",
        help="give up waiting for scores after this long (default: 30)",
    )
