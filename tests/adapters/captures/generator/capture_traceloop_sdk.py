"""Capture S3 through the Traceloop SDK decorators: ``python capture_traceloop_sdk.py OUTDIR``.

``@agent`` wraps a hand-written tool-call loop, ``@tool`` the tool; the OpenLLMetry
OpenAI instrumentation records the model calls. traceloop-sdk 0.62.4 was installed with
``--no-deps`` plus the modules it imports (pip cannot resolve it unaided).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import fake_openai

SYSTEM = "You are a terse assistant."
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def main(outdir: str) -> None:
    os.environ["OPENAI_API_KEY"] = "sk-test"
    os.environ["OPENAI_BASE_URL"] = fake_openai.start()
    os.environ["TRACELOOP_TELEMETRY"] = "false"
    import openai
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import agent, tool

    exporter = InMemorySpanExporter()
    Traceloop.init(app_name="gen-traceloop-sdk", exporter=exporter, disable_batch=True, telemetry_enabled=False)

    @tool(name="get_weather")
    def get_weather(city: str) -> str:
        return "sunny and 21 degrees Celsius"

    @agent(name="weather_agent")
    def weather_agent(client: Any, messages: list[Any]) -> str:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, temperature=0)
        call = reply.choices[0].message.tool_calls[0]
        messages = [
            *messages,
            {"role": "assistant", "content": None, "tool_calls": [{"id": call.id, "type": "function", "function": {
                "name": call.function.name, "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": get_weather("Paris")},
        ]
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, temperature=0)
        return str(reply.choices[0].message.content)

    weather_agent(openai.OpenAI(), [{"role": "system", "content": SYSTEM},
                                    {"role": "user", "content": "What is the weather in Paris?"}])
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "S3.pb"), "wb") as fh:
        fh.write(encode_spans(exporter.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1])
