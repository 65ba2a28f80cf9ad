"""One replica's status snapshot, built from what the daemon already measures.

The snapshot is JSON (served on ``/status``; on Redis also shared with the group): the
Prometheus samples of the service's registry, grouped by what an operator asks about, and
the store's counts. Counters are totals since the replica started; ``received`` also has
per-minute rates over the last minute (`RateWindow`).

Each figure comes from named instruments of `collector.common.metrics`, never from a name that
merely looks alike: ``scores`` from ``tracescore_score`` alone (not the scoring duration's
histogram), the backlog's items from ``tracescore_backlog_items`` (per backlog and
destination) and ``tracescore_sink_backlog_records`` (per sink) and its bytes, where they
are measured, from ``tracescore_forward_backlog_bytes``.
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

from collector.common.metrics import VERSION
from collector.common.types import StoreStats

SCHEMA = 3
"""Version of the snapshot's JSON layout (2: a backlog entry has ``bytes``, ``failures`` has
``forward``; 3: ``totals``, the store's totals per scorer and judge model; a view merges
snapshots of any of these versions)."""

SCORE_SAMPLES = {"tracescore_score_bucket": "buckets", "tracescore_score_count": "count",
                 "tracescore_score_sum": "sum"}
"""The samples of the score histogram, and the entry of a scorer's ``scores`` each fills."""

JUDGE_COUNTERS = {"tracescore_judge_attempts_total": "calls", "tracescore_judge_errors_total": "errors",
                  "tracescore_judge_cost_usd_total": "cost_usd"}
"""The judge's counters per model, and the entry each fills."""

