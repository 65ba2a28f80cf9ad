"""The arguments of ``tracescore align SCORER_ID --proposer MODEL (--from URL | FILE...)`` (SPEC §11)."""

from __future__ import annotations

import argparse

from collector.commands.arguments.inspect import add_window_arguments, positive_int
from collector.commands.arguments.labels import CONFIG_HELP
from collector.commands.arguments.score import add_spend_arguments


def share(text: str) -> float:
    """Parse a share strictly between 0 and 1 (the argument of ``--holdout``).

    Example:
        >>> share("0.3")
        0.3
        >>> share("1")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: must be a number between 0 and 1 (both excluded), got '1'
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1 (both excluded), got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add SCORER_ID, FILE..., ``--proposer`` (required), ``--proposer-api-base``, ``--holdout``,
    ``--candidates``, ``--min-labels``, ``--few-shot``, ``--out``, ``--json``, ``--concurrency``,
    ``--config``, ``--from`` with its window, and the judge spend's arguments (``--estimate``,
    ``--max-usd``).

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> a = p.parse_args(["tone", "runs/", "--proposer", "openai/gpt-4o", "-c", "ts.toml"])
        >>> (a.scorer_id, a.files, a.proposer, a.holdout, a.candidates, a.min_labels, a.out, a.json, a.few_shot)
        ('tone', ['runs/'], 'openai/gpt-4o', 0.3, 4, 20, '.', False, 3)
        >>> a = p.parse_args(["tone", "--from", "phoenix+http://h:6006/p", "--proposer", "m", "--estimate"])
        >>> (a.files, a.source, a.estimate, a.max_usd)
        ([], 'phoenix+http://h:6006/p', True, None)
    """
    parser.add_argument("scorer_id", metavar="SCORER_ID", help="the configured scorer whose judge to align")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="saved OTLP files (or directories, glob patterns) holding the labelled runs")
    parser.add_argument("--proposer", required=True, metavar="MODEL",
                        help="the model (a litellm model string) that rewrites the judge's instructions; of the "
                             "judge's provider, it is called with the judge's model_settings (api_base, api_key, ...)")
    parser.add_argument("--proposer-api-base", metavar="URL", default=None,
                        help="the proposer's API base URL (its key: the provider's usual variable, or the judge's "
                             "api_key when the proposer is of the judge's provider)")
    parser.add_argument("--holdout", type=share, default=0.3, metavar="SHARE",
                        help="the share of labelled items kept out of the rewriting to measure on, split by trace "
                             "id (the same items every time; default 0.3)")
    parser.add_argument("--candidates", type=positive_int, default=4, metavar="N",
                        help="rewritten instructions to ask the proposer for (one call each; default 4)")
    parser.add_argument("--min-labels", type=positive_int, default=20, metavar="N",
                        help="stop before any judge call with fewer labelled items (default 20)")
    parser.add_argument("--few-shot", type=positive_int, default=3, metavar="N",
                        help="examples from the train items each candidate is also measured with (default 3)")
    parser.add_argument("--out", metavar="DIR", default=".",
                        help="where DIR/<scorer id>.toml is written when a candidate beats the current judge "
                             "(default: the current directory)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--concurrency", type=positive_int, default=8, metavar="N",
                        help="judge runs in flight at once (default 8)")
    parser.add_argument("--config", "-c", metavar="FILE", default=None, help=CONFIG_HELP)
    add_window_arguments(parser, "read the labelled runs from a backend instead of FILEs", "")
    add_spend_arguments(parser)
