"""Capture an AutoGen AgentChat agent with OpenInference: ``python capture_autogen.py SCENARIO OUTDIR``.

Needs autogen-agentchat, autogen-ext[openai], openinference-instrumentation-autogen-agentchat
and the OpenTelemetry SDK (a throwaway environment). ``reflect_on_tool_use=True`` makes the
agent ask the model again after a tool call, so S3 is a full round trip.
"""

from __future__ import annotations

import asyncio
import sys

import fake_openai
import groundtruth

PACKAGES = ["autogen-agentchat", "autogen-core", "autogen-ext", "openinference-instrumentation-autogen-agentchat",
            "openinference-instrumentation", "openinference-semantic-conventions"]


def main(scenario: str, outdir: str) -> None:
    base = fake_openai.start()
    provider, exporter = groundtruth.start_tracing("gen-autogen")
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    AutogenAgentChatInstrumentor().instrument(tracer_provider=provider)
    from autogen_agentchat.agents import AssistantAgent
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        return groundtruth.get_weather_result(city)

    client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=base, api_key="sk-test", temperature=0)
    agent = AssistantAgent("terse_agent", model_client=client, system_message=groundtruth.SYSTEM,
                           tools=[get_weather] if scenario == "S3" else [], reflect_on_tool_use=True)
    asyncio.run(agent.run(task=groundtruth.PROMPTS[scenario]))
    notes = "filled in after the first capture"
    groundtruth.write_capture(provider, exporter, outdir, scenario, groundtruth.expected(scenario), PACKAGES, notes)


if __name__ == "__main__":
    main(*sys.argv[1:3])
