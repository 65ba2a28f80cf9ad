"""A real Phoenix, and a real MLflow, out of reach for 30 s while agents keep sending, with the
daemon SIGKILLed during the outage: once the backend is back, every agent span and every
score is there (spans of every trace, and exactly one annotation or assessment per scorer
and run), through the README's configuration.

The daemon reaches the server through a `TcpRelay` that the test cuts for the outage: the
daemon's connections are dropped and new ones refused, as from a stopped server, while the
server itself keeps running (starting Phoenix again costs 10 s of CPU, MLflow 7). Each test
runs its own server, so that nothing else is sent to it meanwhile."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from backends_support import SPANS, Daemon, Mlflow, Phoenix, agent_trace_body, poll, post_body
from tcp_relay import TcpRelay
from test_mlflow_backend import FAST_RETRIES as MLFLOW_RETRIES
from test_mlflow_backend import assessments, mlflow_config
from test_phoenix_backend import FAST_RETRIES as PHOENIX_RETRIES
from test_phoenix_backend import phoenix_config

pytestmark = pytest.mark.long  # lasts tens of seconds by design: scheduled first (see conftest.py)

OUTAGE_S = 30.0
FAST_EXPORT = {"TRACESCORE_EXPORT_MAX_BACKOFF_S": "2.0"}  # the daemon retries often: a short test


def send(daemon: Daemon, answer: str) -> tuple[str, str]:
    """One agent run posted as the SDK's exporter would; the daemon must answer 200."""
    body, trace_id, span_id = agent_trace_body(answer)
    post_body(daemon.traces_url, body)
    return trace_id, span_id


def ride_out_an_outage(daemon: Daemon, relay: TcpRelay) -> list[tuple[str, str]]:
    """Two runs before the outage, two during it, the daemon killed and restarted, one more;
    the backend back after ``OUTAGE_S``. Returns every run (trace id, run span id)."""
    runs = [send(daemon, "Paris."), send(daemon, "I do not know.")]
    relay.cut()
    began = time.monotonic()
    runs += [send(daemon, "The capital of France is Paris."), send(daemon, "No idea.")]
    poll(lambda: daemon.metric("tracescore_backlog_items", backlog="forward", destination="otlp") >= 1
         and daemon.metric("tracescore_forwarded_requests_total", outcome="retried", signal="traces") >= 1,
         30, "the forwarded spans waiting in the daemon")
    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL  # a crash during the outage
    daemon.start()
    runs.append(send(daemon, "Paris, of course."))
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - began)))
    relay.restore()
    return runs


def test_phoenix_down_for_30_s_and_a_crash_lose_no_span_and_no_score(tmp_path: Path) -> None:
    (tmp_path / "phoenix").mkdir()
    phoenix = Phoenix(tmp_path / "phoenix")
    phoenix.start()
    relay = TcpRelay(phoenix.port).start()
    daemon = Daemon(tmp_path, phoenix_config(phoenix).replace(phoenix.url, relay.url),
                    env={"PHOENIX_API_KEY": "", **PHOENIX_RETRIES, **FAST_EXPORT})
    try:
        daemon.start()
        runs = ride_out_an_outage(daemon, relay)

        def complete() -> bool:
            return all(sorted(s["name"] for s in phoenix.spans(t)) == SPANS for t, _ in runs)

        poll(complete, 180, "every run's spans and evaluation spans in Phoenix")
        poll(lambda: len(phoenix.annotations([s for _, s in runs])) == 2 * len(runs), 120,
             "two annotations per run")
        annotations = phoenix.annotations([s for _, s in runs])
        assert sorted((a["span_id"], a["name"]) for a in annotations) == sorted(
            (s, name) for _, s in runs for name in ("Brevity", "Relevance"))  # once each
        poll(lambda: daemon.metric("tracescore_backlog_items", backlog="forward", destination="otlp") == 0, 30,
             "the forward backlog drained")
        assert daemon.metric("tracescore_forwarded_requests_total", outcome="rejected", signal="traces") == 0
    finally:
        daemon.stop()
        relay.close()
        phoenix.process.stop()


def test_mlflow_down_for_30_s_and_a_crash_lose_no_span_and_no_score(tmp_path: Path) -> None:
    mlflow = Mlflow(tmp_path)
    mlflow.start()
    experiment = mlflow.experiment("outage")
    relay = TcpRelay(mlflow.port).start()
    daemon = Daemon(tmp_path, mlflow_config(mlflow, experiment).replace(mlflow.url, relay.url),
                    env={**MLFLOW_RETRIES, **FAST_EXPORT})
    try:
        daemon.start()
        runs = ride_out_an_outage(daemon, relay)

        def complete() -> bool:
            return all(sorted(s["name"] for s in mlflow.spans(t)) == SPANS for t, _ in runs)

        poll(complete, 180, "every run's spans and evaluation spans in MLflow")
        poll(lambda: all(len(assessments(mlflow, t)) == 2 for t, _ in runs), 120, "two assessments per run")
        for trace_id, span_id in runs:
            feedback = assessments(mlflow, trace_id)
            assert sorted(a["assessment_name"] for a in feedback) == ["Brevity", "Relevance"]  # once each
            assert {a["span_id"] for a in feedback} == {span_id}
        poll(lambda: daemon.metric("tracescore_backlog_items", backlog="forward", destination="otlp") == 0, 30,
             "the forward backlog drained")
    finally:
        daemon.stop()
        relay.close()
        mlflow.process.stop()
