"""``tracescore score --from phoenix+URL/PROJECT`` against a real Phoenix: agent traces in, the
same runs and scores out, scores written back once however often it runs (SPEC §10); what the
daemon (or a backfill) scored already is not paid for again, and sessions keep their identity
and revision (issue 42, points 2 and 3)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
from backends_support import (
    SCORERS,
    Daemon,
    Phoenix,
    agent_trace_body,
    conversation_turns,
    poll,
    post_body,
)
from pull_support import rows, score, score_async
from test_phoenix_backend import FAST_RETRIES, phoenix_config


def project_traces(phoenix: Phoenix, tmp_path: Path) -> tuple[str, list[Path], list[str]]:
    """Two agent runs and a two-turn conversation, sent to Phoenix in a project of their own and
    saved as the OTLP files the agent posted: the project, the files and the run span ids."""
    project = f"pull-{uuid.uuid4().hex[:8]}"
    resource = {"openinference.project.name": project}
    bodies = [agent_trace_body("The capital of France is Paris.", resource)[::2],
              agent_trace_body("I do not know.", resource)[::2]]
    session = f"conv-{uuid.uuid4().hex[:8]}"  # Phoenix's session ids are server-wide
    bodies += [(t.body, t.span_id) for t in conversation_turns(session, ["Paris.", "Lyon is not it."], resource)]
    files = []
    for i, (body, _) in enumerate(bodies):
        post_body(f"{phoenix.url}/v1/traces", body)
        files.append(tmp_path / f"trace{i}.pb")
        files[-1].write_bytes(body)
    spans = [span for _, span in bodies]
    poll(lambda: len(phoenix.spans_of_project(project)) == 8, 60, "the project's eight spans in Phoenix")
    return project, files, spans


def test_runs_pulled_from_phoenix_are_the_runs_sent_and_score_the_same(tmp_path: Path, phoenix: Phoenix) -> None:
    project, files, _ = project_traces(phoenix, tmp_path)
    live = score(*map(str, files), cwd=tmp_path)  # what the daemon's adapters see of the agent's requests
    pulled = score("--from", f"phoenix+{phoenix.url}/{project}", "--since", "1h", "--page-size", "3",
                   cwd=tmp_path)  # two pages
    # Phoenix keeps no resource, so the service is empty; everything else is as sent.
    assert {r["service"] for r in rows(pulled)} == {""}
    assert rows(pulled, drop=("service",)) == rows(live, drop=("service",))
    assert len(rows(live)) == 4 * 2 + 1  # four runs by two run scorers, one session
    assert "read 4 trace(s)" in pulled.stderr


def test_a_backfill_after_the_daemon_and_a_second_one_add_nothing(tmp_path: Path, phoenix: Phoenix) -> None:
    project = f"pull-{uuid.uuid4().hex[:8]}"
    body, trace_id, span_id = agent_trace_body("I do not know.", {"openinference.project.name": project})
    config = phoenix_config(phoenix)
    daemon = Daemon(tmp_path, config, env={"PHOENIX_API_KEY": "", **FAST_RETRIES}).start()
    try:  # the daemon scores the run live, forwarding its spans to Phoenix
        post_body(daemon.traces_url, body)
        poll(lambda: len(phoenix.annotations([span_id], project)) == 2, 90, "the daemon's two annotations")
        poll(lambda: len(phoenix.spans(trace_id, project)) == 4, 60, "the run's spans and two evaluation spans")
    finally:
        assert daemon.stop() == 0
    before = sorted((a["id"], a["name"], a["result"]["score"]) for a in phoenix.annotations([span_id], project))
    assert len(before) == 2 and all(item[0] for item in before)  # ids the backend gave

    (tmp_path / "backfill.toml").write_text(config)
    for again in ((), ("--rescore",)):
        done = score("--from", f"phoenix+{phoenix.url}/{project}", "--export", "--config", "backfill.toml", *again,
                     cwd=tmp_path, scorers=("relevance", "brevity"), env={"PHOENIX_API_KEY": ""})
        assert done.returncode == 0, done.stderr
        if again:  # scored again, sent with the daemon's ids
            assert "exported 2 score(s)" in done.stderr and "skipped" not in done.stderr
        else:  # the daemon's evaluation spans are in the trace read: nothing is scored twice
            assert "skipped 2 score(s) already in the backend" in done.stderr and "exported 0 score(s)" in done.stderr
            assert done.stdout == ""
        after = sorted((a["id"], a["name"], a["result"]["score"]) for a in phoenix.annotations([span_id], project))
        assert after == before  # the same annotations, updated in place: none added
        spans = phoenix.spans(trace_id, project)
        assert sorted(s["name"] for s in spans) == ["chat gpt-4o-mini", "evaluation Brevity",
                                                    "evaluation Relevance", "invoke_agent support"]
    # Phoenix's own filter finds the low run once.
    found = phoenix.graphql(
        "query ($p: String!) { getProjectByName(name: $p) { spans(first: 10, filterCondition: "
        "\"annotations['Relevance'].score < 0.5\") { edges { node { context { spanId } } } } } }", p=project)
    assert [e["node"]["context"]["spanId"] for e in found["getProjectByName"]["spans"]["edges"]] == [span_id]


def session_annotation(phoenix: Phoenix, project: str, session_id: str) -> dict[str, Any] | None:
    """The one session annotation of ``session_id`` (None before there is one, or a project)."""
    reply = httpx.get(f"{phoenix.url}/v1/projects/{project}/session_annotations",
                      params={"session_ids": session_id}, timeout=30)
    if reply.status_code == 404 and "not found" in reply.text:  # no span of the project yet
        return None
    assert reply.status_code == 200, reply.text
    found = reply.json()["data"]
    assert len(found) <= 1, found
    return found[0] if found else None


def evaluation_spans(phoenix: Phoenix, project: str) -> dict[str, str]:
    """The project's evaluation spans: span id -> name."""
    return {s["context"]["span_id"]: s["name"] for s in phoenix.spans_of_project(project)
            if s["name"].startswith("evaluation ")}


