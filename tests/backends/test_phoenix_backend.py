"""Scores in a real Phoenix: agent traces through a real `tracescore serve`, then Phoenix's own
APIs, queried as a user would (README "Scores in Phoenix, MLflow and Langfuse")."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
from backends_support import (
    SCORERS,
    Daemon,
    Phoenix,
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

from collector.common.metrics import Metrics
from collector.common.types import Done, RunRecord, ScoreJob, ScoreRecord
from collector.config import PhoenixSinkConfig
from collector.export.send.answers import Verdict
from collector.export.sinks import PhoenixSink, SinkSender
from collector.store.sqlite.store import SqliteStore

LOW_RUNS = readme_block("graphql", "annotations['Relevance'].score < 0.5")
LOW_SESSIONS = readme_block("graphql", "session_annotations['Goal met'].score < 0.5")
FAST_RETRIES = {"TRACESCORE_SINKS_PHOENIX_MIN_BACKOFF_S": "0.2", "TRACESCORE_SINKS_PHOENIX_MAX_BACKOFF_S": "1.0"}


def phoenix_config(phoenix: Phoenix) -> str:
    """The README's Phoenix configuration, pointed at the test's server."""
    return readme_block("toml", "[sinks.phoenix]").replace("http://127.0.0.1:6006", phoenix.url)


def phoenix_daemon(tmp_path: Path, phoenix: Phoenix) -> Daemon:
    return Daemon(tmp_path, phoenix_config(phoenix), env={"PHOENIX_API_KEY": "", **FAST_RETRIES})


def by_name(annotations: list[dict], name: str) -> list[dict]:
    return [a for a in annotations if a["name"] == name]


def test_scores_are_phoenix_annotations_a_filter_finds_and_the_trace_is_unchanged(
    tmp_path: Path, phoenix: Phoenix,
) -> None:
    daemon = phoenix_daemon(tmp_path, phoenix).start()
    try:
        good_trace, good_span, _ = send_agent_trace(daemon.traces_url, "The capital of France is Paris.")
        bad_trace, bad_span, run_ns = send_agent_trace(daemon.traces_url, "I do not know.")
        poll(lambda: len(phoenix.annotations([good_span, bad_span])) == 4, 90, "four annotations in Phoenix")
        # The evaluation spans before the daemon stops: one held back until its run's own spans
        # were forwarded can still wait in the outbox when the assessments are in, and a stopped
        # daemon sends it only after a restart (seen: 4 records left, due 0.4 s after the stop).
        spans = poll(lambda: (s := phoenix.spans(bad_trace)) and len(s) == 4 and s, 60, "the trace's four spans")
    finally:
        assert daemon.stop() == 0

    bad = phoenix.annotations([bad_span])
    (relevance,) = by_name(bad, "Relevance")
    assert relevance["result"] == {"score": 0.2, "label": None, "explanation": "does not name Paris"}
    assert relevance["annotator_kind"] == "CODE" and relevance["identifier"] == "tracescore:relevance:1"
    assert relevance["metadata"]["scorer_id"] == "relevance"
    (brevity,) = by_name(bad, "Brevity")
    assert brevity["metadata"]["run_id"] == relevance["metadata"]["run_id"]  # one run id per agent run

    # The filter a user types in Phoenix (README): the low-scoring run, not its evaluation span.
    found = phoenix.graphql(LOW_RUNS)
    hits = [e["node"] for e in found["getProjectByName"]["spans"]["edges"]]
    assert [(h["context"]["traceId"], h["context"]["spanId"]) for h in hits] == [(bad_trace, bad_span)]
    assert hits[0]["name"] == "invoke_agent support"

    # The evaluation spans (awaited above) are in the run's trace, typed EVALUATOR, anchored at the run's end.
    evaluations = [s for s in spans if s["name"].startswith("evaluation ")]
    run = next(s for s in spans if s["context"]["span_id"] == bad_span)
    assert sorted(s["name"] for s in evaluations) == ["evaluation Brevity", "evaluation Relevance"]
    assert {s["span_kind"] for s in evaluations} == {"EVALUATOR"}
    assert {s["parent_id"] for s in evaluations} == {bad_span}
    assert all(s["start_time"] == s["end_time"] == run["end_time"] for s in evaluations)
    starts = sorted(s["start_time"] for s in spans)
    ends = sorted(s["end_time"] for s in spans)
    assert (starts[0], ends[-1]) == (run["start_time"], run["end_time"])  # the trace lasts as long as the run
    assert run_ns > 0


def test_a_run_scored_twice_leaves_one_annotation(tmp_path: Path, phoenix: Phoenix) -> None:
    """Two daemons with their own queues (replicas, or a replay after the idempotency keys were
    forgotten) score one run: Phoenix keeps one annotation per scorer."""
    body, trace_id, span_id = agent_trace_body("No idea.")
    for replica in ("a", "b"):
        (tmp_path / replica).mkdir()
        daemon = phoenix_daemon(tmp_path / replica, phoenix).start()
        try:
            post_body(daemon.traces_url, body)
            poll(lambda d=daemon: d.metric("tracescore_sink_sent_total", sink="phoenix", outcome="sent") == 2, 90,
                 f"replica {replica} to annotate the run")
        finally:
            assert daemon.stop() == 0
    annotations = phoenix.annotations([span_id])
    assert sorted(a["name"] for a in annotations) == ["Brevity", "Relevance"], annotations
    assert trace_id in {s["context"]["trace_id"] for s in phoenix.spans(trace_id)}


def test_backfill_twice_leaves_one_annotation_and_one_evaluation_span(tmp_path: Path, phoenix: Phoenix) -> None:
    body, trace_id, span_id = agent_trace_body("Maybe Lyon.")
    post_body(f"{phoenix.url}/v1/traces", body)  # the agent's spans reached Phoenix long ago
    saved = tmp_path / "run.pb"
    saved.write_bytes(body)
    config = phoenix_config(phoenix).replace('"env:PHOENIX_API_KEY"', '""')
    for _ in range(2):
        done = backfill(config, [saved], tmp_path)
        assert done.returncode == 0, done.stderr
        assert "exported 2 score(s)" in done.stderr
    annotations = phoenix.annotations([span_id])
    assert sorted((a["name"], a["result"]["score"]) for a in annotations) == [("Brevity", 1.0), ("Relevance", 0.2)]
    spans = poll(lambda: (s := phoenix.spans(trace_id)) and len(s) >= 4 and s, 60, "the evaluation spans")
    assert sorted(s["name"] for s in spans) == ["chat gpt-4o-mini", "evaluation Brevity", "evaluation Relevance",
                                                "invoke_agent support"]


async def test_a_score_whose_span_never_arrives_is_dropped_after_span_wait(tmp_path: Path, phoenix: Phoenix) -> None:
    """Phoenix answers 404 to an annotation on a span it does not have: the sink retries for
    span_wait_s from the first such answer, then drops the score and counts it."""
    store = SqliteStore(str(tmp_path / "q.db"), sinks=["phoenix"])
    await store.start()
    job = ScoreJob(RunRecord("ab" * 16, "cd" * 8), "relevance", "1")
    await store.put([job])
    (leased,) = await store.take(1)
    await store.settle(leased, Done(ScoreRecord(job.key, "ab" * 16, "cd" * 8, "ef" * 8, "relevance", "Relevance",
                                                "1", score=0.1)))
    cfg = PhoenixSinkConfig(endpoint=phoenix.url, span_wait_s=1.0, min_backoff_s=0.1, max_backoff_s=0.2)
    metrics = Metrics()
    sender = SinkSender(PhoenixSink(cfg), store.sink_outbox("phoenix"), cfg, metrics, poll_s=0.05)
    await sender.start()

    def count(outcome: str) -> float:
        return metrics.registry.get_sample_value("tracescore_sink_sent_total",
                                                 {"sink": "phoenix", "outcome": outcome}) or 0.0

    try:
        deadline = time.monotonic() + 30
        while count("dropped_span_missing") < 1:
            assert time.monotonic() < deadline, "the score was never given up"
            await asyncio.sleep(0.05)
    finally:
        await sender.shutdown()
    assert count("span_missing") >= 2 and count("sent") == 0
    assert await store.sink_outbox("phoenix").backlog() == 0
    await store.shutdown()


def named(spans: list[dict], name: str) -> list[dict]:
    return [s for s in spans if s["name"] == name]


def test_a_replayed_dead_letter_is_the_current_outcome_and_a_resend_adds_no_span(
    tmp_path: Path, phoenix: Phoenix,
) -> None:
    """A scorer fails (its evaluation span ERROR in Phoenix), is fixed, its dead letter replayed:
    Phoenix, which keeps the first copy of a span id, shows the new outcome as a new span (OK, the
    score, ``tracescore.supersedes`` naming the failure span), the failure span marked
    ``superseded``, and the run's annotation holding the score and naming the new span. A backfill
    that scores alike sends the same span again: Phoenix still has two evaluation spans."""
    body, trace_id, span_id = agent_trace_body("Paris.")
    broken = tmp_path / "flaky.broken"
    broken.write_text("the flaky scorer raises while this file exists\n")
    config = phoenix_config(phoenix) + f'[[scorers]]\nref = "{SCORERS}:flaky"\n'
    daemon = Daemon(tmp_path, config, env={"PHOENIX_API_KEY": "", **FAST_RETRIES}).start()
    try:
        post_body(daemon.traces_url, body)
        (failure,) = poll(lambda: named(phoenix.spans(trace_id), "evaluation Flaky"), 90, "the failure span")
        assert failure["status_code"] == "ERROR" and failure["attributes"]["error.type"] == "RuntimeError"
        broken.unlink()  # fixed, under the running daemon
        replayed = cli("dead-letters", "replay", "--all", "--config", str(daemon.config), cwd=tmp_path,
                       env={"PHOENIX_API_KEY": ""})  # the config names it (the command never uses it)
        assert replayed.returncode == 0 and "replayed 1 dead letter(s)" in replayed.stdout, replayed.stderr
        old_id = failure["context"]["span_id"]
        spans = poll(lambda: len(f := named(phoenix.spans(trace_id), "evaluation Flaky")) == 2 and f, 90,
                     "the replayed outcome's span")
        poll(lambda: by_name(phoenix.annotations([old_id]), "superseded"), 90, "the failure span's mark")
        poll(lambda: by_name(phoenix.annotations([span_id]), "Flaky"), 90, "the run's Flaky annotation")
    finally:
        assert daemon.stop() == 0

    (current,) = [s for s in spans if s["context"]["span_id"] != old_id]
    assert current["status_code"] == "OK" and current["parent_id"] == span_id
    assert current["attributes"]["gen_ai.evaluation.score.value"] == 1.0
    assert current["attributes"]["tracescore.supersedes"] == old_id
    assert "tracescore.supersedes" not in failure["attributes"]
    (mark,) = by_name(phoenix.annotations([old_id]), "superseded")
    assert mark["result"]["label"] == "superseded" and mark["metadata"]["superseded_by"] == current["context"]["span_id"]
    (score,) = by_name(phoenix.annotations([span_id]), "Flaky")
    assert score["result"]["score"] == 1.0 and score["metadata"]["evaluation_span_id"] == current["context"]["span_id"]

    # The same outcome again (a backfill scoring alike): the same span id, which Phoenix already
    # has. The backfill's Witness span, exported after it in the same request, shows Phoenix took it.
    saved = tmp_path / "run.pb"
    saved.write_bytes(body)
    done = backfill(phoenix_config(phoenix).replace('"env:PHOENIX_API_KEY"', '""'), [saved], tmp_path,
                    scorers=("flaky", "witness"))
    assert done.returncode == 0 and "exported 2 score(s)" in done.stderr, done.stderr
    after = poll(lambda: named(s := phoenix.spans(trace_id), "evaluation Witness") and s, 90, "the Witness span")
    assert sorted(s["context"]["span_id"] for s in named(after, "evaluation Flaky")) == sorted(
        s["context"]["span_id"] for s in spans)
    (score,) = by_name(phoenix.annotations([span_id]), "Flaky")
    assert score["result"]["score"] == 1.0 and score["metadata"]["evaluation_span_id"] == current["context"]["span_id"]


def session_annotations(phoenix: Phoenix, session_id: str) -> list[dict]:
    reply = httpx.get(f"{phoenix.url}/v1/projects/default/session_annotations",
                      params={"session_ids": session_id}, timeout=30)
    assert reply.status_code == 200, reply.text
    return list(reply.json()["data"])


def low_sessions(phoenix: Phoenix) -> list[str]:
    """The sessions the README's query finds."""
    found = phoenix.graphql(LOW_SESSIONS)["getProjectByName"]["sessions"]["edges"]
    return [edge["node"]["sessionId"] for edge in found]


