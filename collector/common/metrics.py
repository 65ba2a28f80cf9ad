"""Every Prometheus instrument of the daemon, on a registry owned by one service.

Names follow ``tracescore_<noun>_<unit>``. Labels are bounded: transports, signals,
reasons, scorer ids and judge models (all finite sets fixed by configuration); trace or
span ids are never labels.
"""

from __future__ import annotations

import platform
from typing import TypeVar, cast

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics import MetricWrapperBase

from collector.common.version import build_version

_M = TypeVar("_M", bound=MetricWrapperBase)

# Bounded reason vocabularies (documented here so dashboards know what to expect).
DECISION_REASONS = (
    "queued", "duplicate", "sampled_out", "filtered_out",
    "scored", "not_scorable", "failed", "retried", "skipped",
)

SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Upper bounds of ``tracescore_score``'s buckets: scores are usually in 0..1 (a score above
1 lands in ``+Inf`` only, a negative one in every bucket)."""

VERSION = build_version()
"""Read once at import: package metadata is on disk, and instruments are built on the event loop."""


class Metrics:
    """The daemon's instruments on a private `CollectorRegistry`.

    Example:
        >>> m = Metrics()
        >>> m.spans_received.labels(transport="http").inc(3)
        >>> b"tracescore_spans_received_total" in m.render()
        True
    """

    def __init__(self) -> None:
        disable_created_metrics()  # process-wide: ``_created`` series only add clutter to /metrics
        r = self.registry = CollectorRegistry()
        self.spans_received = Counter(
            "tracescore_spans_received", "Spans accepted by the receivers.", ["transport"], registry=r)
        self.log_records_received = Counter(
            "tracescore_log_records_received", "Log records accepted by the receivers.",
            ["transport"], registry=r)
        self.requests_refused = Counter(
            "tracescore_requests_refused", "OTLP requests answered with an error, by reason.",
            ["transport", "reason"], registry=r)
        self.spans_dropped = Counter(
            "tracescore_spans_dropped", "Spans given up by the trace buffer, by reason.",
            ["reason"], registry=r)
        self.traces_evicted = Counter(
            "tracescore_traces_evicted", "Traces evicted from the buffer, by reason.",
            ["reason"], registry=r)
        self.traces_buffered = Gauge(
            "tracescore_traces_buffered", "Traces waiting in the buffer.", registry=r)
        self.runs_found = Counter(
            "tracescore_runs_found", "Agent runs the adapters found, by convention.",
            ["convention"], registry=r)
        self.runs_skipped = Counter(
            "tracescore_runs_skipped", "Candidate spans the adapters skipped, by reason.",
            ["reason"], registry=r)
        self.decisions = Counter(
            "tracescore_decisions", "What happened to each (run, scorer) pair, by reason.",
            ["scorer", "reason"], registry=r)
        self.jobs = Gauge("tracescore_jobs", "Jobs in the queue by state.", ["state"], registry=r)
        self.sessions = Gauge(
            "tracescore_sessions", "Conversations (SPEC §7): open now; scored, reopened by a late turn, "
            "forced (max age, turns or open sessions) and short (fewer turns than min_turns: not scored) "
            "since the store began.", ["state"], registry=r)
        self.outbox_records = Gauge(
            "tracescore_outbox_records", "Results waiting for export.", registry=r)
        self.score_latency = Histogram(
            "tracescore_score_duration_seconds", "Time to run one scorer on one run.", ["scorer"],
            buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120), registry=r)
        self.judge_attempts = Counter(
            "tracescore_judge_attempts", "Judge requests sent, by model.", ["model"], registry=r)
        self.judge_errors = Counter(
            "tracescore_judge_errors", "Judge executions that failed, by model.", ["model"], registry=r)
        self.judge_cost = Counter(
            "tracescore_judge_cost_usd", "Judge cost in US dollars, by model.", ["model"], registry=r)
        self.judge_spend = Counter(
            "tracescore_judge_spend_usd", "Judge spend in US dollars, by scorer and model (SPEC §8).",
            ["scorer", "model"], registry=r)
        self.judge_budget_remaining = Gauge(
            "tracescore_judge_budget_remaining_usd", "What is left of each judge budget in its window.",
            ["scope"], registry=r)
        self.judge_breaker_open = Gauge(
            "tracescore_judge_breaker_open", "1 while a judge model's circuit breaker is open.", ["model"], registry=r)
        self.jobs_parked = Gauge(
            "tracescore_jobs_parked", "Jobs parked by judge governance, by reason.", ["reason"], registry=r)
        self.judge_tokens = Counter(
            "tracescore_judge_tokens", "Judge tokens, by model and direction.",
            ["model", "direction"], registry=r)
        self.errors = Counter(
            "tracescore_errors", "Internal errors, by component.", ["component"], registry=r)
        self.scores_exported = Counter(
            "tracescore_scores_exported", "Score spans the backend accepted, by scorer.", ["scorer"],
            registry=r)
        self.export_failures = Counter(
            "tracescore_export_failures", "Export attempts the backend refused or missed.", registry=r)
        self.sink_sent = Counter(
            "tracescore_sink_sent", "Scores sent to a native sink, by sink and outcome (sent, retried, "
            "span_missing, dropped_span_missing, rejected, skipped_failed).", ["sink", "outcome"], registry=r)
        self.sink_backlog = Gauge(
            "tracescore_sink_backlog_records", "Scores waiting for a native sink, by sink.", ["sink"], registry=r)
        self.forwarded = Counter(
            "tracescore_forwarded_requests", "Received requests passed on to the export endpoint, by signal "
            "and outcome (sent, retried: kept for another attempt, rejected: refused for good).",
            ["signal", "outcome"], registry=r)
        self.forward_backlog_bytes = Gauge(
            "tracescore_forward_backlog_bytes", "Bytes of received requests waiting to be forwarded "
            "(bounded by export.max_forward_backlog_bytes).", registry=r)
        self.scores = Histogram(
            "tracescore_score", "Score values, by scorer.", ["scorer"], buckets=SCORE_BUCKETS, registry=r)
        self.backlog = Gauge(
            "tracescore_backlog_items", "Items waiting to be sent, by backlog (outbox, forward) and "
            "destination.", ["backlog", "destination"], registry=r)
        self.judge_agreement = Gauge(
            "tracescore_judge_agreement", "How far each judge agrees with people's labels, by scorer, "
            "version, judge revision and metric (kappa, accuracy, mae, n: items with a score and a label).",
            ["scorer", "version", "revision", "metric"], registry=r)
        self.labels_total = Gauge(
            "tracescore_labels_total", "People's labels kept, by scorer and source (phoenix, mlflow, langfuse, file).",
            ["scorer", "source"], registry=r)
        self.labels_alert_kappa = Gauge(
            "tracescore_labels_alert_kappa", "[labels] alert_kappa: the judge-agreement alert fires below this kappa.",
            registry=r)
        self.labels_min_labels = Gauge(
            "tracescore_labels_min_labels", "[labels] min_labels: the labelled items a judge-agreement alert needs.",
            registry=r)
        self.build_info = Info("tracescore_build", "The running tracescore's version.", registry=r)
        self.build_info.info({"version": VERSION, "python": platform.python_version()})
        # process_*: CPU, memory, open files. Apart: it reads /proc, so only /metrics (on a thread) renders it.
        self.process_registry = CollectorRegistry()
        ProcessCollector(registry=self.process_registry)
        self._children: dict[tuple[int, tuple[str, ...]], MetricWrapperBase] = {}

    def child(self, metric: _M, *values: str) -> _M:
        """``metric.labels(*values)``, looked up once per set of values: prometheus_client checks
        its arguments on every ``labels`` call, and the per-run counters ask for the same few
        children on every run.

        Example:
            >>> m = Metrics()
            >>> m.child(m.runs_found, "genai").inc()
            >>> m.child(m.runs_found, "genai") is m.runs_found.labels(convention="genai")
            True
            >>> m.runs_found.labels(convention="genai")._value.get()
            1.0
        """
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return cast(_M, found)

    def render(self, with_process: bool = False) -> bytes:
        """The Prometheus text exposition of every instrument (and, ``with_process``, of the
        process metrics, which read /proc: call that off the event loop).

        Example:
            >>> Metrics().render().startswith(b"# HELP")
            True
            >>> b"process_cpu_seconds_total" in Metrics().render(with_process=True)
            True
        """
        text = generate_latest(self.registry)
        return text + generate_latest(self.process_registry) if with_process else text
