"""Capture a LlamaIndex FunctionAgent with OpenInference: ``python capture_llamaindex.py SCENARIO OUTDIR``.

Needs llama-index-core, llama-index-llms-openai and openinference-instrumentation-llama-index.
"""

from __future__ import annotations

import asyncio
import os
import sys

import fake_openai

PROMPTS = {"S1": "What is the capital of France?", "S3": "What is the weather in Paris?",
           "S4": "Count from one to five."}


def main(scenario: str, outdir: str) -> None:
    base = fake_openai.start()
    os.environ["OPENAI_API_KEY"] = "sk-test"
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai import OpenAI
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "gen-llamaindex"}))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tp)
    LlamaIndexInstrumentor().instrument(tracer_provider=tp)

    def get_weather(city: str) -> str:
        """weather"""
        return "sunny and 21 degrees Celsius"

    llm = OpenAI(model="gpt-4o-mini", api_base=base, api_key="sk-test", temperature=0)
    agent = FunctionAgent(name="terse_agent", tools=[get_weather] if scenario == "S3" else [], llm=llm,
                          system_prompt="You are a terse assistant.")

    async def run() -> None:
        if scenario == "S2":
            history = [ChatMessage(role="user", content="My name is Ada."),
                       ChatMessage(role="assistant", content="Nice to meet you, Ada.")]
            await agent.run("What is my name?", chat_history=history)
        else:
            await agent.run(PROMPTS[scenario])

    asyncio.run(run())
    tp.force_flush()
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{scenario}.pb"), "wb") as fh:
        fh.write(encode_spans(exporter.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main(*sys.argv[1:3])
