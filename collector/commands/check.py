"""``tracescore check CONFIG`` (or ``--config CONFIG``): validate a configuration and import every
scorer, and ask the trace backends it names what they think of it (`collector.commands.check_backends`).

A configuration without ``[[scorers]]`` is checked without importing the scorers' or the
adapters' packages: only what loading and validating the file needs. With a judge scorer
(one with prompt steps), litellm is loaded to ask which environment variable each judge's
provider reads its key from: a judge without its key is warned about (every call would fail).
What would fail at run time though the file is well formed (`collector.commands.preflight`:
a judge model litellm cannot route, an export endpoint that does not speak gRPC) is refused,
as ``serve`` refuses it at start.
"""

from __future__ import annotations

import argparse
import sys

from collector.commands.arguments.check import config_path
from collector.commands.check_backends import Finding, backend_findings
from collector.commands.preflight import judge_prefix_problems, preflight_errors, scorer_judges
from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.config import Config, load_config
from collector.work.registry import RegisteredScorer, ScorerRegistry


def judge_warnings(entries: list[RegisteredScorer]) -> list[str]:
    """A warning per judge model whose provider needs a key the environment does not set (a
    judge whose ``model_settings`` give ``api_key`` or ``api_base`` needs none). litellm is
    loaded only when a scorer has a prompt step.

    Example:
        >>> judge_warnings([])
        []
    """
    judged = scorer_judges(entries)
    if not judged:
        return []
    from scorers._judge_credentials import missing_env

    warnings: list[str] = []
    for entry, judge in judged:
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
    judged = [(e, j) for e, j in scorer_judges(entries) if j.model and budgets.limits(e.scorer_id, j.model)]
    if not judged:
        return []
    from scorers._judge_route import route_for

    problems: list[str] = []
    for entry, judge in judged:
        try:
            priced = route_for(judge.model, judge.model_settings).unit_prices() is not None
        except Exception:  # litellm cannot resolve the provider: no price either
            priced = False
        text = (f"scorer {entry.scorer_id}: judge model {judge.model!r} has no known price, so its calls "
                f'cannot be held to [judge.budgets]; set [judge] unpriced = "allow" to call it anyway')
        if not priced and text not in problems:
            problems.append(text)
    return problems


def queue_shape(config: Config) -> str:
    """What a Redis ``queue.url`` names, and how many replicas acknowledge a request (SPEC §9).

    Example:
        >>> from collector.config import config_from_dict
        >>> queue_shape(config_from_dict({}, env={}))
        ''
        >>> url = "redis+sentinel://:pw@s1,s2/primary/0"
        >>> queue_shape(config_from_dict({"queue": {"url": url, "wait_replicas": 1}}, env={}))
        " (Sentinel primary 'primary' via 2 sentinels; success after 1 replica acknowledged, else 503 after 1000 ms)"
        >>> queue_shape(config_from_dict({"queue": {"url": "redis+cluster://n1:7000"}}, env={}))
        ' (Cluster, 1 startup node; keys in slot 14042 of the hash tag {tracescore}; no replica wait: a failover may lose the last writes)'
        >>> queue_shape(config_from_dict({"queue": {"url": "redis+cluster://n1:7000", "partitions": 3}}, env={}))
        ' (Cluster, 1 startup node; work in 3 partitions, slots 2770, 7584, 13459 (tags {tracescore|p0|3}, {tracescore|p1|1}, {tracescore|p2|2}); no replica wait: a failover may lose the last writes)'
    """
    q = config.queue
    if q.kind != "redis":
        return ""
    from collector.config.redis_url import parse_redis_url

    target = parse_redis_url(q.url)
    if target.mode == "sentinel":
        shape = f"Sentinel primary {target.service!r} via {len(target.nodes)} sentinels"
    elif target.mode == "cluster":
        from redis.crc import key_slot  # only a Cluster URL needs it

        from collector.store.redis.partitioned_admin import partition_keys

        tagged = partition_keys(q.key_prefix, q.partitions)
        tags = [keys.hash_tag for keys in tagged]
        slots = [str(key_slot(keys.jobs.encode())) for keys in tagged]
        nodes = f"{len(target.nodes)} startup node{'s' if len(target.nodes) > 1 else ''}"
        where = (f"keys in slot {slots[0]} of the hash tag {tags[0]}" if q.partitions == 1 else
                 f"work in {q.partitions} partitions, slots {', '.join(slots)} (tags {', '.join(tags)})")
        shape = f"Cluster, {nodes}; {where}"
    else:
        shape = "one server" + (f", {q.partitions} partitions" if q.partitions > 1 else "")
    wait = (f"success after {q.wait_replicas} replica{'s' if q.wait_replicas > 1 else ''} acknowledged, "
            f"else 503 after {q.wait_timeout_ms} ms" if q.wait_replicas
            else "no replica wait: a failover may lose the last writes")
    return f" ({shape}; {wait})"


def run(args: argparse.Namespace) -> int:
    """Validate; print a summary (exit 0) or the problem with its key path (exit 2).

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml"))
        2
    """
    try:
        path = config_path(args)
    except ValueError as err:
        print(f"tracescore check: {err}", file=sys.stderr)
        return 2
    try:
        config = load_config(path)
        registry = ScorerRegistry.load(config.scorers)
        problems = preflight_errors(config, registry.entries) + unpriced_judges(config, registry.entries)
        if problems:
            raise ConfigError(f"invalid configuration: {problems[0]}")
        findings = backend_findings(config)
    except ConfigError as err:
        report_config_error(err)
        return 2
    if refused := [f for f in findings if f.level == "problem"]:  # what the backends said would fail
        for finding in refused:
            report_config_error(ConfigError(f"invalid configuration: {finding.text}"))
        return 2
    print(f"{path or '(no file: the defaults and TRACESCORE_* variables)'}: OK")
    print(f"  queue: {config.queue.display_url}{queue_shape(config)}")
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
              f"at most {s.max_revisions} revisions, {s.max_open} open"
              + (f"; fewer than {s.min_turns} turns: counted, not scored" if s.min_turns > 1 else ""))
    for scope, limit in config.judge.budgets.all_limits():
        print(f"  judge budget {scope}: {limit:g} USD per {config.judge.budgets.window}")
    lab = config.labels
    if lab.sources:  # SPEC §11: people's labels, read where the scores are written
        print(f"  labels: pulled from {', '.join(lab.sources)} every {lab.poll_s:g} s (first pull: the last "
              f"{lab.since}); agreement alert below kappa {lab.alert_kappa:g} over {lab.min_labels} labels")
    if not registry.entries:
        print("  warning: no scorer configured ([[scorers]]): spans are received and forwarded, "
              "nothing is scored")
    for warning in judge_prefix_problems(registry.entries)[1] + judge_warnings(registry.entries):
        print(f"  {warning}" if warning.startswith("warning: ") else f"  warning: {warning}")
    print_findings(findings)
    return 0


def print_findings(findings: list[Finding]) -> None:
    """What the backends said, under the summary: ``backend: ...`` for what they confirmed, then
    the warnings and notes.

    Example:
        >>> print_findings([Finding("ok", "MLflow experiment 0 (Default) on http://127.0.0.1:5000"),
        ...                 Finding("warning", "could not verify ...")])
          backend: MLflow experiment 0 (Default) on http://127.0.0.1:5000
          warning: could not verify ...
    """
    for finding in sorted(findings, key=lambda f: f.level != "ok"):
        print(f"  {'backend' if finding.level == 'ok' else finding.level}: {finding.text}")
