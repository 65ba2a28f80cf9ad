"""deploy/grafana's dashboard and deploy/prometheus's alerting rules query only metric names the
daemon exposes: every PromQL expression (panel targets, variable queries, rules) is parsed, and
each metric it selects must be on a running daemon's /metrics."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import promql_parser
import yaml
from prometheus_client.parser import text_string_to_metric_families

from collector.config import config_from_dict
from collector.service import Service
from collector.work.registry import ScorerRegistry

DASHBOARD = Path(__file__).parents[1] / "deploy" / "grafana" / "tracescore-dashboard.json"
ALERTS = Path(__file__).parents[1] / "deploy" / "prometheus" / "alerts.yml"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",),
            "summary": ("_sum", "_count"), "gauge": ("",), "unknown": ("",)}
GRAFANA_RANGES = re.compile(r"\$__(rate_interval|interval|range)")


def expressions(dashboard: dict[str, Any]) -> Iterator[str]:
    """Every PromQL expression of the dashboard: panel targets, then variable queries."""
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            found = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
            assert found, f"unexpected variable query {query!r}"
            yield found.group(1)


def selected_metrics(node: Any) -> Iterator[str]:
    """The metric names an expression selects (walks promql_parser's tree)."""
    kind = type(node).__name__
    if kind == "VectorSelector":
        yield node.name
        return
    if kind == "MatrixSelector":
        yield from selected_metrics(node.vector_selector)
        return
    for child in ("expr", "lhs", "rhs", "param"):
        if getattr(node, child, None) is not None:
            yield from selected_metrics(getattr(node, child))
    for arg in getattr(node, "args", None) or ():
        yield from selected_metrics(arg)


def metric_names(expr: str) -> set[str]:
    parsed = promql_parser.parse(GRAFANA_RANGES.sub("5m", expr))
    return set(selected_metrics(parsed))


def exposed_names(text: str) -> set[str]:
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


async def test_every_metric_the_dashboard_queries_is_exposed(tmp_path: Path) -> None:
    config = config_from_dict({"receiver": {"grpc_endpoint": "", "http_endpoint": "127.0.0.1:0"},
                               "queue": {"url": f"sqlite:///{tmp_path / 'q.db'}"}}, env={})
    service = Service(config, ScorerRegistry([]))
    await service.start()
    try:
        assert service.http is not None
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{service.http.port}/metrics") as resp:
                exposed = exposed_names(await resp.text())
    finally:
        await service.shutdown()
    dashboard = json.loads(DASHBOARD.read_text())
    queried: dict[str, set[str]] = {}
    for expr in expressions(dashboard):
        for name in metric_names(expr):
            queried.setdefault(name, set()).add(expr)
    assert len(queried) >= 20  # the parse found the dashboard's metrics, not nothing
    assert {"tracescore_score_bucket", "tracescore_score_count", "tracescore_build_info",
            "tracescore_scores_exported_total", "process_resident_memory_bytes", "tracescore_judge_agreement",
            "tracescore_labels_total"} <= set(queried)
    rules = [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]
    assert [rule["alert"] for rule in rules] == ["TracescoreJudgeDisagreesWithPeople"]
    alerted = metric_names(rules[0]["expr"])
    assert alerted == {"tracescore_judge_agreement", "tracescore_labels_alert_kappa", "tracescore_labels_min_labels"}
    for name in alerted:
        queried.setdefault(name, set()).add(rules[0]["expr"])
    unknown = {name: sorted(exprs) for name, exprs in queried.items() if name not in exposed}
    assert unknown == {}


def test_the_walker_finds_metrics_inside_functions_and_operators() -> None:
    expr = ('histogram_quantile(0.5, sum by (le) (rate(a_bucket{x=~"$v"}[$__rate_interval])))'
            ' / on() group_left count(b) + -c offset 5m')
    assert metric_names(expr) == {"a_bucket", "b", "c"}
