"""``tracescore score --from phoenix+URL/PROJECT`` against a real Phoenix: agent traces in, the
same runs and scores out, scores written back once however often it runs (SPEC §10)."""

from __future__ import annotations

import uuid
from pathlib import Path

from backends_support import Daemon, Phoenix, agent_trace_body, conversation_turns, poll, post_body
from pull_support import rows, score
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
    for _ in range(2):
        done = score("--from", f"phoenix+{phoenix.url}/{project}", "--export", "--config", "backfill.toml",
                     cwd=tmp_path, scorers=("relevance", "brevity"), env={"PHOENIX_API_KEY": ""})
        assert done.returncode == 0, done.stderr
        assert "exported 2 score(s)" in done.stderr
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


def test_an_unknown_project_is_one_line_and_exit_2(tmp_path: Path, phoenix: Phoenix) -> None:
    done = score("--from", f"phoenix+{phoenix.url}/no-such-project", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"tracescore: GET {phoenix.url}/v1/projects/no-such-project: HTTP 404: Project with name no-such-project "
        "not found"]
    assert done.stdout == "" and not (tmp_path / ".tracescore").exists()  # nothing scored, no cursor
