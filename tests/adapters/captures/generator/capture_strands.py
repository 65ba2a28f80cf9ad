"""Capture a Strands agent: ``python capture_strands.py SCENARIO OUTDIR events|latest``.

``events``: Strands' default per-message span events (content as JSON Bedrock content
blocks); ``latest``: ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``
(``gen_ai.client.inference.operation.details`` span events). Needs strands-agents[openai].
"""

from __future__ import annotations

import os
import sys

import fake_openai

SYSTEM = "You are a terse assistant."
PROMPTS = {"S1": "What is the capital of France?", "S3": "What is the weather in Paris?",
           "S4": "Count from one to five."}


def main(scenario: str, outdir: str, mode: str) -> None:
    if mode == "latest":
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    base = fake_openai.start()
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "gen-strands"}))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tp)
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    model = OpenAIModel(client_args={"api_key": "sk-test", "base_url": base}, model_id="gpt-4o-mini",
                        params={"temperature": 0})

    @tool
    def get_weather(city: str) -> str:
        """weather"""
        return "sunny and 21 degrees Celsius"

    if scenario == "S2":
        history = [{"role": "user", "content": [{"text": "My name is Ada."}]},
                   {"role": "assistant", "content": [{"text": "Nice to meet you, Ada."}]}]
        agent = Agent(model=model, system_prompt=SYSTEM, name="terse_agent", callback_handler=None, messages=history)
        agent("What is my name?")
    else:
        tools = [get_weather] if scenario == "S3" else []
        agent = Agent(model=model, system_prompt=SYSTEM, name="terse_agent", callback_handler=None, tools=tools)
        agent(PROMPTS[scenario])
    tp.force_flush()
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{scenario}.pb"), "wb") as fh:
        fh.write(encode_spans(exporter.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main(*sys.argv[1:4])
