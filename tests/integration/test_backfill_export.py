"""``tracescore score FILES --export``: offline scores reach the OTLP endpoint and the sinks as the
daemon would send them, idempotently; what cannot be sent in time is reported (exit 1); files
that hold their scores are not scored again (``--rescore`` does, with the same ids)."""

from __future__ import annotations

from pathlib import Path

from conversation_traces import turn_body
from daemon_harness import CaptureBackend, agent_trace_body
from langfuse_server import LangfuseServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from serve_process import cli

SCORERS = Path(__file__).parent / "scorers_for_tests.py"


async def backfill(tmp_path: Path, config: str, *files: Path, export_timeout: str = "30") -> tuple[int, str]:
    path = tmp_path / "backfill.toml"
    path.write_text(config)
    code, _, err = await cli("score", *map(str, files), "--scorer", f"{SCORERS}:answer_length", "--format", "jsonl",
                             "--export", "--config", str(path), "--export-timeout", export_timeout,
                             env={"LF_SECRET": "sk-lf-test"}, timeout=120)
    return code, err


async def test_backfill_sends_the_daemons_span_and_sink_scores_and_twice_is_safe(tmp_path: Path) -> None:
    backend = await CaptureBackend().start()
    langfuse = await LangfuseServer().start()
    body, trace_id, span_id = agent_trace_body()
    saved = tmp_path / "run.pb"
    saved.write_bytes(body)
    config = (f'[export]\nendpoint = "{backend.endpoint}"\n'
              f'[sinks.langfuse]\nhost = "{langfuse.url}"\npublic_key = "{langfuse.public_key}"\n'
              'secret_key = "env:LF_SECRET"\n')
    try:
        for _ in range(2):
            code, err = await backfill(tmp_path, config, saved)
            assert code == 0, err
            assert "exported 1 score(s)" in err and "langfuse" in err
    finally:
        await backend.stop()
        await langfuse.stop()
    first, second = backend.scores()
    assert first.span.span_id == second.span.span_id  # the same span both times: one score in the backend
    assert (first.span.trace_id.hex(), first.span.parent_span_id.hex()) == (trace_id, span_id)
    assert first.service == "support-bot"
    assert first.attributes["tracescore.run.id"] and first.attributes["gen_ai.evaluation.score.value"] == 0.31
    run_span = next(s for s in agent_spans(body) if s.span_id.hex() == span_id)
    assert first.span.start_time_unix_nano == first.span.end_time_unix_nano == run_span.end_time_unix_nano
    assert langfuse.posts == 2 and len(langfuse.scores) == 1 and langfuse.refused == []


def agent_spans(body: bytes) -> list:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


async def test_what_cannot_be_sent_in_time_is_reported(tmp_path: Path) -> None:
    langfuse = await LangfuseServer().start()
    langfuse.down = True
    body, _, _ = agent_trace_body()
    saved = tmp_path / "run.pb"
    saved.write_bytes(body)
    config = (f'[sinks.langfuse]\nhost = "{langfuse.url}"\npublic_key = "pk-lf-test"\nsecret_key = "env:LF_SECRET"\n'
              'min_backoff_s = 0.1\nmax_backoff_s = 0.2\n')
    try:
        code, err = await backfill(tmp_path, config, saved, export_timeout="2")
    finally:
        await langfuse.stop()
    assert code == 1 and "1 score(s) not sent to the langfuse sink within 2s" in err


async def test_a_bad_config_fails_before_any_scoring(tmp_path: Path) -> None:
    body, _, _ = agent_trace_body()
    saved = tmp_path / "run.pb"
    saved.write_bytes(body)
    code, err = await backfill(tmp_path, '[sinks.phoenix]\nendpoint = "htp//nope"\n', saved)
    assert code == 2 and "sinks.phoenix.endpoint" in err