def test_a_backfill_of_sessions_the_daemon_scored_adds_no_score_and_never_lowers_their_revision(
        tmp_path: Path, phoenix: Phoenix) -> None:
    """The daemon scores a conversation (revision 1), a late turn reopens it (revision 2); a
    backfill from Phoenix, whose spans keep no service name, then finds it scored and adds
    nothing, and with ``--rescore`` sends the same scores again: the same evaluation spans (no new
    one), the session annotation still at revision 2 with the daemon's run id."""
    project, session = f"sessions-{uuid.uuid4().hex[:8]}", f"chat-{uuid.uuid4().hex[:12]}"
    turns = conversation_turns(session, ["Paris.", "About 2.1 million people.", "The Louvre."],
                               {"openinference.project.name": project})
    config = f'[[scorers]]\nref = "{SCORERS}:turns"\n[sessions]\nidle_s = 1.0\n' + phoenix_config(phoenix)
    daemon = Daemon(tmp_path, config, env={"PHOENIX_API_KEY": "", **FAST_RETRIES}).start()

    def revision() -> str | None:
        found = session_annotation(phoenix, project, session)
        return None if found is None else str(found["metadata"]["revision"])

    try:
        for turn in turns[:2]:
            post_body(daemon.traces_url, turn.body)
        poll(lambda: revision() == "1", 90, "the session's first score")
        post_body(daemon.traces_url, turns[2].body)  # a late turn reopens it
        poll(lambda: revision() == "2", 90, "the session's second revision")
        # Three runs by two run scorers, and the conversation's two revisions.
        poll(lambda: len(evaluation_spans(phoenix, project)) == 8, 60, "the daemon's eight evaluation spans")
    finally:
        assert daemon.stop() == 0
    spans_before = evaluation_spans(phoenix, project)
    annotation = session_annotation(phoenix, project, session)
    assert annotation is not None and annotation["metadata"]["turns"] == "3"

    (tmp_path / "backfill.toml").write_text(config)
    source = ("--from", f"phoenix+{phoenix.url}/{project}", "--export", "--config", "backfill.toml")
    done = score(*source, cwd=tmp_path, env={"PHOENIX_API_KEY": ""})
    assert done.returncode == 0, done.stderr
    assert "skipped 7 score(s) already in the backend" in done.stderr, done.stderr  # 3 runs x 2, 1 session
    assert "exported 0 score(s)" in done.stderr and done.stdout == ""

    # Scored again: the same ids. A scorer the daemon never ran (Witness) goes in the same export,
    # after the others: once Phoenix shows its spans it has taken all of the backfill's.
    done = score(*source, "--rescore", cwd=tmp_path, env={"PHOENIX_API_KEY": ""},
                 scorers=("relevance", "brevity", "turns", "witness"))
    assert done.returncode == 0, done.stderr
    assert "exported 10 score(s)" in done.stderr, done.stderr
    session_rows = [r for r in rows(done) if r["scorer"] == "turns"]
    assert [(r["session_id"], r["score"]) for r in session_rows] == [(session, 0.3)]
    poll(lambda: sum(name == "evaluation Witness" for name in evaluation_spans(phoenix, project).values()) == 3,
         60, "the backfill's Witness spans")
    after = evaluation_spans(phoenix, project)
    assert {k: v for k, v in after.items() if v != "evaluation Witness"} == spans_before
    updated = session_annotation(phoenix, project, session)
    assert updated is not None and updated["id"] == annotation["id"]
    assert (updated["metadata"]["revision"], updated["metadata"]["turns"]) == ("2", "3")
    assert updated["metadata"]["run_id"] == annotation["metadata"]["run_id"]  # the daemon's session run id
    assert updated["metadata"]["evaluation_span_id"] == annotation["metadata"]["evaluation_span_id"]


