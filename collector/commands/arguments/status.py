"""The arguments of ``tracescore status``, and the URL it reads when given none."""

from __future__ import annotations

import argparse

DEFAULT_URL = "http://127.0.0.1:4318"
"""The daemon's default HTTP listener."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add URL..., ``--config``, ``--token``, ``--once``, ``--format`` and ``--interval``.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> a = p.parse_args(["http://a:4318", "b:4318", "--once", "--format", "json"])
        >>> a.urls, a.config, a.once, a.format
        (['http://a:4318', 'b:4318'], None, True, 'json')
        >>> p.parse_args(["--config", "ts.toml"]).config
        'ts.toml'
    """
    parser.add_argument("urls", nargs="*", metavar="URL", help=f"a daemon's HTTP listener (default: the one"
                        f" --config names, else {DEFAULT_URL}); several for a group")
    parser.add_argument("--config", "-c", metavar="FILE", default=None,
                        help="the daemon's configuration: its [receiver] http_endpoint is the URL when none is"
                        " given, its auth_token the token when none is given")
    parser.add_argument("--token", default=None, help="bearer token (default: $TRACESCORE_TOKEN)")
    parser.add_argument("--once", action="store_true", help="print one view and exit")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--interval", type=float, default=2.0, metavar="S", help="refresh every S seconds")