def test_a_conversation_score_is_one_session_annotation_the_sessions_filter_finds(phoenix: Phoenix) -> None:
    """An agent's three-turn conversation (a trace per turn, ``session.id`` on its spans) in
    Phoenix, scored low (revision 1), then high (revision 2, a late turn reopened it): one session
    annotation, holding the latest value; the README's session filter finds the session only while
    it is low; revision 1 sent again leaves revision 2 in place."""
    session_id = f"chat-{uuid.uuid4().hex[:12]}"
    turns = conversation_turns(session_id, ["Paris.", "About 2.1 million people.", "The Louvre."])
    for turn in turns:
        post_body(f"{phoenix.url}/v1/traces", turn.body)
    poll(lambda: all(len(phoenix.spans(t.trace_id)) == 2 for t in turns), 60, "the conversation's spans")
    sink = PhoenixSink(PhoenixSinkConfig(endpoint=phoenix.url))

    first = session_record(session_id, turns[:2], revision=1, score=0.2)
    assert send(sink, first) == [Verdict.SENT]
    (annotation,) = session_annotations(phoenix, session_id)
    assert annotation["name"] == SCORER and annotation["result"]["score"] == 0.2
    assert annotation["identifier"] == "tracescore:goal:1" and annotation["annotator_kind"] == "LLM"
    assert session_id in low_sessions(phoenix)

    second = session_record(session_id, turns, revision=2, score=0.9)
    assert send(sink, second, second) == [Verdict.SENT, Verdict.SENT]  # and a redelivery
    (updated,) = session_annotations(phoenix, session_id)
    assert updated["id"] == annotation["id"] and updated["result"] == {
        "score": 0.9, "label": None, "explanation": "revision 2"}
    assert (updated["metadata"]["revision"], updated["metadata"]["turns"]) == ("2", "3")
    assert updated["metadata"]["evaluation_span_id"] == second.score_span_id
    assert session_id not in low_sessions(phoenix)

    # Revision 1 again (a retry that came late, a backfill of a cut window): a revision never goes back.
    assert send(sink, first) == [Verdict.SENT]
    (kept,) = session_annotations(phoenix, session_id)
    assert (kept["id"], kept["result"]["score"], kept["metadata"]["revision"]) == (annotation["id"], 0.9, "2")


def test_a_score_of_a_session_phoenix_does_not_know_waits_like_an_unknown_span(phoenix: Phoenix) -> None:
    """Phoenix answers 404 (with ``sync``) for a session none of its spans named yet: the sender
    retries it until span_wait_s, as for an annotation on an unknown span."""
    turns = conversation_turns(f"chat-{uuid.uuid4().hex[:12]}", ["Paris."])  # never sent to Phoenix
    record = session_record(f"never-{uuid.uuid4().hex}", turns, revision=1, score=0.5)
    assert send(PhoenixSink(PhoenixSinkConfig(endpoint=phoenix.url)), record) == [Verdict.WAIT]
