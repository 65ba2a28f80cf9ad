"""Scores in a real MLflow tracking server: agent traces through a real `tracescore serve`, then
MLflow's own APIs and Python client, queried as a user would (README)."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import httpx
from backends_support import (
    RESOURCE,
    SPANS,
    Daemon,
    Mlflow,
    Turn,
    agent_trace_body,
    backfill,
    cli,
    conversation_turns,
    poll,
    post_body,
    readme_block,
    send_agent_trace,
)
from session_scores import SCORER, send, session_record

from collector.config import MlflowSinkConfig
from collector.export.send.answers import Verdict
from collector.export.sinks import MlflowSink

FAST_RETRIES = {"TRACESCORE_SINKS_MLFLOW_MIN_BACKOFF_S": "0.2", "TRACESCORE_SINKS_MLFLOW_MAX_BACKOFF_S": "1.0"}


README_EXPERIMENT = '"x-mlflow-experiment-id" = "0"'
"""The README's experiment header: the experiment every fresh MLflow server has."""


def mlflow_config(mlflow: Mlflow, experiment: str | None = None) -> str:
    """The README's MLflow configuration, pointed at the test's server (and, given one, another experiment)."""
    block = readme_block("toml", "[sinks.mlflow]").replace("http://127.0.0.1:5000", mlflow.url)
    assert README_EXPERIMENT in block, block
    return block if experiment is None else block.replace(README_EXPERIMENT,
                                                          f'"x-mlflow-experiment-id" = "{experiment}"')


def mlflow_daemon(tmp_path: Path, mlflow: Mlflow, experiment: str | None = None,
                  env: dict[str, str] | None = None) -> Daemon:
    return Daemon(tmp_path, mlflow_config(mlflow, experiment), env={**FAST_RETRIES, **(env or {})})


def write_config(tmp_path: Path, text: str, name: str = "check.toml") -> Path:
    """A configuration file for `tracescore check` (the README's blocks, no scorers)."""
    path = tmp_path / name
    path.write_text(text)
    return path


def assessments(mlflow: Mlflow, trace_id: str) -> list[dict]:
    info = mlflow.trace(trace_id) or {}
    return list(info.get("assessments", []))


