"""Issue 42 (1), against a real MLflow: the README's MLflow configuration pointed at an experiment
the server does not have. `check` names it and the fix; the daemon answers the agent 200 and
keeps every span and score, `status` (``/status`` and the CLI) shows the sender held with
MLflow's own message, across a restart; once the experiment is created through MLflow's REST API,
the held spans and scores reach it, each once."""

from __future__ import annotations

import json
from pathlib import Path

from backends_support import SPANS, Mlflow, cli, poll, send_agent_trace
from test_mlflow_backend import assessments, mlflow_config, mlflow_daemon, write_config

FAST_EXPORT = {"TRACESCORE_EXPORT_MAX_BACKOFF_S": "0.5"}  # a held sender tries again often: a short test


def test_spans_and_scores_for_a_missing_experiment_are_held_then_delivered_once(
    tmp_path: Path, mlflow: Mlflow,
) -> None:
    experiment = mlflow.next_experiment_id()  # not there yet, as "1" is not on a fresh server
    missing = f"No Experiment with id={experiment} exists"
    config = write_config(tmp_path, mlflow_config(mlflow, experiment))
    checked = cli("check", str(config), cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout
    assert (f"experiment {experiment} does not exist on {mlflow.url} ({missing}); create it" in checked.stderr
            and "or use 0" in checked.stderr), checked.stderr

    daemon = mlflow_daemon(tmp_path, mlflow, experiment, env=FAST_EXPORT).start()
    try:
        runs = [send_agent_trace(daemon.traces_url, answer)[:2]  # answered 200: accepted
                for answer in ("The capital of France is Paris.", "I do not know.")]
        held = poll(lambda: (s := daemon.sender("forward"))["state"] == "held" and s, 60, "forwarding held")
        assert held["message"] == missing and held["cause"] == f"HTTP 404 Not Found: {missing}", held
        assert "create it" in held["fix"] and held["refused"] == 0 and held["destination"].startswith(mlflow.url)
        # The CLI shows the same: the view's JSON, and the table with the state.
        shown = cli("status", f"127.0.0.1:{daemon.http_port}", "--once", "--format", "json", cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        (forward,) = [s for s in json.loads(shown.stdout)["sending"] if s["sender"] == "forward"]
        assert (forward["state"], forward["message"]) == ("held", missing)
        table = cli("status", f"127.0.0.1:{daemon.http_port}", "--once", cwd=tmp_path)
        assert "held since" in table.stdout and "No Experiment with" in table.stdout, table.stdout
        # Scored meanwhile, the scores wait for their runs' spans; nothing was dropped.
        poll(lambda: daemon.metric("tracescore_decisions_total", scorer="relevance", reason="scored") == 2, 60,
             "both runs scored")
        assert daemon.metric("tracescore_forwarded_requests_total", signal="traces", outcome="rejected") == 0
        assert all(not mlflow.spans(trace_id) for trace_id, _ in runs)
        # What is held is in the store: a restart finds it there, still held.
        assert daemon.stop() == 0
        daemon.start()
        poll(lambda: daemon.sender("forward")["state"] == "held", 60, "forwarding held after the restart")

        assert mlflow.experiment(f"held-{experiment}") == experiment  # created through MLflow's REST API
        for trace_id, span_id in runs:
            poll(lambda t=trace_id: sorted(s["name"] for s in mlflow.spans(t)) == SPANS, 90,
                 "the run's spans and evaluation spans")
            poll(lambda t=trace_id: len(assessments(mlflow, t)) == 2, 90, "the run's two assessments")
            feedback = assessments(mlflow, trace_id)
            assert sorted(a["assessment_name"] for a in feedback) == ["Brevity", "Relevance"]  # once each
            assert {a["span_id"] for a in feedback} == {span_id}
        poll(lambda: daemon.sender("forward")["state"] == "ok", 30, "forwarding back to ok")
        for name in ("export", "sink mlflow"):
            assert daemon.sender(name)["refused"] == 0, daemon.sender(name)
        assert daemon.metric("tracescore_sink_sent_total", sink="mlflow", outcome="dropped_span_missing") == 0
        assert daemon.metric("tracescore_forwarded_requests_total", signal="traces", outcome="rejected") == 0
    finally:
        assert daemon.stop() == 0
    for trace_id, _ in runs:  # nothing sent twice, even across the stop
        assert sorted(s["name"] for s in mlflow.spans(trace_id)) == SPANS
