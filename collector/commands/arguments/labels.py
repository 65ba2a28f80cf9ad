"""The arguments of ``tracescore labels pull|list|import`` and ``tracescore agreement`` and
``tracescore gate`` (SPEC §11)."""

from __future__ import annotations

import argparse

from collector.commands.flags import add_global_flags

CONFIG_HELP = "the deployment's configuration (its queue.url names the store, [labels] the sources, [[scorers]] the scorers)"


def _config(parser: argparse.ArgumentParser, default: object = None) -> None:
    parser.add_argument("--config", "-c", metavar="FILE", default=default, help=CONFIG_HELP)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the actions ``pull``, ``list [--scorer ID] [--json]`` and ``import FILE``.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> a = p.parse_args(["list", "--scorer", "tone", "-c", "ts.toml"])
        >>> a.action, a.scorer, a.config, a.json
        ('list', 'tone', 'ts.toml', False)
        >>> a = p.parse_args(["-c", "ts.toml", "import", "labels.jsonl"])
        >>> a.action, a.file, a.config
        ('import', 'labels.jsonl', 'ts.toml')
    """
    _config(parser)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    text = "pull the labels of every [labels] source now (from its stored cursor), whatever poll_s says"
    pull = actions.add_parser("pull", help=text, description=text)
    text = "list the kept labels, newest first, and say which cannot be read as a verdict (and why)"
    listing = actions.add_parser("list", help=text, description=text)
    listing.add_argument("--scorer", metavar="ID", default=None, help="only this scorer's labels")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")
    text = "import labels from a JSONL file (one label a line, SPEC §11); a bad line imports nothing"
    importing = actions.add_parser("import", help=text, description=text)
    importing.add_argument("file", metavar="FILE.jsonl")
    for sub in (pull, listing, importing):
        add_global_flags(sub)
        _config(sub, argparse.SUPPRESS)


def add_agreement_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--scorer``, ``--since``, ``--json`` and ``--disagreements``.

    Example:
        >>> p = argparse.ArgumentParser(); add_agreement_arguments(p)
        >>> a = p.parse_args(["--json", "--since", "7d", "--disagreements"])
        >>> a.json, a.since, a.disagreements, a.scorer
        (True, '7d', True, None)
    """
    _config(parser)
    parser.add_argument("--scorer", metavar="ID", default=None, help="only this scorer")
    parser.add_argument("--since", metavar="DURATION", default=None,
                        help="the scores of this last while (30d, 12h; default: [labels] retain)")
    parser.add_argument("--json", action="store_true", help="one JSON object a line, per scorer, version and revision")
    parser.add_argument("--disagreements", action="store_true",
                        help="list the items where the judge and the people disagree")


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--min-kappa`` (required) and ``--scorer``.

    Example:
        >>> p = argparse.ArgumentParser(); add_gate_arguments(p)
        >>> p.parse_args(["--min-kappa", "0.6"]).min_kappa
        0.6
    """
    _config(parser)
    parser.add_argument("--min-kappa", type=float, required=True, metavar="K",
                        help="fail (exit 1) when a scorer with at least [labels] min_labels labelled items agrees less")
    parser.add_argument("--scorer", metavar="ID", default=None, help="only this scorer")
