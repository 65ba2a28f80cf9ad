"""``tracescore check CONFIG``: validate a configuration and import every scorer, nothing more.

A configuration without ``[[scorers]]`` is checked without importing the scorers' or the
adapters' packages: only what loading and validating the file needs.
"""

from __future__ import annotations

import argparse

from collector.commands.report import report_config_error
from collector.config import load_config
from collector.errors import ConfigError
from collector.work.registry import ScorerRegistry


def run(args: argparse.Namespace) -> int:
    """Validate; print a summary (exit 0) or the problem with its key path (exit 2).

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml"))
        2
    """
    try:
        config = load_config(args.config)
        registry = ScorerRegistry.load(config.scorers)
    except ConfigError as err:
        report_config_error(err)
        return 2
    print(f"{args.config}: OK")
    print(f"  queue: {config.queue.display_url}")
    print(f"  export: {config.export.endpoint or '(none: scores are logged)'} ({config.export.protocol})")
    for key, url in config.sinks.urls().items():  # URLs only: keys and tokens are never printed
        print(f"  sink {key.split('.')[1]}: {url}")
    for entry in registry.entries:
        print(f"  scorer {entry.scorer_id} (version {entry.version or '-'}, "
              f"sampling {entry.config.sampling}) from {entry.config.ref}")
    if not registry.entries:
        print("  warning: no scorer configured ([[scorers]]): spans are received and forwarded, "
              "nothing is scored")
    return 0
