"""``tracescore score --from langfuse+URL`` against the Langfuse test server (its public API's
shapes): agent traces in over OTLP, the same runs and scores out, scores written back once,
pages, retries, ``--resume`` and one-line errors (SPEC §10)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from conversation_traces import emit_turn
from langfuse_server import LangfuseServer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_process import cli

SCORERS = Path(__file__).parent / "scorers_for_tests.py"
KEYS = {"LANGFUSE_PUBLIC_KEY": "pk-lf-test", "LANGFUSE_SECRET_KEY": "sk-lf-test"}


async def agent_sends(server: LangfuseServer, tmp_path: Path) -> list[Path]:
    """A three-turn conversation and a turn of no session, each exported by the SDK's OTLP/HTTP
    exporter to Langfuse, and saved as the OTLP file the daemon would have received."""
    auth = base64.b64encode(f"{server.public_key}:{server.secret_key}".encode()).decode()
    exporter = OTLPSpanExporter(endpoint=f"{server.url}/api/public/otel/v1/traces", timeout=10,
                                headers={"Authorization": f"Basic {auth}"})
    files = []
    for i, (session, index) in enumerate((("c1", 0), ("c1", 1), ("c1", 2), (None, 0))):
        memory = InMemorySpanExporter()
        emit_turn(memory, session, index)
        spans = memory.get_finished_spans()
        files.append(tmp_path / f"turn{i}.pb")
        files[-1].write_bytes(encode_spans(spans).SerializeToString())
        assert (await asyncio.to_thread(exporter.export, spans)).name == "SUCCESS"  # blocking: off the loop
    return files


async def score(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    return await cli("score", *args, "--scorer", f"{SCORERS}:answer_length", "--scorer", f"{SCORERS}:turn_count",
                     "--format", "jsonl", cwd=cwd, env={**KEYS, **(env or {})}, timeout=120)


def rows(out: str) -> list[dict]:
    return sorted((json.loads(line) for line in out.splitlines()), key=lambda r: (r["trace_id"], r["scorer"]))


async def test_runs_pulled_from_langfuse_are_the_runs_sent_and_score_the_same(
        tmp_path: Path, langfuse: LangfuseServer) -> None:
    files = await agent_sends(langfuse, tmp_path)
    code, live, err = await score(*map(str, files), cwd=tmp_path)
    assert code == 0, err
    code, pulled, err = await score("--from", f"langfuse+{langfuse.url}", "--since", "1h", "--page-size", "3",
                                    cwd=tmp_path)
    assert code == 0, err
    assert rows(pulled) == rows(live)
    assert len(rows(live)) == 4 + 1  # four runs, one session
    assert "read 4 trace(s)" in err and "1 session(s)" in err


async def test_scores_go_back_with_the_daemons_ids_and_twice_adds_nothing(
        tmp_path: Path, langfuse: LangfuseServer) -> None:
    await agent_sends(langfuse, tmp_path)
    (tmp_path / "ts.toml").write_text(f'[sinks.langfuse]\nhost = "{langfuse.url}"\n')
    seen = []
    for _ in range(2):
        code, _, err = await score("--from", f"langfuse+{langfuse.url}", "--export", "--config", "ts.toml",
                                   cwd=tmp_path)
        assert code == 0, err
        assert "exported 5 score(s)" in err
        seen.append(sorted(langfuse.scores))
    assert seen[0] == seen[1] and len(seen[0]) == 5  # four run scores and one session score, once each
    assert len(langfuse.by_session()) == 1


async def test_an_interrupted_backfill_resumes_from_its_cursor(tmp_path: Path, langfuse: LangfuseServer) -> None:
    await agent_sends(langfuse, tmp_path)
    (tmp_path / "ts.toml").write_text(f'[sinks.langfuse]\nhost = "{langfuse.url}"\n')
    args = ("--from", f"langfuse+{langfuse.url}", "--page-size", "1", "--cursor", "c.json", "--export",
            "--config", "ts.toml")
    langfuse.garbage_after = 4  # projects, traces page 1, its observations, traces page 2: then garbage
    code, out, err = await score(*args, cwd=tmp_path)
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith(f"tracescore: GET {langfuse.url}/api/public/v2/observations: "
                                                   "the answer is not JSON")
    cursor = json.loads((tmp_path / "c.json").read_text())
    assert (cursor["pages"], cursor["traces"], cursor["done"], cursor["token"]) == (1, 1, False, "2")
    assert len(rows(out)) == 1 and len(langfuse.scores) == 1  # the first page only: scored and sent
    langfuse.garbage_after = None
    code, out, err = await score(*args, "--resume", cwd=tmp_path)
    assert code == 0, err
    assert json.loads((tmp_path / "c.json").read_text())["done"] is True
    assert len(langfuse.scores) == 5  # the other three runs and the session, nothing twice
    code, out, err = await score(*args, "--resume", cwd=tmp_path)
    assert (code, out) == (0, "") and "is complete" in err


async def test_retries_honour_retry_after_and_the_filter_is_passed_through(
        tmp_path: Path, langfuse: LangfuseServer) -> None:
    await agent_sends(langfuse, tmp_path)
    langfuse.fail_next = [429, 503]  # Retry-After: 0
    condition = '[{"type": "string", "column": "name", "operator": "=", "value": "invoke_agent support"}]'
    code, out, err = await score("--from", f"langfuse+{langfuse.url}", "--filter", condition, cwd=tmp_path)
    assert code == 0, err
    assert "retry 1/5" in err and "retry 2/5" in err
    assert langfuse.filters == [condition]


@pytest.mark.parametrize(("change", "expected"), [
    ({"LANGFUSE_SECRET_KEY": "sk-wrong"}, "api/public/projects: HTTP 401: Invalid credentials."),
    ({"garbage": True}, "api/public/projects: the answer is not JSON: '<html>gateway</html>'"),
])
async def test_a_wrong_key_or_a_garbage_answer_is_one_line_and_exit_2(
        tmp_path: Path, langfuse: LangfuseServer, change: dict, expected: str) -> None:
    await agent_sends(langfuse, tmp_path)
    langfuse.garbage = bool(change.pop("garbage", False))
    code, out, err = await score("--from", f"langfuse+{langfuse.url}", cwd=tmp_path, env=change)
    assert (code, out) == (2, "")
    (line,) = err.strip().splitlines()
    assert line.startswith(f"tracescore: GET {langfuse.url}/") and expected in line
    assert "sk-" not in line and not (tmp_path / ".tracescore").exists()


async def test_keys_in_the_url_are_used_and_never_printed(tmp_path: Path, langfuse: LangfuseServer) -> None:
    url = langfuse.url.replace("http://", "http://pk-lf-test:sk-lf-wrong@")
    code, _, err = await score("--from", f"langfuse+{url}", cwd=tmp_path)
    assert code == 2 and "HTTP 401" in err and "sk-lf-wrong" not in err


JUDGED = '''
import os
from scorers import Judge, create_scorer
judged = create_scorer(id="judged", description="judge", type="agent",
                       judge=Judge(model="openai/gpt-4o-mini", instructions="Grade.",
                                   model_settings={"api_base": os.environ["TS_TEST_JUDGE_URL"], "api_key": "k"}),
                       ).generate_score(description="score", create_prompt=lambda run: f"Score: {run.output[-1].content}")
'''


async def test_estimate_with_from_prices_the_pulled_runs_sends_nothing_and_writes_no_cursor(
        tmp_path: Path, langfuse: LangfuseServer) -> None:
    """SPEC §10: ``--estimate`` (§8) works on what ``--from`` pulls: a judge call per run
    counted, none sent, no cursor left behind (an estimate scores nothing)."""
    from llm_server import LLMTestServer

    await agent_sends(langfuse, tmp_path)
    (tmp_path / "judged.py").write_text(JUDGED)
    llm = await LLMTestServer().start()
    try:
        code, out, err = await cli("score", "--from", f"langfuse+{langfuse.url}", "--since", "1h", "--page-size", "3",
                                   "--scorer", f"{tmp_path / 'judged.py'}:judged", "--estimate", "--format", "jsonl",
                                   cwd=tmp_path, env={**KEYS, "TS_TEST_JUDGE_URL": llm.url + "/v1"}, timeout=120)
    finally:
        await llm.stop()
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert (row["scorer"], row["runs"], row["judge_calls"]) == ("judged", 4, 4)
    assert row["prompt_tokens"] > 0 and row["usd"] > 0
    assert not llm.requests  # nothing was sent to the judge
    assert not list((tmp_path / ".tracescore").rglob("*.json"))  # no cursor: nothing was scored
