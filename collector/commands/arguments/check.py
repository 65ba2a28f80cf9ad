"""The arguments of ``tracescore check``: the configuration file, as CONFIG or as ``--config``
(every other command takes ``--config``; both are accepted, and naming two files is an error)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the optional CONFIG argument and ``--config``/``-c`` (`config_path` picks the file).

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> p.parse_args(["ts.toml"]).config, p.parse_args(["--config", "ts.toml"]).config_option
        ('ts.toml', 'ts.toml')
    """
    parser.add_argument("config", metavar="CONFIG", nargs="?", default=None,
                        help="TOML configuration file (or give it as --config FILE, as other commands take it; "
                             "neither: the defaults and TRACESCORE_* variables)")
    parser.add_argument("--config", "-c", dest="config_option", metavar="FILE", default=None,
                        help="TOML configuration file (the same as CONFIG)")


def config_path(args: argparse.Namespace) -> str | None:
    """The configuration file ``check`` validates: CONFIG or ``--config`` (None: neither given).

    Raises:
        ValueError: both are given and name different files (which one was meant is unknown).

    Example:
        >>> config_path(argparse.Namespace(config=None, config_option="ts.toml"))
        'ts.toml'
        >>> config_path(argparse.Namespace(config="ts.toml", config_option="./ts.toml"))
        'ts.toml'
        >>> config_path(argparse.Namespace(config="a.toml", config_option="b.toml"))
        Traceback (most recent call last):
        ...
        ValueError: CONFIG a.toml and --config b.toml name different files: give one of them
    """
    import os.path

    positional, option = getattr(args, "config", None), getattr(args, "config_option", None)
    if positional is not None and option is not None and os.path.abspath(positional) != os.path.abspath(option):
        raise ValueError(f"CONFIG {positional} and --config {option} name different files: give one of them")
    return positional if positional is not None else option
