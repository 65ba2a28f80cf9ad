"""Providers other than openai/hosted_vllm go through ``litellm.acompletion``, one request per attempt."""

from __future__ import annotations

from typing import Any

import pytest
from judge_support import SCORE_SCHEMA, Reply

from scorers._judge import execute_judge_call
from scorers._judge_transport import route_for
from scorers._judge_types import Judge
from scorers.errors import JudgeError
from scorers.processors import StreamErrorRetryProcessor

MODELS = [
    "groq/llama-3.1-8b-instant",
    "together_ai/meta-llama/Llama-3-8b-chat-hf",
    "deepseek/deepseek-chat",
    "lm_studio/local-model",
    "ollama_chat/llama3",
]


def provider_judge(model: str, server: Any, **kw: Any) -> Judge:
    base = server.url if model.startswith("ollama") else server.url + "/v1"
    return Judge(model=model, instructions="Grade.", model_settings={"api_base": base, "api_key": "k"}, **kw)


@pytest.mark.parametrize("model", MODELS)
async def test_provider_round_trip(server: Any, model: str) -> None:
    judge = provider_judge(model, server)
    assert not route_for(model, judge.model_settings).fast
    server.script(Reply.json({"score": 0.4}))
    value, execution = await execute_judge_call(judge, "Score it.", output_schema=SCORE_SCHEMA)
    assert value == {"score": 0.4}
    assert execution.provider == model.split("/")[0]
    assert execution.usage.total_tokens == 15
    assert len(server.requests) == 1
    sent = server.requests[0]
    assert any("Score it." in str(m.get("content")) for m in sent.messages)


@pytest.mark.parametrize("model", MODELS)
async def test_provider_error_is_one_request_then_retried_by_processor(server: Any, model: str) -> None:
    server.script(Reply.error(500))
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(provider_judge(model, server), "p", output_schema=None)
    assert len(server.requests) == 1
    assert caught.value.retryable is True

    server.reset_stats()
    server.script(Reply.error(503), Reply.text("ok"))
    value, execution = await execute_judge_call(
        provider_judge(model, server, error_processors=[StreamErrorRetryProcessor()]), "p",
        output_schema=None)
    assert value == "ok" and len(server.requests) == 2
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 1, 2)


async def test_known_model_cost_through_litellm(server: Any) -> None:
    server.script(Reply.text("ok"))
    _, execution = await execute_judge_call(provider_judge("deepseek/deepseek-chat", server), "p",
                                            output_schema=None)
    assert execution.cost_usd is not None and execution.cost_usd > 0


async def test_a_replaced_acompletion_sees_every_call(server: Any, settings: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """SPEC: all judge calls go through litellm.acompletion. The shared-session shortcut for
    OpenAI-compatible providers steps aside once someone replaced it (a test's mock)."""
    from scorers._judge_transport import ensure_litellm

    litellm = await ensure_litellm()
    original = litellm.acompletion
    seen: list[str] = []

    async def recording(**kwargs: Any) -> Any:
        seen.append(kwargs["model"])
        return await original(**kwargs)

    server.script(Reply.text("fine"))
    judge = Judge(model="openai/gpt-4o-mini", instructions="Grade.", model_settings=settings)
    assert route_for("openai/gpt-4o-mini", settings).fast  # the shortcut applies to this model
    monkeypatch.setattr(litellm, "acompletion", recording)
    value, execution = await execute_judge_call(judge, "Hi", output_schema=None)
    assert value == "fine" and len(seen) == 1 and seen[0].endswith("gpt-4o-mini")
    assert len(server.requests) == 1 and execution.attempt_count == 1
