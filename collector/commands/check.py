"""``tracescore check CONFIG``: validate a configuration and import every scorer, nothing more.

A configuration without ``[[scorers]]`` is checked without importing the scorers' or the
adapters' packages: only what loading and validating the file needs. With a judge scorer
(one with prompt steps), litellm is loaded to ask which environment variable each judge's
provider reads its key from: a judge without its key is warned about (every call would fail).
"""

from __future__ import annotations

import argparse

from collector.commands.report import report_config_error
from collector.config import Config, load_config
from collector.errors import ConfigError
from collector.work.registry import RegisteredScorer, ScorerRegistry


def judge_warnings(entries: list[RegisteredScorer]) -> list[str]:
    """A warning per judge model whose provider needs a key the environment does not set (a
    judge whose ``model_settings`` give ``api_key`` or ``api_base`` needs none). litellm is
    loaded only when a scorer has a prompt step.

    Example:
        >>> judge_warnings([])
        []
    """
    judged = [e for e in entries if e.has_prompt_step and callable(getattr(e.scorer, "get_judges", None))]
    if not judged:
        return []
    from scorers._judge_credentials import missing_env

    warnings: list[str] = []
    for entry in judged:
        for judge in entry.scorer.get_judges():
            names = missing_env(judge.model, judge.model_settings) if judge.model else ()
            text = (f"warning: scorer {entry.scorer_id}: judge model {judge.model!r} needs "
                    f"{', '.join(names)}, which the environment does not set: every judge call would fail")
            if names and text not in warnings:
                warnings.append(text)
    return warnings


def unpriced_judges(config: Config, entries: list[RegisteredScorer]) -> list[str]:
    """A problem per judge model that falls under a judge budget while litellm has no price for
    it (its calls could not be reserved against the budget; SPEC §8), unless ``[judge]
    unpriced = "allow"``.

    Example:
        >>> unpriced_judges(Config(), [])
        []
    """
    budgets = config.judge.budgets
    if not budgets.enabled or config.judge.unpriced == "allow":
        return []
    judged = [e for e in entries if e.has_prompt_step and callable(getattr(e.scorer, "get_judges", None))]
    if not judged:
        return []
    from scorers._judge_route import route_for

    problems: list[str] = []
    for entry in judged:
        for judge in entry.scorer.get_judges():
            if not judge.model or not budgets.limits(entry.scorer_id, judge.model):
                continue
            try:
                priced = route_for(judge.model, judge.model_settings).unit_prices() is not None
            except Exception:  # litellm cannot resolve the provider: no price either
                priced = False
            text = (f"scorer {entry.scorer_id}: judge model {judge.model!r} has no known price, so its calls "
                    f'cannot be held to [judge.budgets]; set [judge] unpriced = "allow" to call it anyway')
            if not priced and text not in problems:
                problems.append(text)
    return problems


def run(args: argparse.Namespace) -> int:
    """Validate; print a summary (exit 0) or the problem with its key path (exit 2).

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml"))
        2
    """
    try:
        config = load_config(args.config)
        registry = ScorerRegistry.load(config.scorers)
        problems = unpriced_judges(config, registry.entries)
        if problems:
            raise ConfigError(f"invalid configuration: {problems[0]}")
    except ConfigError as err:
        report_config_error(err)
        return 2
    print(f"{args.config}: OK")
    print(f"  queue: {config.queue.display_url}")
    print(f"  export: {config.export.endpoint or '(none: scores are logged)'} ({config.export.protocol})")
    for key, url in config.sinks.urls().items():  # URLs only: keys and tokens are never printed
        print(f"  sink {key.split('.')[1]}: {url}")
    for entry in registry.entries:
        kind = "conversations, " if entry.is_conversation else ""
        print(f"  scorer {entry.scorer_id} ({kind}version {entry.version or '-'}, "
              f"sampling {entry.config.sampling}) from {entry.config.ref}")
    if registry.has_conversation_scorers:
        s = config.sessions
        print(f"  sessions: scored {s.idle_s:g} s after their last turn or at '{s.end_attribute}' = true; "
              f"at most {s.max_revisions} revisions, {s.max_open} open")
    for scope, limit in config.judge.budgets.all_limits():
        print(f"  judge budget {scope}: {limit:g} USD per {config.judge.budgets.window}")
    if not registry.entries:
        print("  warning: no scorer configured ([[scorers]]): spans are received and forwarded, "
              "nothing is scored")
    for warning in judge_warnings(registry.entries):
        print(f"  {warning}")
    return 0