async def test_a_backfill_run_again_pays_no_judge_call_for_what_it_scored(
        tmp_path: Path, phoenix: Phoenix, server: Any) -> None:
    """A backfill of four runs and a conversation by judge scorers calls the judge five times and
    exports the scores to Phoenix; run again it reads them back with the traces and calls the
    judge no more; with ``--rescore`` it calls it five times again."""
    project = f"judged-{uuid.uuid4().hex[:8]}"
    resource = {"openinference.project.name": project}
    bodies = [agent_trace_body("The capital of France is Paris.", resource)[0],
              agent_trace_body("I do not know.", resource)[0]]
    bodies += [t.body for t in conversation_turns(f"conv-{uuid.uuid4().hex[:8]}", ["Paris.", "Lyon."], resource)]
    for body in bodies:
        await asyncio.to_thread(post_body, f"{phoenix.url}/v1/traces", body)
    await asyncio.to_thread(poll, lambda: len(phoenix.spans_of_project(project)) == 8, 60, "the agent's spans")
    (tmp_path / "backfill.toml").write_text(phoenix_config(phoenix))
    env = {"PHOENIX_API_KEY": "", "TRACESCORE_TEST_JUDGE_URL": f"{server.url}/v1"}
    source = ("--from", f"phoenix+{phoenix.url}/{project}", "--export", "--config", "backfill.toml")
    judges = ("judged", "judged_conversation")

    done = await score_async(*source, cwd=tmp_path, scorers=judges, env=env)
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 5 and "exported 5 score(s)" in done.stderr  # 4 runs, 1 session
    await asyncio.to_thread(poll, lambda: len(evaluation_spans(phoenix, project)) == 5, 60, "the five scores")

    server.reset_stats()
    done = await score_async(*source, cwd=tmp_path, scorers=judges, env=env)
    assert done.returncode == 0, done.stderr
    assert server.requests == []  # nothing paid twice
    assert "skipped 5 score(s) already in the backend" in done.stderr and done.stdout == ""

    done = await score_async(*source, "--rescore", cwd=tmp_path, scorers=judges, env=env)
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 5 and "exported 5 score(s)" in done.stderr
    assert len(rows(done)) == 5


def test_an_unknown_project_is_one_line_and_exit_2(tmp_path: Path, phoenix: Phoenix) -> None:
    done = score("--from", f"phoenix+{phoenix.url}/no-such-project", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"tracescore: GET {phoenix.url}/v1/projects/no-such-project: HTTP 404: Project with name no-such-project "
        "not found"]
    assert done.stdout == "" and not (tmp_path / ".tracescore").exists()  # nothing scored, no cursor
