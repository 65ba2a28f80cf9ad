"""One replica's status snapshot, built from what the daemon already measures.

The snapshot is JSON (served on ``/status``; on Redis also shared with the group): the
Prometheus samples of the service's registry, grouped by what an operator asks about, and
the store's counts. Counters are totals since the replica started; ``received`` also has
per-minute rates over the last minute (`RateWindow`). Any gauge whose name holds
``backlog`` is read as a backlog per destination (label ``destination``, or ``sink``), so
further destinations show up without a change here.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.samples import Sample

from collector.metrics import VERSION
from collector.types import StoreStats

SCHEMA = 1
"""Version of the snapshot's JSON layout."""


def replica_id() -> str:
    """A name for this process, unique in a group: host, pid and a random suffix.

    Example:
        >>> replica_id().count(":")
        2
    """
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def samples(registry: CollectorRegistry) -> list[Sample]:
    """Every sample of the registry.

    Example:
        >>> from collector.metrics import Metrics
        >>> any(s.name == "tracescore_build_info" for s in samples(Metrics().registry))
        True
    """
    return [s for family in registry.collect() for s in family.samples]


def _nested() -> defaultdict[str, dict[str, float]]:
    return defaultdict(dict)


def digest(found: Iterable[Sample]) -> dict[str, Any]:
    """The per-replica counters of a snapshot, from Prometheus samples.

    Example:
        >>> from collector.metrics import Metrics
        >>> m = Metrics()
        >>> m.scores.labels(scorer="q").observe(0.75)
        >>> m.judge_tokens.labels(model="openai/gpt-4o-mini", direction="input").inc(12)
        >>> d = digest(samples(m.registry))
        >>> d["scores"]["q"]["count"], d["scores"]["q"]["buckets"]["0.8"], d["judge"]["openai/gpt-4o-mini"]["input_tokens"]
        (1.0, 1.0, 12.0)
    """
    received: dict[str, float] = defaultdict(float)
    decisions: defaultdict[str, dict[str, float]] = _nested()
    scores: dict[str, dict[str, Any]] = {}
    judge: defaultdict[str, dict[str, float]] = _nested()
    exported: dict[str, float] = {}
    errors: dict[str, float] = {}
    backlog: list[dict[str, Any]] = []
    export_failures = 0.0
    judge_names = {"tracescore_judge_attempts_total": "calls", "tracescore_judge_errors_total": "errors",
                   "tracescore_judge_cost_usd_total": "cost_usd"}
    for s in found:
        name, labels, value = s.name, s.labels, float(s.value)
        if name == "tracescore_spans_received_total":
            received["spans"] += value
        elif name == "tracescore_log_records_received_total":
            received["log_records"] += value
        elif name == "tracescore_runs_found_total":
            received["runs"] += value
        elif name == "tracescore_decisions_total":
            decisions[labels["scorer"]][labels["reason"]] = value
        elif name.startswith("tracescore_score_") and name != "tracescore_score_duration_seconds":
            entry = scores.setdefault(labels["scorer"], {"count": 0.0, "sum": 0.0, "buckets": {}})
            if name.endswith("_bucket"):
                entry["buckets"][labels["le"]] = value
            elif name.endswith("_count") or name.endswith("_sum"):
                entry[name.rpartition("_")[2]] = value
        elif name in judge_names:
            judge[labels["model"]][judge_names[name]] = value
        elif name == "tracescore_judge_tokens_total":
            judge[labels["model"]][f"{labels['direction']}_tokens"] = value
        elif name == "tracescore_scores_exported_total":
            exported[labels.get("scorer", "")] = value
        elif name == "tracescore_errors_total":
            errors[labels["component"]] = value
        elif name == "tracescore_export_failures_total":
            export_failures = value
        elif name.startswith("tracescore_") and "backlog" in name:
            kind = labels.get("backlog") or name.removeprefix("tracescore_").partition("_backlog")[0] or "backlog"
            backlog.append({"backlog": kind, "destination": labels.get("destination") or labels.get("sink") or "otlp",
                            "items": value})
    failed = {scorer: reasons.get("failed", 0.0) for scorer, reasons in decisions.items()}
    return {"received": dict(received), "decisions": dict(decisions), "scores": scores, "judge": dict(judge),
            "exported": exported, "backlog": backlog,
            "failures": {"scorers": failed, "errors": errors, "export": export_failures}}


class RateWindow:
    """Per-minute rates of totals sampled over the last ``window_s`` seconds.

    Example:
        >>> w = RateWindow()
        >>> w.add({"spans": 0.0}, now=0.0); w.add({"spans": 30.0}, now=30.0)
        >>> w.per_minute(now=30.0)
        {'spans': 60.0}
    """

    def __init__(self, window_s: float = 60.0) -> None:
        self._window = window_s
        self._points: deque[tuple[float, dict[str, float]]] = deque()

    def add(self, totals: dict[str, float], now: float | None = None) -> None:
        """Record the totals seen now."""
        at = time.monotonic() if now is None else now
        self._points.append((at, dict(totals)))
        while len(self._points) > 2 and self._points[1][0] <= at - self._window:
            self._points.popleft()

    def per_minute(self, now: float | None = None) -> dict[str, float]:
        """Each total's growth per minute over the window (empty before two samples)."""
        if len(self._points) < 2:
            return {}
        (t0, first), (t1, last) = self._points[0], self._points[-1]
        span = max(t1 - t0, 1e-9)
        return {k: round((v - first.get(k, 0.0)) * 60.0 / span, 3) for k, v in last.items()}


def build_snapshot(found: Iterable[Sample], stats: StoreStats | None, *, replica: str, role: str,
                   store: str, rates: dict[str, float] | None = None, now: float | None = None) -> dict[str, Any]:
    """The JSON snapshot of one replica (see the module docstring).

    Example:
        >>> from collector.metrics import Metrics
        >>> snap = build_snapshot(samples(Metrics().registry), StoreStats(1, 0, 2, 0, 0), replica="r", role="all",
        ...                       store="sqlite:/q.db", now=0.0)
        >>> snap["queue"]["dead"], snap["replica"], snap["version"] == VERSION
        (2, 'r', True)
    """
    snapshot = digest(found)
    snapshot["received"].update({f"{k}_per_min": v for k, v in (rates or {}).items()})
    return {"schema": SCHEMA, "replica": replica, "role": role, "version": VERSION,
            "at": time.time() if now is None else now, "store": store,
            "queue": asdict(stats) if stats is not None else None, **snapshot}