def test_scores_are_mlflow_feedback_a_search_finds_and_the_trace_is_unchanged(
    tmp_path: Path, mlflow: Mlflow,
) -> None:
    """The README's MLflow configuration and search, as written (its experiment 0 is on every fresh
    server): `check` confirms the experiment, the agent's spans and their scores land there."""
    checked = cli("check", str(write_config(tmp_path, mlflow_config(mlflow))), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert f"backend: MLflow experiment 0 (Default) on {mlflow.url}" in checked.stdout, checked.stdout
    daemon = mlflow_daemon(tmp_path, mlflow).start()
    try:
        good_trace, _, _ = send_agent_trace(daemon.traces_url, "The capital of France is Paris.")
        bad_trace, bad_span, run_ns = send_agent_trace(daemon.traces_url, "I do not know.")
        poll(lambda: len(assessments(mlflow, good_trace)) == 2 and len(assessments(mlflow, bad_trace)) == 2, 120,
             "two assessments on each trace")
        # The evaluation spans before the daemon stops: one held back until its run's own spans
        # were forwarded can still wait in the outbox when the assessments are in, and a stopped
        # daemon sends it only after a restart (seen: 4 records left, due 0.4 s after the stop).
        spans = poll(lambda: (s := mlflow.spans(bad_trace)) and len(s) == 4 and s, 60, "the trace's four spans")
    finally:
        assert daemon.stop() == 0

    feedback = {a["assessment_name"]: a for a in assessments(mlflow, bad_trace)}
    relevance = feedback["Relevance"]
    assert relevance["feedback"]["value"] == 0.2 and relevance["rationale"] == "does not name Paris"
    assert relevance["span_id"] == bad_span
    assert relevance["source"] == {"source_type": "CODE", "source_id": "relevance"}
    assert relevance["metadata"]["scorer_version"] == "1"
    assert feedback["Brevity"]["metadata"]["run_id"] == relevance["metadata"]["run_id"]

    # The search a user runs (README): mlflow.search_traces with a feedback filter.
    query = readme_block("py", "feedback.`Relevance`").replace("http://127.0.0.1:5000", mlflow.url)
    found = mlflow.run_python(query)
    assert found.strip() == str([f"tr-{bad_trace}"])

    # The scored trace keeps the agent's service and its duration.
    info = mlflow.trace(bad_trace) or {}
    metadata = {**info.get("trace_metadata", {}), **info.get("tags", {})}
    assert "tracescore" not in json.dumps(metadata), metadata
    assert RESOURCE["service.name"] in json.dumps(metadata), metadata
    # Assessments go to MLflow's REST API, evaluation spans through the OTLP export: either may
    # land first (both awaited above).
    names = sorted(s["name"] for s in spans)
    assert names == SPANS
    starts = [int(s["start_time_unix_nano"]) for s in spans]
    ends = [int(s["end_time_unix_nano"]) for s in spans]
    assert max(ends) - min(starts) == run_ns  # the trace lasts as long as the run
    duration_s = float(str(info["execution_duration"]).rstrip("s"))  # a protobuf Duration: "0.051s"
    assert abs(duration_s * 1e9 - run_ns) < 1e6, (info["execution_duration"], run_ns)


def test_a_run_scored_twice_leaves_one_assessment(tmp_path: Path, mlflow: Mlflow) -> None:
    """Two daemons with their own queues (replicas, or a replay after the idempotency keys were
    forgotten) score one run: MLflow keeps one assessment per scorer."""
    experiment = mlflow.experiment("twice")
    body, trace_id, _ = agent_trace_body("No idea.")
    for replica in ("a", "b"):
        (tmp_path / replica).mkdir()
        daemon = mlflow_daemon(tmp_path / replica, mlflow, experiment).start()
        try:
            post_body(daemon.traces_url, body)
            poll(lambda d=daemon: d.metric("tracescore_sink_sent_total", sink="mlflow", outcome="sent") == 2, 120,
                 f"replica {replica} to assess the run")
        finally:
            assert daemon.stop() == 0
    assert sorted(a["assessment_name"] for a in assessments(mlflow, trace_id)) == ["Brevity", "Relevance"]



def saved_run(tmp_path: Path, mlflow: Mlflow, experiment: str, answer: str) -> tuple[str, Path, str, str]:
    """An agent run already in MLflow (its spans sent there long ago) and saved as an OTLP file for
    a backfill: the README's MLflow config, the file, the trace id and the run span id."""
    body, trace_id, span_id = agent_trace_body(answer)
    reply = httpx.post(f"{mlflow.url}/v1/traces", content=body, timeout=60,
                       headers={"Content-Type": "application/x-protobuf", "x-mlflow-experiment-id": experiment})
    assert reply.status_code == 200, reply.text
    saved = tmp_path / "run.pb"
    saved.write_bytes(body)
    return mlflow_config(mlflow, experiment), saved, trace_id, span_id

def test_backfill_twice_leaves_one_assessment_per_scorer(tmp_path: Path, mlflow: Mlflow) -> None:
    experiment = mlflow.experiment("backfill")
    config, saved, trace_id, span_id = saved_run(tmp_path, mlflow, experiment, "Maybe Lyon.")
    for _ in range(2):
        done = backfill(config, [saved], tmp_path)
        assert done.returncode == 0, done.stderr
    feedback = sorted((a["assessment_name"], a["feedback"]["value"]) for a in assessments(mlflow, trace_id))
    assert feedback == [("Brevity", 1.0), ("Relevance", 0.2)]
    spans = poll(lambda: (s := mlflow.spans(trace_id)) and len(s) >= 4 and s, 60, "the evaluation spans")
    assert sorted(s["name"] for s in spans) == SPANS  # once each
    assert {a["span_id"] for a in assessments(mlflow, trace_id)} == {span_id}


def span_hex(span: dict) -> str:
    """A span id as MLflow's batchGet gives it (protobuf JSON: base64 bytes), in hex."""
    return base64.b64decode(span["span_id"]).hex()


def test_a_run_scored_again_to_another_value_replaces_its_assessment(tmp_path: Path, mlflow: Mlflow) -> None:
    """A backfill scores a run 0.3, a second one (the scorer changed, same version) 0.8: MLflow
    keeps one assessment for the score, holding 0.8 and naming the new evaluation span; a third
    backfill scoring alike changes nothing."""
    experiment = mlflow.experiment("rescored")
    config, saved, trace_id, span_id = saved_run(tmp_path, mlflow, experiment, "Paris.")
    outcomes = []
    for value in ("0.3", "0.8", "0.8"):
        (tmp_path / "tunable.score").write_text(value)
        done = backfill(config, [saved], tmp_path, scorers=("tunable",))
        assert done.returncode == 0 and "exported 1 score(s)" in done.stderr, done.stderr
        (tunable,) = [a for a in assessments(mlflow, trace_id) if a["assessment_name"] == "Tunable"]
        outcomes.append((tunable["assessment_id"], tunable["feedback"]["value"],
                         tunable["metadata"]["evaluation_span_id"]))
    (first_id, first, first_span), (second_id, second, second_span), third = outcomes
    assert (first, second) == (0.3, 0.8) and first_id == second_id  # replaced in place, not added
    assert first_span != second_span and third == outcomes[1]
    spans = poll(lambda: len(e := [s for s in mlflow.spans(trace_id) if s["name"] == "evaluation Tunable"]) == 2
                 and e, 60, "both outcomes' evaluation spans")
    assert sorted(span_hex(s) for s in spans) == sorted([first_span, second_span])
    assert {a["span_id"] for a in assessments(mlflow, trace_id)} == {span_id}


def mlflow_conversation(mlflow: Mlflow, experiment: str, answers: list[str]) -> tuple[str, list[Turn]]:
    """An agent's conversation (a trace per turn, ``session.id`` on its spans) sent to MLflow."""
    session_id = f"chat-{uuid.uuid4().hex[:12]}"
    turns = conversation_turns(session_id, answers)
    for turn in turns:
        reply = httpx.post(f"{mlflow.url}/v1/traces", content=turn.body, timeout=60, headers={
            "Content-Type": "application/x-protobuf", "x-mlflow-experiment-id": experiment})
        assert reply.status_code == 200, reply.text
    for turn in turns:
        info = poll(lambda t=turn: mlflow.trace(t.trace_id), 60, "the turn's trace")
        assert info["trace_metadata"]["mlflow.trace.session"] == session_id
    return session_id, turns


def goal_assessments(mlflow: Mlflow, trace_id: str) -> list[dict]:
    return [a for a in assessments(mlflow, trace_id) if a["assessment_name"] == SCORER]


def low_traces(mlflow: Mlflow, experiment: str) -> tuple[list[str], list[str]]:
    """The README's session search (the sessions it prints), and the traces the same search returns:
    one process runs the README's script as written, then its last line again printing trace ids
    (each process imports mlflow: seconds of CPU)."""
    query = readme_block("py", "feedback.`Goal met`").replace("http://127.0.0.1:5000", mlflow.url)
    query = query.replace('locations=["0"]', f"locations=[{experiment!r}]")
    print_sessions = query.strip().splitlines()[-1]
    print_traces = print_sessions.replace('.get("mlflow.trace.session")', "").replace(
        "trace.info.trace_metadata", "trace.info.trace_id")
    assert print_traces != print_sessions and print_sessions.startswith("print("), print_sessions
    sessions, traces = mlflow.run_python(query.rstrip() + "\n" + print_traces + "\n").strip().splitlines()
    return json.loads(sessions.replace("'", '"')), json.loads(traces.replace("'", '"'))


def test_a_conversation_score_is_one_assessment_a_feedback_search_expands_to_the_session(mlflow: Mlflow) -> None:
    """A three-turn conversation scored low (revision 1), then high (revision 2): one assessment on
    the session's first trace, updated in place; the README's feedback search finds every trace of
    the session while it is low, none once it is high."""
    experiment = mlflow.experiment("sessions")
    session_id, turns = mlflow_conversation(mlflow, experiment, ["Paris.", "About 2.1 million.", "The Louvre."])
    sink = MlflowSink(MlflowSinkConfig(tracking_uri=mlflow.url))

    first = session_record(session_id, turns[:2], revision=1, score=0.2)
    assert send(sink, first) == [Verdict.SENT]
    (assessment,) = goal_assessments(mlflow, turns[0].trace_id)
    assert assessment["feedback"]["value"] == 0.2 and "span_id" not in assessment
    assert assessment["metadata"]["mlflow.trace.session"] == session_id
    assert assessment["source"] == {"source_type": "LLM_JUDGE", "source_id": "goal"}
    assert all(not goal_assessments(mlflow, t.trace_id) for t in turns[1:])
    sessions, traces = low_traces(mlflow, experiment)
    assert sessions == [session_id]
    assert sorted(traces) == sorted(f"tr-{t.trace_id}" for t in turns)  # the whole session

    second = session_record(session_id, turns, revision=2, score=0.9)
    assert send(sink, second, second) == [Verdict.SENT, Verdict.SENT]  # and a redelivery
    (updated,) = goal_assessments(mlflow, turns[0].trace_id)
    assert updated["assessment_id"] == assessment["assessment_id"] and updated["feedback"]["value"] == 0.9
    assert (updated["metadata"]["revision"], updated["metadata"]["turns"]) == ("2", "3")
    assert updated["rationale"] == "revision 2" and updated["metadata"]["evaluation_span_id"] == second.score_span_id
    assert low_traces(mlflow, experiment) == ([], [])

    # Revision 1 again (a retry that came late, a backfill of a cut window): a revision never goes back.
    assert send(sink, first) == [Verdict.SENT]
    (kept,) = goal_assessments(mlflow, turns[0].trace_id)
    assert (kept["feedback"]["value"], kept["metadata"]["revision"]) == (0.9, "2")
    assert low_traces(mlflow, experiment) == ([], [])


def test_a_revision_whose_first_trace_changed_leaves_one_assessment(mlflow: Mlflow) -> None:
    """A turn that started first reached the daemon late: revision 1 was scored on the turns
    after it, revision 2 on all of them. The assessment moves to the new first trace and the one
    revision 1 left on the old first trace is deleted (as MLflow's own session re-scoring does),
    so the session has one current assessment of the scorer."""
    experiment = mlflow.experiment("moved")
    session_id, turns = mlflow_conversation(mlflow, experiment, ["Paris.", "About 2.1 million.", "The Louvre."])
    sink = MlflowSink(MlflowSinkConfig(tracking_uri=mlflow.url))
    assert send(sink, session_record(session_id, turns[1:], revision=1, score=0.2)) == [Verdict.SENT]
    assert [a["feedback"]["value"] for a in goal_assessments(mlflow, turns[1].trace_id)] == [0.2]

    assert send(sink, session_record(session_id, turns, revision=2, score=0.4)) == [Verdict.SENT]
    current = {t.trace_id: [a["feedback"]["value"] for a in goal_assessments(mlflow, t.trace_id)] for t in turns}
    assert current == {turns[0].trace_id: [0.4], turns[1].trace_id: [], turns[2].trace_id: []}
    sessions, traces = low_traces(mlflow, experiment)
    assert sessions == [session_id] and len(traces) == 3
