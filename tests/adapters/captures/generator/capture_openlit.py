"""Capture an OpenLIT-traced agent: ``python capture_openlit.py SCENARIO OUTDIR``.

A hand-written agent, as OpenLIT's docs show one: the OpenAI client on `fake_openai`
(instrumented by ``openlit.init()``, content capture on by default), a tool-call loop in a
function decorated with ``@openlit.trace``, and the tool decorated the same way. S2 runs two
turns, the second with the first turn's messages as history and
``openlit.inject_additional_attributes`` naming the session; the capture holds the second.
Needs openlit (which pins openai < 3) and opentelemetry-exporter-otlp-proto-common.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import fake_openai
import groundtruth

PACKAGES = ["openlit", "opentelemetry-api", "opentelemetry-semantic-conventions"]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
NOTES = (
    "`weather_agent` (CLIENT, scope openlit: the @openlit.trace span; no gen_ai.operation.name; "
    "gen_ai.output.messages = the function's return value as plain text, function.args / function.kwargs = "
    "Python str() of the call's arguments) -> `chat gpt-4o-mini` (CLIENT, scope openlit.otel.tracing, one per "
    "model request: gen_ai.input.messages / gen_ai.output.messages as JSON parts, gen_ai.system_instructions) "
    "and `get_weather` (the tool's @openlit.trace span). The second request's gen_ai.input.messages leaves out "
    "the assistant's tool-call message (OpenLIT drops a message without text parts); its tool result is there."
)


def main(scenario: str, outdir: str) -> None:
    fake_openai.ANSWERS[groundtruth.HISTORY[0]["content"]] = groundtruth.HISTORY[1]["content"]
    base = fake_openai.start()
    provider, exporter = groundtruth.start_tracing("gen-openlit")
    import openlit
    from openai import OpenAI

    openlit.init(application_name="gen-openlit", disable_metrics=True, disable_events=True)
    client = OpenAI(api_key="sk-test", base_url=base)
    tools = TOOLS if scenario == "S3" else None

    @openlit.trace
    def get_weather(city: str) -> str:
        return groundtruth.get_weather(city)

    @openlit.trace
    def weather_agent(question: str, history: list[dict[str, Any]] | None = None) -> str:
        messages: list[Any] = [{"role": "system", "content": groundtruth.SYSTEM}, *(history or []),
                               {"role": "user", "content": question}]
        for _ in range(4):
            extra = {"tools": tools} if tools else {}
            message = client.chat.completions.create(model="gpt-4o-mini", messages=messages, **extra).choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = get_weather(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise RuntimeError("no answer")

    remembered: list[dict[str, str]] = []
    if scenario == "S2":  # the first turn of the session, left out of the capture
        first = weather_agent(groundtruth.HISTORY[0]["content"])
        remembered = [groundtruth.HISTORY[0], {"role": "assistant", "content": first}]
        provider.force_flush()
        exporter.clear()
        fake_openai.LOG.clear()
        openlit.inject_additional_attributes(
            lambda: weather_agent(groundtruth.PROMPTS[scenario], history=remembered), {"session.id": "ada-1"})
    else:
        weather_agent(groundtruth.PROMPTS[scenario])
    truth = groundtruth.expected(scenario, remembered)
    groundtruth.write_capture(provider, exporter, outdir, scenario, truth, PACKAGES, NOTES)


if __name__ == "__main__":
    main(*sys.argv[1:3])
