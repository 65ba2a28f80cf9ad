"""``tracescore score --from mlflow+URL/EXPERIMENT`` against a real MLflow: agent traces in, the
same runs and scores out, assessments written back once however often it runs (SPEC §10)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from backends_support import Daemon, Mlflow, agent_trace_body, conversation_turns, poll
from pull_support import rows, score
from test_mlflow_backend import FAST_RETRIES, assessments, mlflow_config


def post_to_mlflow(mlflow: Mlflow, experiment: str, body: bytes) -> None:
    reply = httpx.post(f"{mlflow.url}/v1/traces", content=body, timeout=60,
                       headers={"Content-Type": "application/x-protobuf", "x-mlflow-experiment-id": experiment})
    assert reply.status_code == 200, reply.text


def low_relevance(mlflow: Mlflow, experiment: str) -> list[str]:
    """MLflow's own search for the low-scoring runs (README: ``feedback.Relevance < 0.5``)."""
    reply = httpx.post(f"{mlflow.url}/api/3.0/mlflow/traces/search", timeout=30, json={
        "locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": experiment}}],
        "filter": "feedback.`Relevance` < 0.5"})
    reply.raise_for_status()
    return [t["trace_id"] for t in reply.json().get("traces", [])]


def test_runs_pulled_from_mlflow_are_the_runs_sent_and_score_the_same(tmp_path: Path, mlflow: Mlflow) -> None:
    experiment = mlflow.experiment(f"pull-{uuid.uuid4().hex[:8]}")
    bodies = [agent_trace_body("The capital of France is Paris.")[0], agent_trace_body("I do not know.")[0]]
    bodies += [t.body for t in conversation_turns(f"conv-{uuid.uuid4().hex[:8]}", ["Paris.", "Lyon is not it."])]
    files = []
    for i, body in enumerate(bodies):
        post_to_mlflow(mlflow, experiment, body)
        files.append(tmp_path / f"trace{i}.pb")
        files[-1].write_bytes(body)
    live = score(*map(str, files), cwd=tmp_path)
    pulled = score("--from", f"mlflow+{mlflow.url}/{experiment}", "--since", "1h", "--page-size", "3",
                   cwd=tmp_path)  # two pages
    assert rows(pulled) == rows(live)  # MLflow keeps the resource: the service too
    assert len(rows(live)) == 4 * 2 + 1
    assert "read 4 trace(s)" in pulled.stderr


def test_a_backfill_after_the_daemon_and_a_second_one_add_nothing(tmp_path: Path, mlflow: Mlflow) -> None:
    experiment = mlflow.experiment(f"pull-{uuid.uuid4().hex[:8]}")
    body, trace_id, span_id = agent_trace_body("I do not know.")
    config = mlflow_config(mlflow, experiment)
    daemon = Daemon(tmp_path, config, env=FAST_RETRIES).start()
    try:  # the daemon scores the run live, forwarding its spans to MLflow
        httpx.post(daemon.traces_url, content=body, headers={"Content-Type": "application/x-protobuf"},
                   timeout=30).raise_for_status()
        poll(lambda: len(assessments(mlflow, trace_id)) == 2, 120, "the daemon's two assessments")
        poll(lambda: len(mlflow.spans(trace_id)) == 4, 60, "the run's spans and two evaluation spans")
    finally:
        assert daemon.stop() == 0
    before = sorted((a["assessment_id"], a["assessment_name"]) for a in assessments(mlflow, trace_id))
    assert len(before) == 2 and all(item[0] for item in before)  # ids the backend gave

    (tmp_path / "backfill.toml").write_text(config)
    for again in ((), ("--rescore",)):
        done = score("--from", f"mlflow+{mlflow.url}/{experiment}", "--export", "--config", "backfill.toml",
                     *again, cwd=tmp_path, scorers=("relevance", "brevity"))
        assert done.returncode == 0, done.stderr
        if again:  # scored again, sent with the daemon's ids
            assert "exported 2 score(s)" in done.stderr
        else:  # the daemon's evaluation spans came back with the trace: nothing is scored twice
            assert "skipped 2 score(s) already in the backend" in done.stderr and "exported 0 score(s)" in done.stderr
        assert sorted((a["assessment_id"], a["assessment_name"]) for a in assessments(mlflow, trace_id)) == before
        assert len(mlflow.spans(trace_id)) == 4
    assert low_relevance(mlflow, experiment) == [f"tr-{trace_id}"]
    assert {a["span_id"] for a in assessments(mlflow, trace_id)} == {span_id}


def test_an_unknown_experiment_is_one_line_and_exit_2(tmp_path: Path, mlflow: Mlflow) -> None:
    done = score("--from", f"mlflow+{mlflow.url}/987654", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"tracescore: GET {mlflow.url}/api/2.0/mlflow/experiments/get: HTTP 404: ")
    assert "RESOURCE_DOES_NOT_EXIST" in line
    assert done.stdout == "" and not (tmp_path / ".tracescore").exists()
