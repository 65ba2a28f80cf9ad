"""Capture a Google ADK agent (LiteLLM model): ``python capture_adk.py SCENARIO OUTDIR``.

Content capture is chosen by the environment: nothing set (ADK's default, no content),
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``, or
``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`` (the legacy ``call_llm`` spans).
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
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import InMemoryRunner
    from google.genai import types
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "gen-adk"}))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tp)

    def get_weather(city: str) -> str:
        """weather"""
        return "sunny and 21 degrees Celsius"

    model = LiteLlm(model="openai/gpt-4o-mini", api_base=base, api_key="sk-test")
    agent = LlmAgent(name="terse_agent", model=model, instruction="You are a terse assistant.",
                     tools=[get_weather] if scenario == "S3" else [])

    async def run() -> None:
        runner = InMemoryRunner(agent=agent, app_name="gen")
        session = await runner.session_service.create_session(app_name="gen", user_id="u-1")
        message = types.Content(role="user", parts=[types.Part(text=PROMPTS[scenario])])
        async for _ in runner.run_async(user_id="u-1", session_id=session.id, new_message=message):
            pass

    asyncio.run(run())
    tp.force_flush()
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{scenario}.pb"), "wb") as fh:
        fh.write(encode_spans(exporter.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main(*sys.argv[1:3])