TUNABLE = '''from pathlib import Path

from scorers import create_scorer

tunable = create_scorer(id="tunable", name="Tunable", description="scores what tunable.score says", version="1"
                        ).generate_score(lambda run: float(Path("tunable.score").read_text()))
'''


async def test_a_run_scored_again_to_another_value_is_the_current_score_in_langfuse_and_otlp(tmp_path: Path) -> None:
    """The same run backfilled to 0.3, then (the scorer changed, same version) to 0.8, then 0.8
    again: Langfuse holds one score (same id and timestamp: upserted) whose value is 0.8 and whose
    metadata names the second evaluation span; the OTLP backend got a new span id for the new
    outcome, and the repeat is sent again under the same id (a duplicate, not a new outcome)."""
    scorer = tmp_path / "tunable_scorer.py"
    scorer.write_text(TUNABLE)
    backend = await CaptureBackend().start()
    langfuse = await LangfuseServer().start()
    body, _, _ = agent_trace_body()
    saved = tmp_path / "run.pb"
    saved.write_bytes(body)
    config = tmp_path / "backfill.toml"
    config.write_text(f'[export]\nendpoint = "{backend.endpoint}"\n'
                      f'[sinks.langfuse]\nhost = "{langfuse.url}"\npublic_key = "{langfuse.public_key}"\n'
                      'secret_key = "env:LF_SECRET"\n')
    latest: list[dict] = []
    try:
        for value in ("0.3", "0.8", "0.8"):
            (tmp_path / "tunable.score").write_text(value)
            code, _, err = await cli("score", str(saved), "--scorer", f"{scorer}:tunable", "--export",
                                     "--config", str(config), env={"LF_SECRET": "sk-lf-test"}, cwd=tmp_path,
                                     timeout=120)
            assert code == 0 and "exported 1 score(s)" in err, err
            latest.append(dict(next(iter(langfuse.scores.values()))))
    finally:
        await backend.stop()
        await langfuse.stop()
    assert len({(b["id"], b["timestamp"]) for b in langfuse.scores.values()}) == len(langfuse.scores) == 1
    assert [b["value"] for b in latest] == [0.3, 0.8, 0.8]
    spans = [s.span.span_id.hex() for s in backend.scores()]
    assert len(spans) == 3 and spans[0] != spans[1] and spans[1] == spans[2]  # a new outcome, then a repeat
    assert latest[-1]["metadata"]["evaluation_span_id"] == spans[1]


CONVERSATION_SCORER = '''from scorers import create_scorer

user_turns = create_scorer(id="user_turns", description="user messages in the conversation", version="1",
                           type="conversation").generate_score(lambda run: float(len(run.input.input_messages)))
'''


async def test_a_backfilled_conversation_lands_on_its_last_turn_and_its_langfuse_session(tmp_path: Path) -> None:
    """Three turn files of one session, scored and exported twice: one evaluation span in the last
    turn's trace naming the session (the same span both times), one Langfuse score with the
    session's id and no trace (upserted), as the daemon sends them."""
    from conversation_traces import turn_body

    scorer = tmp_path / "convo_scorer.py"
    scorer.write_text(CONVERSATION_SCORER)
    files, last = [], ("", "")
    for i in range(3):
        body, trace_id, span_id = turn_body("backfilled-chat", i)
        (tmp_path / f"turn{i}.pb").write_bytes(body)
        files.append(str(tmp_path / f"turn{i}.pb"))
        last = (trace_id, span_id)
    backend = await CaptureBackend().start()
    langfuse = await LangfuseServer().start()
    config = tmp_path / "backfill.toml"
    config.write_text(f'[export]\nendpoint = "{backend.endpoint}"\n'
                      f'[sinks.langfuse]\nhost = "{langfuse.url}"\npublic_key = "{langfuse.public_key}"\n'
                      'secret_key = "env:LF_SECRET"\n')
    try:
        for _ in range(2):
            code, out, err = await cli("score", *files, "--scorer", f"{scorer}:user_turns", "--format", "jsonl",
                                       "--export", "--config", str(config), env={"LF_SECRET": "sk-lf-test"},
                                       timeout=120)
            assert code == 0 and "exported 1 score(s)" in err, err
            assert '"session_id": "backfilled-chat"' in out
    finally:
        await backend.stop()
        await langfuse.stop()
    spans = backend.scores()
    assert len(spans) == 2 and spans[0].span.span_id == spans[1].span.span_id  # the same span, sent again
    score = spans[0]
    assert (score.span.trace_id.hex(), score.span.parent_span_id.hex()) == last
    assert (score.attributes["session.id"], score.attributes["tracescore.session.turns"]) == ("backfilled-chat", 3)
    assert score.attributes["gen_ai.evaluation.score.value"] == 3.0
    (body,) = langfuse.scores.values()
    assert body["sessionId"] == "backfilled-chat" and "traceId" not in body and body["value"] == 3.0


