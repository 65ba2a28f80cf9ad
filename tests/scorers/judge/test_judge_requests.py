"""What the judge sends, and what it returns, against the real fake server."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from judge_support import SCORE_SCHEMA, Reply
from pydantic import BaseModel

from scorers._judge import execute_judge_call
from scorers._judge_types import Judge
from scorers._structured_output import INLINE_PREFIX, INLINE_SUFFIX, SYSTEM_PREFIX, SYSTEM_SUFFIX


class Verdict(BaseModel):
    verdict: str
    confidence: float | None = None


def judge(settings: dict[str, Any], model: str = "openai/gpt-4o-mini", **kw: Any) -> Judge:
    return Judge(model=model, instructions="You are an expert evaluator", model_settings=settings, **kw)


def compact(schema: dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"))


def test_importing_scorers_does_not_import_litellm() -> None:
    code = "import sys, scorers, scorers.processors, scorers._judge; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_plain_text_reply_and_messages(server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.text("The answer is relevant."))
    value, execution = await execute_judge_call(judge(settings), "Explain the score.", output_schema=None)
    assert value == "The answer is relevant."
    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["Authorization"] == "Bearer test-key"
    assert sent.body["model"] == "gpt-4o-mini"
    assert sent.messages == [
        {"role": "system", "content": "You are an expert evaluator"},
        {"role": "user", "content": "Explain the score."},
    ]
    assert "response_format" not in sent.body
    assert execution.status == "success"
    assert execution.output == "The answer is relevant."
    assert execution.raw_output == "The answer is relevant."
    assert (execution.model, execution.provider, execution.attempt_count) == (
        "openai/gpt-4o-mini", "openai", 1)


async def test_auto_uses_native_strict_schema_for_openai(server: Any, settings: dict[str, Any],
                                                         transport: str) -> None:
    server.script(Reply.json({"verdict": "yes"}))
    value, execution = await execute_judge_call(judge(settings), "Judge it.", output_schema=Verdict)
    assert isinstance(value, Verdict) and value.verdict == "yes"
    assert execution.output == {"verdict": "yes", "confidence": None}
    body = server.requests[0].body
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Verdict"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == ["confidence", "verdict"]
    # Native: no schema text in the messages.
    assert server.requests[0].messages[0]["content"] == "You are an expert evaluator"
    assert server.requests[0].messages[1]["content"] == "Judge it."


async def test_auto_injects_inline_when_litellm_knows_no_native_support(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.json({"score": 0.25}))
    value, _ = await execute_judge_call(judge(settings, "hosted_vllm/my-model"), "Score it.",
                                        output_schema=SCORE_SCHEMA)
    assert value == {"score": 0.25}
    sent = server.requests[0]
    assert "response_format" not in sent.body
    assert sent.body["model"] == "my-model"
    assert sent.message_text("system") == "You are an expert evaluator"
    assert sent.message_text("user") == (
        f"Score it.\n\n{INLINE_PREFIX}\n\n{compact(SCORE_SCHEMA)}\n\n{INLINE_SUFFIX}")


@pytest.mark.parametrize("setting", [True, "system"])
async def test_system_injection(server: Any, settings: dict[str, Any], setting: Any) -> None:
    server.script(Reply.json({"score": 1}))
    await execute_judge_call(judge(settings, json_prompt_injection=setting), "Score it.",
                             output_schema=SCORE_SCHEMA)
    sent = server.requests[0]
    assert "response_format" not in sent.body
    assert sent.message_text("system") == (
        f"You are an expert evaluator\n\n{SYSTEM_PREFIX}\n{compact(SCORE_SCHEMA)}\n{SYSTEM_SUFFIX}")
    assert sent.message_text("user") == "Score it."


async def test_inline_injection_on_a_native_model(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.json({"score": 1}))
    await execute_judge_call(judge(settings, json_prompt_injection="inline"), "Score it.",
                             output_schema=SCORE_SCHEMA)
    sent = server.requests[0]
    assert "response_format" not in sent.body
    assert sent.message_text("user").endswith(INLINE_SUFFIX)
    assert sent.message_text("system") == "You are an expert evaluator"


async def test_false_is_native_only_and_not_strict_for_non_openai(
        server: Any, settings: dict[str, Any], transport: str) -> None:
    server.script(Reply.json({"score": 1}))
    await execute_judge_call(judge(settings, "hosted_vllm/my-model", json_prompt_injection=False),
                             "Score it.", output_schema=SCORE_SCHEMA)
    sent = server.requests[0]
    fmt = sent.body["response_format"]
    assert fmt["json_schema"]["schema"] == SCORE_SCHEMA
    assert "strict" not in fmt["json_schema"]
    assert sent.message_text("user") == "Score it."


async def test_model_settings_pass_through(server: Any, transport: str) -> None:
    settings = {"api_base": server.url + "/v1", "api_key": "secret-1", "temperature": 0.1,
                "max_tokens": 64, "seed": 7, "extra_headers": {"X-Trace": "abc"}}
    server.script(Reply.text("ok"))
    await execute_judge_call(judge(settings), "Hi", output_schema=None)
    sent = server.requests[0]
    assert (sent.body["temperature"], sent.body["max_tokens"], sent.body["seed"]) == (0.1, 64, 7)
    assert sent.headers["Authorization"] == "Bearer secret-1"
    assert sent.headers["X-Trace"] == "abc"


@pytest.mark.parametrize(
    "reply",
    [
        Reply.fenced({"score": 0.5}),
        Reply.text('Sure. The verdict is {"score": 0.5} as requested.'),
        Reply.text('```\n{"score": 0.5}\n```'),
        Reply.text('  {"score": 0.5}\n'),
    ],
    ids=["fenced-json", "prose", "bare-fence", "whitespace"],
)
async def test_tolerant_parsing(server: Any, settings: dict[str, Any], reply: Any) -> None:
    server.script(reply)
    value, execution = await execute_judge_call(judge(settings), "Score it.", output_schema=SCORE_SCHEMA)
    assert value == {"score": 0.5}
    assert execution.attempt_count == 1 and len(server.requests) == 1
    assert execution.raw_output == reply.content


async def test_usage_and_cost_from_litellm_price_map(server: Any, settings: dict[str, Any],
                                                     transport: str) -> None:
    import litellm

    usage = {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}
    server.script(Reply.json({"score": 1}, usage=usage))
    _, execution = await execute_judge_call(judge(settings), "Score it.", output_schema=SCORE_SCHEMA)
    assert (execution.usage.input_tokens, execution.usage.output_tokens,
            execution.usage.total_tokens) == (1200, 300, 1500)
    expected = sum(litellm.cost_per_token(model="gpt-4o-mini", custom_llm_provider="openai",
                                          prompt_tokens=1200, completion_tokens=300))
    assert execution.cost_usd == pytest.approx(expected)
    assert execution.duration_ms >= 0


async def test_unknown_model_has_no_cost(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.text("ok"))
    _, execution = await execute_judge_call(judge(settings, "hosted_vllm/house-model"), "Hi",
                                            output_schema=None)
    assert execution.cost_usd is None
    assert execution.usage.total_tokens == 15
    assert execution.provider == "hosted_vllm"


async def test_dict_schema_result_is_a_validated_dict(server: Any, settings: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
              "required": ["claims"]}
    server.script(Reply.json({"claims": ["a", "b"]}))
    value, execution = await execute_judge_call(judge(settings), "Extract.", output_schema=schema)
    assert value == {"claims": ["a", "b"]}
    assert execution.output == {"claims": ["a", "b"]}
    strict = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert strict["additionalProperties"] is False and strict["required"] == ["claims"]


def test_strict_schema_for_nested_pydantic_models() -> None:
    from scorers._structured_output import SchemaSpec

    class Item(BaseModel):
        name: str
        note: str | None = None

    class Report(BaseModel):
        items: list[Item]
        summary: str = "none"

    fmt = SchemaSpec.of(Report).response_format(strict=True)["json_schema"]
    schema = fmt["schema"]
    item = schema["$defs"]["Item"]
    assert schema["required"] == ["items", "summary"] and schema["additionalProperties"] is False
    assert item["required"] == ["name", "note"] and item["additionalProperties"] is False
    assert "default" not in item["properties"]["note"]  # default null is rejected by OpenAI
    assert Report.model_json_schema()["$defs"]["Item"].get("required") == ["name"]  # untouched


async def test_array_schema_is_wrapped_for_native_output(server: Any, settings: dict[str, Any],
                                                         transport: str) -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    server.script(Reply.json({"elements": ["a", "b"]}))
    value, execution = await execute_judge_call(judge(settings), "List.", output_schema=schema)
    assert value == ["a", "b"] and execution.output == ["a", "b"]
    sent = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert sent == {"type": "object", "properties": {"elements": schema}, "required": ["elements"],
                    "additionalProperties": False}


async def test_root_model_enum_is_wrapped_as_result(server: Any, settings: dict[str, Any]) -> None:
    from enum import StrEnum

    from pydantic import RootModel

    class Label(StrEnum):
        good = "good"
        bad = "bad"

    server.script(Reply.json({"result": "good"}))
    value, _ = await execute_judge_call(judge(settings), "Label it.", output_schema=RootModel[Label])
    assert value.root is Label.good
    sent = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert sent["required"] == ["result"] and "$defs" in sent


def test_routes_never_print_the_api_key() -> None:
    from scorers._judge_transport import route_for

    route = route_for("openai/gpt-4o-mini", {"api_base": "http://127.0.0.1:9/v1", "api_key": "sk-secret-1"})
    assert "sk-secret-1" not in repr(route)
    assert route.headers["Authorization"] == "Bearer sk-secret-1"


async def test_unknown_provider_is_a_judge_error_without_requests(server: Any, settings: dict[str, Any],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from scorers.errors import JudgeError

    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge(settings, "nosuchprovider/model"), "p", output_schema=None)
    assert "nosuchprovider/model" in str(caught.value)
    assert caught.value.execution is not None and caught.value.execution.attempt_count == 0
    assert caught.value.retryable is False
    assert server.requests == []
    assert "Provider List" not in capsys.readouterr().out  # litellm's banner stays silent


@pytest.mark.parametrize("usage", [(120, 12, 0), (5000, 300, 1000), (250_000, 2000, 0), (1, 1, 0)])
def test_cost_from_per_token_prices_equals_litellm(usage: tuple[int, int, int]) -> None:
    """A linearly priced model's cost comes from per-token prices derived from litellm,
    identical to asking litellm's cost_per_token each time."""
    from scorers._judge_transport import litellm_module, route_for
    from scorers._judge_types import JudgeUsage

    litellm = litellm_module()
    route = route_for("openai/gpt-4o-mini", {"api_key": "k", "api_base": "http://127.0.0.1:9/v1"})
    prompt, completion, cached = usage
    cost = route.cost_usd(JudgeUsage(input_tokens=prompt, output_tokens=completion, cached_input_tokens=cached))
    assert route._unit_prices is not None
    expected = sum(litellm.cost_per_token(model="gpt-4o-mini", custom_llm_provider="openai",
                                          prompt_tokens=prompt, completion_tokens=completion,
                                          cache_read_input_tokens=cached))
    assert cost == pytest.approx(expected, rel=1e-12)


def test_a_tiered_price_is_asked_of_litellm_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from scorers._judge_transport import Route, litellm_module
    from scorers._judge_types import JudgeUsage

    def tiered(*, prompt_tokens: int, completion_tokens: int, **_: Any) -> tuple[float, float]:
        rate = 1e-6 if prompt_tokens <= 200_000 else 2e-6  # the whole prompt at the higher rate
        return prompt_tokens * rate, completion_tokens * 4e-6

    monkeypatch.setattr(litellm_module(), "cost_per_token", tiered)
    route = Route(model="x/tiered", model_name="tiered", provider="x", settings={})
    assert route.cost_usd(JudgeUsage(input_tokens=300_000, output_tokens=10)) == pytest.approx(0.6 + 4e-5)
    assert route._unit_prices is None  # the samples showed the tier: no per-token shortcut
    assert route.cost_usd(JudgeUsage(input_tokens=100, output_tokens=10)) == pytest.approx(1e-4 + 4e-5)
