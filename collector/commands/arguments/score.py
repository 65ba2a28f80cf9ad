"""The arguments of ``tracescore score``: FILE... and the scorers, the CI gate, ``--export``, judge spend."""

from __future__ import annotations

import argparse

from collector.commands.arguments.inspect import (
    add_common_arguments,
    add_session_key_argument,
    add_window_arguments,
    positive_int,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add FILE..., ``--scorer`` (repeatable, required), ``--format``, ``--concurrency``, the gate's,
    the export's and the judge spend's arguments.

    Example:
        >>> p = argparse.ArgumentParser(); add_arguments(p)
        >>> a = p.parse_args(["S1.pb", "--scorer", "m:a", "--scorer", "n:b", "--concurrency", "4"])
        >>> (a.scorers, a.concurrency, a.fail_under, a.export, a.format, a.estimate, a.max_usd, a.rescore)
        (['m:a', 'n:b'], 4, [], False, 'table', False, None, False)
    """
    add_common_arguments(parser, default="table", format_help=(
        "table (the default, on a terminal or not: each score with its reason or error, and the summary "
        "per scorer) or jsonl (a row per score with the run's input and output, for scripts)"), files="*")
    parser.add_argument(
        "--scorer",
        dest="scorers",
        action="append",
        required=True,
        metavar="REF",
        help="scorer to run: module:attribute or path/to/file.py:attribute (repeatable)",
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=16,
        metavar="N",
        help="scorer runs in flight at once (default 16)",
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="score again the runs and sessions whose score by the same scorer version is in the traces read "
             "(their evaluation spans, exported by the daemon or an earlier backfill); by default they are "
             "skipped and counted",
    )
    add_session_key_argument(parser)
    add_gate_arguments(parser)
    add_export_arguments(parser)
    add_source_arguments(parser)
    add_spend_arguments(parser)


def threshold(text: str) -> tuple[str, float]:
    """Parse ``SCORER=VALUE`` (the argument of ``--fail-under``).

    Example:
        >>> threshold("answer-length=0.5")
        ('answer-length', 0.5)
        >>> threshold("0.5")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected SCORER=VALUE (a scorer id and a number), got '0.5'
    """
    scorer, sep, value = text.rpartition("=")
    try:
        if not sep or not scorer:
            raise ValueError(text)
        return scorer, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SCORER=VALUE (a scorer id and a number), got {text!r}") from None


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--fail-under SCORER=VALUE`` (repeatable) and ``--max-failures N`` (`collector.commands.gate`).

    Example:
        >>> p = argparse.ArgumentParser(); add_gate_arguments(p)
        >>> a = p.parse_args(["--fail-under", "q=0.8", "--max-failures", "0"])
        >>> a.fail_under, a.max_failures
        ([('q', 0.8)], 0)
    """
    parser.add_argument("--fail-under", type=threshold, action="append", default=[], metavar="SCORER=VALUE",
                        help="exit 1 when SCORER's mean score is below VALUE (repeatable)")
    parser.add_argument("--max-failures", type=int, default=None, metavar="N",
                        help="exit 1 when more than N scores failed (scorer errors)")


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--export``, ``--config`` and ``--export-timeout`` (`collector.commands.backfill`).

    Example:
        >>> p = argparse.ArgumentParser(); add_export_arguments(p)
        >>> a = p.parse_args(["--export", "--config", "ts.toml"])
        >>> (a.export, a.config, a.export_timeout)
        (True, 'ts.toml', 120.0)
    """
    parser.add_argument("--export", action="store_true",
                        help="also send the scores to the configured export endpoint and sinks, as the daemon would")
    parser.add_argument("--config", "-c", metavar="FILE",
                        help="TOML configuration naming the export endpoint and sinks (with --export)")
    parser.add_argument("--export-timeout", type=float, default=120.0, metavar="S",
                        help="with --export: give up on what is not sent after S seconds (exit 1; default 120)")


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--from URL`` (runs already in Phoenix, MLflow or Langfuse instead of FILEs),
    ``--since``, ``--until``, ``--filter``, ``--resume`` and ``--cursor`` (`collector.commands.score_from`).

    Example:
        >>> p = argparse.ArgumentParser(); add_source_arguments(p)
        >>> a = p.parse_args(["--from", "phoenix+http://h:6006/p", "--since", "7d", "--resume"])
        >>> (a.source, a.since, a.until, a.filter, a.resume, a.cursor)
        ('phoenix+http://h:6006/p', '7d', None, None, True, None)
    """
    add_window_arguments(parser, "score the runs already in a backend instead of FILEs",
                         "; a page is the unit of memory, scoring, export and the cursor")
    parser.add_argument("--resume", action="store_true",
                        help="with --from: continue an interrupted backfill from its cursor file")
    parser.add_argument("--cursor", metavar="FILE",
                        help="with --from: the cursor file (default .tracescore/backfill/<digest>.json, "
                             "named after the source, filter and scorers)")


def positive_usd(text: str) -> float:
    """Parse a USD amount above 0 (the argument of ``--max-usd``).

    Example:
        >>> positive_usd("0.05")
        0.05
        >>> positive_usd("0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: must be a number of USD above 0, got '0'
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of USD above 0, got {text!r}")
    return value


def add_spend_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--estimate`` (with ``--estimate-output-tokens``) or ``--max-usd`` (with
    ``--allow-unpriced``), and ``--default-output-tokens`` (SPEC §8;
    `collector.commands.estimate`, `collector.commands.spend_cap`).

    Example:
        >>> p = argparse.ArgumentParser(); add_spend_arguments(p)
        >>> a = p.parse_args(["--estimate", "--estimate-output-tokens", "200"])
        >>> (a.estimate, a.estimate_output_tokens, a.max_usd, a.default_output_tokens)
        (True, 200, None, 1024)
        >>> a = p.parse_args(["--max-usd", "2.5", "--allow-unpriced", "--default-output-tokens", "300"])
        >>> (a.estimate, a.max_usd, a.allow_unpriced, a.default_output_tokens)
        (False, 2.5, True, 300)
    """
    group = parser.add_argument_group("judge spend")
    either = group.add_mutually_exclusive_group()
    either.add_argument("--estimate", action="store_true",
                        help="send no judge request: print per scorer the judge calls, prompt and output tokens "
                             "and USD the scoring would cost, and the worst case (each call's output at its cap); "
                             "no score is printed or exported")
    either.add_argument("--max-usd", type=positive_usd, default=None, metavar="N",
                        help="stop before the judge calls cost N USD: each call reserves its worst case first; "
                             "runs left are reported 'not scored: --max-usd reached' and the exit code is 1")
    group.add_argument("--estimate-output-tokens", type=positive_int, default=None, metavar="N",
                       help="with --estimate: count N output tokens per judge call (default: the tokens of a "
                            "made-up reply of the step's schema, or of a two-sentence reason)")
    group.add_argument("--default-output-tokens", type=positive_int, default=1024, metavar="N",
                       help="the output cap of a judge call whose settings give no max_tokens: the worst case of "
                            "--estimate and what --max-usd reserves (default 1024)")
    group.add_argument("--allow-unpriced", action="store_true",
                       help="with --max-usd: score with a judge model litellm has no price for (its calls count "
                            "0 USD) instead of refusing it (exit 2)")
