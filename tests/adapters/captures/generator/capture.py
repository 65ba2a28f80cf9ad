"""Capture one scenario of one instrumentation as OTLP: ``python capture.py VARIANT SCENARIO OUTDIR``.

Needs the instrumentation packages named in ../README.md (not project dependencies).
Writes ``OUTDIR/<SCENARIO>.pb`` (an ExportTraceServiceRequest) and, when the library
emitted log records, ``OUTDIR/<SCENARIO>.logs.pb``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import fake_openai

SYSTEM = "You are a terse assistant."
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
HISTORY = [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": "Nice to meet you, Ada."}]
CONTENT_MODES = {"openai-v2": "span_only", "openai-v2-events": "event_only", "openai-v2-nocontent": "true"}


def instrument(variant: str, tp: Any, lp: Any) -> None:
    if variant == "openai-v2-legacy":  # 2.1b0 on SDK 1.33: semconv 1.28 per-message log events
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
        from opentelemetry._events import set_event_logger_provider
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as LegacyInstrumentor
        from opentelemetry.sdk._events import EventLoggerProvider

        events = EventLoggerProvider(lp)
        set_event_logger_provider(events)
        LegacyInstrumentor().instrument(tracer_provider=tp, event_logger_provider=events)
    elif variant.startswith("openai-v2"):
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = CONTENT_MODES[variant]
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tp, logger_provider=lp)
    elif variant.startswith("openinference"):
        if variant.endswith("genai-semconv"):
            os.environ["OPENINFERENCE_ENABLE_GENAI_SEMCONV"] = "true"
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=tp)
    elif variant == "traceloop":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as LLMetryInstrumentor

        LLMetryInstrumentor().instrument(tracer_provider=tp)
    elif variant == "traceloop-events":  # OpenLLMetry's events path: gen_ai.* log records
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as LLMetryInstrumentor

        LLMetryInstrumentor(use_attributes=False).instrument(tracer_provider=tp, logger_provider=lp)


def plain(scenario: str, tracer: Any) -> None:
    import openai

    client = openai.OpenAI()
    system = [{"role": "system", "content": SYSTEM}]
    if scenario == "S1":
        client.chat.completions.create(model="gpt-4o-mini", temperature=0, messages=[
            *system, {"role": "user", "content": "What is the capital of France?"}])
    elif scenario == "S2":
        client.chat.completions.create(model="gpt-4o-mini", temperature=0, messages=[
            *system, *HISTORY, {"role": "user", "content": "What is my name?"}])
    elif scenario == "S3":
        with tracer.start_as_current_span("weather_turn"):
            msgs: list[Any] = [*system, {"role": "user", "content": "What is the weather in Paris?"}]
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=TOOLS, temperature=0)
            call = reply.choices[0].message.tool_calls[0]
            msgs += [
                {"role": "assistant", "content": None, "tool_calls": [{"id": call.id, "type": "function", "function": {
                    "name": call.function.name, "arguments": call.function.arguments}}]},
                {"role": "tool", "tool_call_id": call.id, "content": "sunny and 21 degrees Celsius"},
            ]
            client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=TOOLS, temperature=0)
    elif scenario == "S4":
        stream = client.chat.completions.create(
            model="gpt-4o-mini", temperature=0, stream=True, stream_options={"include_usage": True},
            messages=[*system, {"role": "user", "content": "Count from one to five."}])
        for _ in stream:
            pass


def pydantic_ai(variant: str, scenario: str, tp: Any, base: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    Agent.instrument_all(InstrumentationSettings(tracer_provider=tp, version=6 if variant.endswith("v6") else 5))
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(base_url=base, api_key="sk-test"))
    system_prompt = variant == "pydantic-ai-system-prompt"
    options: dict[str, Any] = {"system_prompt": SYSTEM} if system_prompt else {"instructions": SYSTEM}
    agent = Agent(model, name="terse_agent", **options)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return "sunny and 21 degrees Celsius"

    if scenario == "S1":
        agent.run_sync("What is the capital of France?")
    elif scenario == "S2":
        first: list[Any] = [SystemPromptPart(SYSTEM)] if system_prompt else []
        history = [ModelRequest(parts=[*first, UserPromptPart("My name is Ada.")]),
                   ModelResponse(parts=[TextPart("Nice to meet you, Ada.")])]
        agent.run_sync("What is my name?", message_history=history)
    elif scenario == "S3":
        agent.run_sync("What is the weather in Paris?")
    elif scenario == "S4":
        async def stream() -> None:
            async with agent.run_stream("Count from one to five.") as result:
                async for _ in result.stream_text():
                    pass

        asyncio.run(stream())


def agents_sdk(variant: str, scenario: str, tp: Any) -> None:
    import agents
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        Runner,
        function_tool,
    )
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    agents.set_trace_processors([])  # no upload to the OpenAI tracing backend
    OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)
    model_class = OpenAIResponsesModel if variant == "openai-agents" else OpenAIChatCompletionsModel
    model = model_class(model="gpt-4o-mini", openai_client=AsyncOpenAI())

    @function_tool
    def get_weather(city: str) -> str:
        return "sunny and 21 degrees Celsius"

    agent = Agent(name="terse_agent", instructions=SYSTEM, model=model, tools=[get_weather] if scenario == "S3" else [])
    if scenario == "S1":
        Runner.run_sync(agent, "What is the capital of France?")
    elif scenario == "S2":
        Runner.run_sync(agent, [*HISTORY, {"role": "user", "content": "What is my name?"}])
    elif scenario == "S3":
        Runner.run_sync(agent, "What is the weather in Paris?")
    elif scenario == "S4":
        async def stream() -> None:
            result = Runner.run_streamed(agent, "Count from one to five.")
            async for _ in result.stream_events():
                pass

        asyncio.run(stream())


def main(variant: str, scenario: str, outdir: str) -> None:
    from opentelemetry import _logs, trace
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    try:
        from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
    except ImportError:  # SDK < 1.39
        from opentelemetry.sdk._logs.export import InMemoryLogExporter as InMemoryLogRecordExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    base = fake_openai.start()
    os.environ["OPENAI_API_KEY"] = "sk-test"
    os.environ["OPENAI_BASE_URL"] = base
    resource = Resource.create({"service.name": f"gen-{variant}"})
    spans = InMemorySpanExporter()
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tp)
    logs = InMemoryLogRecordExporter()
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    _logs.set_logger_provider(lp)
    if variant.startswith("pydantic-ai"):
        pydantic_ai(variant, scenario, tp, base)
    elif variant.startswith("openai-agents"):
        agents_sdk(variant, scenario, tp)
    else:
        instrument(variant, tp, lp)
        plain(scenario, trace.get_tracer("acceptance.app"))
    tp.force_flush()
    lp.force_flush()
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{scenario}.pb"), "wb") as fh:
        fh.write(encode_spans(spans.get_finished_spans()).SerializeToString())
    records = logs.get_finished_logs()
    if records:
        with open(os.path.join(outdir, f"{scenario}.logs.pb"), "wb") as fh:
            fh.write(encode_logs(records).SerializeToString())
    print(variant, scenario, len(spans.get_finished_spans()), "spans", len(records), "log records")


if __name__ == "__main__":
    main(*sys.argv[1:4])
