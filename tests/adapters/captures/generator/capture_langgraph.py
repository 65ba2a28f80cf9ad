"""Capture a LangGraph ReAct agent: ``python capture_langgraph.py oi|llmetry SCENARIO OUTDIR``.

``oi`` instruments LangChain with openinference-instrumentation-langchain, ``llmetry``
with OpenLLMetry's opentelemetry-instrumentation-langchain (install one per environment).
"""

from __future__ import annotations

import os
import sys

import fake_openai

SYSTEM = "You are a terse assistant."


def main(variant: str, scenario: str, outdir: str) -> None:
    os.environ["OPENAI_API_KEY"] = "sk-test"
    os.environ["OPENAI_BASE_URL"] = fake_openai.start()
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": f"gen-langgraph-{variant}"}))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tp)
    if variant == "oi":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tp)
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=tp)
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(city: str) -> str:
        """weather"""
        return "sunny and 21 degrees Celsius"

    model = ChatOpenAI(model="gpt-4o-mini", temperature=0)
    agent = create_react_agent(model, tools=[get_weather] if scenario == "S3" else [], prompt=SYSTEM)
    if scenario == "S1":
        agent.invoke({"messages": [("user", "What is the capital of France?")]})
    elif scenario == "S2":
        agent.invoke({"messages": [("user", "My name is Ada."), ("assistant", "Nice to meet you, Ada."),
                                   ("user", "What is my name?")]})
    elif scenario == "S3":
        agent.invoke({"messages": [("user", "What is the weather in Paris?")]})
    elif scenario == "S4":
        for _ in agent.stream({"messages": [("user", "Count from one to five.")]}, stream_mode="messages"):
            pass
    tp.force_flush()
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{scenario}.pb"), "wb") as fh:
        fh.write(encode_spans(exporter.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main(*sys.argv[1:4])