def backend_kept(*requests: bytes | ExportTraceServiceRequest) -> bytes:
    """What a backend that keeps no resource (Phoenix) gives back of these requests, as one OTLP file:
    every span, under one resource that names no service."""
    kept = ExportTraceServiceRequest()
    scope_spans = kept.resource_spans.add().scope_spans.add()
    for request in requests:
        parsed = ExportTraceServiceRequest.FromString(request) if isinstance(request, bytes) else request
        for rs in parsed.resource_spans:
            for ss in rs.scope_spans:
                scope_spans.spans.extend(ss.spans)
    return kept.SerializeToString()


async def test_files_holding_their_scores_are_not_scored_again_and_a_session_keeps_its_ids(tmp_path: Path) -> None:
    """A two-turn conversation backfilled to an OTLP backend; the backend's copy (agent spans and
    evaluation spans, no service name) scored again: everything is skipped as scored; with
    ``--rescore`` the same evaluation spans (ids, service) are sent again."""
    backend = await CaptureBackend().start()
    turns = [turn_body("chat-9", i) for i in range(2)]
    files = []
    for i, (body, _, _) in enumerate(turns):
        files.append(tmp_path / f"turn{i}.pb")
        files[-1].write_bytes(body)
    (tmp_path / "ts.toml").write_text(f'[export]\nendpoint = "{backend.endpoint}"\n')
    refs = ("--scorer", f"{SCORERS}:answer_length", "--scorer", f"{SCORERS}:turn_count")

    async def score(*args: str) -> tuple[str, str]:
        code, out, err = await cli("score", *args, *refs, "--format", "jsonl", "--export", "--config",
                                   str(tmp_path / "ts.toml"), timeout=120)
        assert code == 0, err
        return out, err

    try:
        _, err = await score(*map(str, files))
        assert "exported 3 score(s)" in err  # two runs, one session
        first = {s.span.span_id.hex(): s for s in backend.scores()}
        assert len(first) == 3
        kept = tmp_path / "kept" / "backend.pb"
        kept.parent.mkdir()
        kept.write_bytes(backend_kept(*(body for body, _, _ in turns), *backend.requests))

        out, err = await score(str(kept))
        assert out == "" and "skipped 3 score(s) already in the files" in err and "exported 0 score(s)" in err

        out, err = await score(str(kept), "--rescore")
        assert "exported 3 score(s)" in err and len(out.splitlines()) == 3
        again = {s.span.span_id.hex(): s for s in backend.scores()[3:]}
        assert again.keys() == first.keys()  # the same evaluation spans: the daemon's ids, nothing new
        session = next(s for s in again.values() if s.attributes.get("session.id") == "chat-9")
        assert session.service == "support-bot"  # the service its earlier scores named
        assert session.attributes["tracescore.run.id"] == first[session.span.span_id.hex()].attributes[
            "tracescore.run.id"]
    finally:
        await backend.stop()
