"""Capture a Haystack ``Agent`` in a ``Pipeline``: ``python capture_haystack.py openinference|native SCENARIO OUTDIR``.

Needs haystack-ai, the OpenTelemetry SDK and, per mode, openinference-instrumentation-haystack
(``openinference``) or opentelemetry-haystack (``native``: Haystack's own ``OpenTelemetryTracer``,
which left Haystack core in 3.0, with content tracing on: ``HAYSTACK_CONTENT_TRACING_ENABLED=true``).
A throwaway environment, never the project's. The agent's ``OpenAIChatGenerator`` talks to
`fake_openai`; S3 gives it a ``get_weather`` Tool.
"""

from __future__ import annotations

import os
import sys

import fake_openai
import groundtruth

NOTES = {
    "openinference": (
        "Only two spans, both CHAIN: `Pipeline.run` (input.value = JSON {data: {agent: {messages}}}) -> "
        "`Agent.run` (input.value = JSON {messages: [serialized ChatMessage]}, output.value = JSON {messages: "
        "[the whole conversation as serialized ChatMessages], last_message}). A ChatMessage is {role, content: "
        "[{text} | {tool_call: {id, tool_name, arguments}} | {tool_call_result: {result, origin, error}}], "
        "name, meta}. The system prompt is the Agent's system_prompt. No LLM or TOOL span."
    ),
    "native": (
        "Haystack's own tracer (untyped INTERNAL spans, scope = the tracer's name): `haystack.pipeline.run` "
        "(haystack.pipeline.input_data / output_data) -> `haystack.component.run` for the `agent` component "
        "(haystack.component.name / type = Agent, haystack.component.input / output = JSON with ChatMessage.to_dict() "
        "messages; the output holds the whole conversation) -> `haystack.agent.run` (haystack.agent.input / "
        "output, the same) -> `haystack.agent.step` per step -> `haystack.agent.step.llm` (one model request: "
        "haystack.agent.step.llm.input = {messages, tools}, .output = {replies}) and `haystack.agent.step.tool` "
        "(haystack.tool.name, haystack.agent.step.tool.input = arguments JSON, .output = the result; no call id). "
        "No LLM / AGENT / TOOL kinds anywhere."
    ),
}
PACKAGES = {
    "openinference": ["haystack-ai", "openinference-instrumentation-haystack", "openinference-instrumentation",
                      "openinference-semantic-conventions"],
    "native": ["haystack-ai", "opentelemetry-haystack"],
}


def main(mode: str, scenario: str, outdir: str) -> None:
    os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    os.environ["HAYSTACK_CONTENT_TRACING_ENABLED"] = "true"
    base = fake_openai.start()
    provider, exporter = groundtruth.start_tracing(f"gen-haystack-{mode}")
    if mode == "openinference":
        from openinference.instrumentation.haystack import HaystackInstrumentor

        HaystackInstrumentor().instrument(tracer_provider=provider)
    else:
        from haystack import tracing
        from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

        tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
        tracing.tracer.is_content_tracing_enabled = True
    from haystack import Pipeline
    from haystack.components.agents import Agent
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack.tools import Tool
    from haystack.utils import Secret

    weather = Tool(name="get_weather", description="Get the current weather in a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                   function=groundtruth.get_weather)
    generator = OpenAIChatGenerator(model="gpt-4o-mini", api_base_url=base, api_key=Secret.from_token("sk-test"))
    agent = Agent(chat_generator=generator, tools=[weather] if scenario == "S3" else [],
                  system_prompt=groundtruth.SYSTEM)
    pipeline = Pipeline()
    pipeline.add_component("agent", agent)
    pipeline.run({"agent": {"messages": [ChatMessage.from_user(groundtruth.PROMPTS[scenario])]}})
    groundtruth.write_capture(provider, exporter, outdir, scenario, groundtruth.expected(scenario),
                              PACKAGES[mode], NOTES[mode])


if __name__ == "__main__":
    main(*sys.argv[1:4])
