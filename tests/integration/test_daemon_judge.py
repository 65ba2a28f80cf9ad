"""A judge scorer through the daemon against a fake OpenAI-compatible server (the network boundary)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server
import pytest
from daemon_harness import CaptureBackend, emit_agent_trace, wait_until
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

from collector.config import ScorerConfig, config_from_dict
from collector.service import Service
from collector.work.registry import RegisteredScorer, ScorerRegistry
from scorers import Judge, create_scorer


@pytest.fixture
async def llm() -> AsyncIterator[Any]:
    from scorers._judge_transport import aclose_judge_clients

    server = await llm_server.LLMTestServer().start()
    yield server
    await aclose_judge_clients()
    await server.stop()


async def _daemon(scorer: Any, tmp_path: Path, backend: CaptureBackend) -> Service:
    """A started daemon on SQLite with one scorer, exporting to ``backend`` (no forwarding)."""
    config = config_from_dict({
        "receiver": {"grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0"},
        "assembly": {"decision_wait": 0.2},
        "queue": {"url": f"sqlite:///{tmp_path / 'q.db'}"},
        "export": {"endpoint": backend.endpoint, "forward_spans": False},
    }, env={})
    service = Service(config, ScorerRegistry([RegisteredScorer(scorer, ScorerConfig(ref="tests:llm_quality"))]))
    await service.start()
    return service


async def _one_scored_run(service: Service, backend: CaptureBackend) -> tuple[str, str]:
    """Send one agent trace to the daemon and wait for its one score; returns its trace and span ids."""
    assert service.grpc is not None
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{service.grpc.port}", insecure=True)
    ids = await asyncio.to_thread(emit_agent_trace, exporter)
    await wait_until(lambda: len(backend.scores()) == 1, timeout=60, what="the judged score")  # litellm may be imported first
    return ids


async def test_judge_scores_carry_model_usage_and_survive_a_429(tmp_path: Path, llm: Any) -> None:
    Reply = llm_server.Reply
    llm.script(
        Reply.error(429, headers={"retry-after-ms": "20"}),
        Reply.json({"score": 0.8}, usage={"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127}),
    )
    judge = Judge(model="openai/gpt-4o-mini", instructions="You are a strict evaluator.",
                  model_settings={"api_base": llm.url + "/v1", "api_key": "test-key"})
    scorer = create_scorer(id="llm-quality", name="LLM quality", description="judged", type="agent",
                           judge=judge, version="1").generate_score(
        description="Rate the answer from 0 to 1",
        create_prompt=lambda run: f"Answer: {run.output[-1].content}\nRate it from 0 to 1.",
    )
    backend = await CaptureBackend().start()
    service = await _daemon(scorer, tmp_path, backend)
    try:
        trace_id, span_id = await _one_scored_run(service, backend)
        (score,) = backend.scores()
        attrs = score.event_attributes
        assert (score.span.trace_id.hex(), score.span.parent_span_id.hex()) == (trace_id, span_id)
        assert attrs["gen_ai.evaluation.score.value"] == 0.8
        assert attrs["tracescore.judge.model"] == "openai/gpt-4o-mini"
        assert attrs["tracescore.judge.usage.input_tokens"] == 120
        assert attrs["tracescore.judge.usage.output_tokens"] == 7
        assert attrs["tracescore.judge.cost_usd"] > 0  # litellm prices gpt-4o-mini from its local map
        assert len(llm.requests) == 2  # the 429, then the retried job's call
        assert "The capital of France is Paris." in llm.requests[-1].message_text("user")
        text = service.metrics.render().decode()
        assert 'tracescore_decisions_total{reason="retried",scorer="llm-quality"} 1.0' in text
        assert 'tracescore_judge_tokens_total{direction="input",model="openai/gpt-4o-mini"} 120.0' in text
        assert 'tracescore_judge_attempts_total{model="openai/gpt-4o-mini"} 2.0' in text
        assert 'tracescore_judge_errors_total{model="openai/gpt-4o-mini"} 1.0' in text
    finally:
        await service.shutdown()
        await backend.stop()


async def test_judge_requests_count_every_request_sent_processor_retries_included(
    tmp_path: Path, llm: Any,
) -> None:
    """Two 503s retried by an error processor, then a reply: one execution (one structured-output
    attempt), three requests: the metric and the span count requests sent, as their names say."""
    from scorers import StreamErrorRetryProcessor

    Reply = llm_server.Reply
    llm.script(Reply.error(503), Reply.error(503), Reply.json({"score": 0.5}))
    judge = Judge(model="openai/gpt-4o-mini", instructions="You are a strict evaluator.",
                  error_processors=[StreamErrorRetryProcessor(max_retries=3)],
                  model_settings={"api_base": llm.url + "/v1", "api_key": "test-key"})
    scorer = create_scorer(id="llm-quality", description="judged", type="agent", judge=judge).generate_score(
        description="Rate the answer from 0 to 1", create_prompt=lambda run: "Rate it from 0 to 1.")
    backend = await CaptureBackend().start()
    service = await _daemon(scorer, tmp_path, backend)
    try:
        await _one_scored_run(service, backend)
        (score,) = backend.scores()
        assert score.event_attributes["tracescore.judge.attempts"] == 3
        assert len(llm.requests) == 3
        text = service.metrics.render().decode()
        assert 'tracescore_judge_attempts_total{model="openai/gpt-4o-mini"} 3.0' in text
        assert 'tracescore_decisions_total{reason="retried",scorer="llm-quality"}' not in text
    finally:
        await service.shutdown()
        await backend.stop()


async def test_a_judge_without_a_key_dead_letters_its_job_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blockbuster: Any,
) -> None:
    """Issue 19, point 4: litellm reports a missing key as a retryable 500 ("Missing
    credentials"); the daemon takes it for what it is, a permanent error of the judge: one
    attempt, no processor or model retry, a dead letter naming the model and the variable."""
    # Without a key the call goes through litellm.acompletion, whose client set-up stats the
    # SSL certificate files on the event loop (litellm's own blocking call, not the daemon's).
    blockbuster.functions["os.stat"].can_block_in("litellm/llms/custom_httpx/http_handler.py",
                                                  "get_ssl_configuration")
    from collector.store.sqlite.dead_letters import SqliteDeadLetters
    from scorers import StreamErrorRetryProcessor

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = Judge(model="openai/gpt-4o-mini", instructions="You are a strict evaluator.",
                  error_processors=[StreamErrorRetryProcessor(max_retries=3)], model_settings={"max_retries": 2})
    scorer = create_scorer(id="keyless", description="judged", type="agent", judge=judge).generate_score(
        description="Rate the answer from 0 to 1", create_prompt=lambda run: "Rate it from 0 to 1.")
    backend = await CaptureBackend().start()
    service = await _daemon(scorer, tmp_path, backend)
    try:
        await _one_scored_run(service, backend)  # its failure span: exported once the job is dead
        (failure,) = backend.scores()
        text = service.metrics.render().decode()
    finally:
        await service.shutdown()
        await backend.stop()
    assert failure.attributes["error.type"] == "JudgeCredentialsError"
    admin = SqliteDeadLetters(str(tmp_path / "q.db"))
    (letter,) = await admin.letters()
    assert letter.attempts == 1 and letter.error_type == "JudgeCredentialsError"
    assert ("Judge model 'openai/gpt-4o-mini' has no credentials: the environment does not set OPENAI_API_KEY"
            in letter.message)
    assert 'tracescore_decisions_total{reason="retried",scorer="keyless"}' not in text
    assert 'tracescore_judge_attempts_total{model="openai/gpt-4o-mini"} 1.0' in text