BACKLOG_BYTES = {"tracescore_forward_backlog_bytes": ("forward", "otlp")}
"""Gauges of a backlog's bytes, and the (backlog, destination) they measure."""


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
        >>> from collector.common.metrics import Metrics
        >>> any(s.name == "tracescore_build_info" for s in samples(Metrics().registry))
        True
    """
    return [s for family in registry.collect() for s in family.samples]


def _nested() -> defaultdict[str, dict[str, float]]:
    return defaultdict(dict)


def score_histograms(found: Iterable[Sample]) -> dict[str, dict[str, Any]]:
    """Per scorer: its scores' count, sum and cumulative buckets (``le`` -> count).

    Example:
        >>> from collector.common.metrics import Metrics
        >>> m = Metrics()
        >>> m.scores.labels(scorer="q").observe(0.75)
        >>> m.score_latency.labels(scorer="q").observe(3.0)  # seconds: not a score
        >>> h = score_histograms(samples(m.registry))["q"]
        >>> h["count"], h["sum"], [le for le, n in h["buckets"].items() if n]
        (1.0, 0.75, ['0.8', '0.9', '1.0', '+Inf'])
    """
    scores: dict[str, dict[str, Any]] = {}
    for s in found:
        entry = SCORE_SAMPLES.get(s.name)
        if entry is None:
            continue
        histogram = scores.setdefault(s.labels["scorer"], {"count": 0.0, "sum": 0.0, "buckets": {}})
        if entry == "buckets":
            histogram["buckets"][s.labels["le"]] = float(s.value)
        else:
            histogram[entry] = float(s.value)
    return scores


def backlogs(found: Iterable[Sample]) -> list[dict[str, Any]]:
    """What waits to be sent, per (backlog, destination): items, and bytes where measured (else None).

    Example:
        >>> from collector.common.metrics import Metrics
        >>> m = Metrics()
        >>> m.backlog.labels(backlog="forward", destination="otlp").set(58)
        >>> m.forward_backlog_bytes.set(54850)
        >>> m.sink_backlog.labels(sink="langfuse").set(3)
        >>> backlogs(samples(m.registry))
        [{'backlog': 'forward', 'destination': 'otlp', 'items': 58.0, 'bytes': 54850.0}, {'backlog': 'sink', 'destination': 'langfuse', 'items': 3.0, 'bytes': None}]
    """
    found_: dict[tuple[str, str], dict[str, Any]] = {}

    def entry(kind: str, destination: str) -> dict[str, Any]:
        return found_.setdefault((kind, destination), {"backlog": kind, "destination": destination,
                                                       "items": 0.0, "bytes": None})

    for s in found:
        if s.name == "tracescore_backlog_items":
            entry(s.labels["backlog"], s.labels["destination"])["items"] = float(s.value)
        elif s.name == "tracescore_sink_backlog_records":
            entry("sink", s.labels["sink"])["items"] = float(s.value)
        elif s.name in BACKLOG_BYTES:
            entry(*BACKLOG_BYTES[s.name])["bytes"] = float(s.value)
    return [found_[key] for key in sorted(found_)]


def failures(found: Iterable[Sample]) -> dict[str, Any]:
    """What failed: internal errors per component, score export attempts the backend refused
    or missed, and forwarded requests the endpoint did not take (``retried``: kept for
    another attempt, a request counted once per failed attempt that carried it, as
    ``tracescore_forwarded_requests_total{outcome="retried"}`` counts them; ``rejected``:
    refused for good and dropped). `digest` adds the failed scores per scorer.

    Example:
        >>> from collector.common.metrics import Metrics
        >>> m = Metrics()
        >>> m.forwarded.labels(signal="traces", outcome="retried").inc(232)
        >>> m.forwarded.labels(signal="logs", outcome="retried").inc(4)
        >>> m.export_failures.inc(2)
        >>> f = failures(samples(m.registry))
        >>> f["forward"], f["export"]
        ({'retried': 236.0, 'rejected': 0.0}, 2.0)
    """
    errors: dict[str, float] = {}
    forward = {"retried": 0.0, "rejected": 0.0}
    export = 0.0
    for s in found:
        if s.name == "tracescore_errors_total":
            errors[s.labels["component"]] = float(s.value)
        elif s.name == "tracescore_export_failures_total":
            export = float(s.value)
        elif s.name == "tracescore_forwarded_requests_total" and s.labels["outcome"] in forward:
            forward[s.labels["outcome"]] += float(s.value)
    return {"errors": errors, "export": export, "forward": forward}


def digest(found: Iterable[Sample]) -> dict[str, Any]:
    """The per-replica counters of a snapshot, from Prometheus samples.

    Example:
        >>> from collector.common.metrics import Metrics
        >>> m = Metrics()
        >>> m.scores.labels(scorer="q").observe(0.75)
        >>> m.judge_tokens.labels(model="openai/gpt-4o-mini", direction="input").inc(12)
        >>> m.decisions.labels(scorer="q", reason="failed").inc()
        >>> d = digest(samples(m.registry))
        >>> d["scores"]["q"]["count"], d["scores"]["q"]["buckets"]["0.8"], d["judge"]["openai/gpt-4o-mini"]["input_tokens"]
        (1.0, 1.0, 12.0)
        >>> d["failures"]["scorers"]
        {'q': 1.0}
    """
    found = list(found)
    received: dict[str, float] = defaultdict(float)
    decisions: defaultdict[str, dict[str, float]] = _nested()
    judge: defaultdict[str, dict[str, float]] = _nested()
    exported: dict[str, float] = {}
    sessions: dict[str, float] = {}  # the store's conversations (SPEC §7), where this replica schedules them
    received_names = {"tracescore_spans_received_total": "spans", "tracescore_log_records_received_total":
                      "log_records", "tracescore_runs_found_total": "runs"}
    for s in found:
        name, labels, value = s.name, s.labels, float(s.value)
        if name in received_names:
            received[received_names[name]] += value
        elif name == "tracescore_decisions_total":
            decisions[labels["scorer"]][labels["reason"]] = value
        elif name in JUDGE_COUNTERS:
            judge[labels["model"]][JUDGE_COUNTERS[name]] = value
        elif name == "tracescore_judge_tokens_total":
            judge[labels["model"]][f"{labels['direction']}_tokens"] = value
        elif name == "tracescore_scores_exported_total":
            exported[labels.get("scorer", "")] = value
        elif name == "tracescore_sessions":
            sessions[labels["state"]] = value
    failed = {scorer: reasons.get("failed", 0.0) for scorer, reasons in decisions.items()}
    return {"received": dict(received), "decisions": dict(decisions), "scores": score_histograms(found),
            "judge": dict(judge), "exported": exported, "backlog": backlogs(found),
            "failures": {"scorers": failed, **failures(found)}, "sessions": sessions}


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
        >>> from collector.common.metrics import Metrics
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
