"""Capture an AutoGen AgentChat agent with OpenInference: ``python capture_autogen.py SCENARIO OUTDIR``.

Needs autogen-agentchat, autogen-ext[openai], openinference-instrumentation-autogen-agentchat
and the OpenTelemetry SDK (a throwaway environment). ``reflect_on_tool_use=True`` makes the
agent ask the model again after a tool call, so S3 is a full round trip.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import fake_openai
import groundtruth

NOTES = (
    "Two instrumentations: autogen-core's own GenAI spans (`create_agent terse_agent`, a separate root; "
    "`invoke_agent terse_agent`, gen_ai.agent.name, no messages; `execute_tool get_weather` with "
    "gen_ai.tool.call.id) and OpenInference's `terse_agent.on_messages_stream` (AGENT without agent.name, "
    "graph.node.id; input.value = JSON {messages: [Python repr of TextMessage], cancellation_token}) -> "
    "`OpenAIChatCompletionClient.create` (LLM; system as role `developer`; a tool result as role "
    "`function` with `llm.input_messages.N.function.K` = JSON {name, content, call_id, is_error}) and "
    "`terse_agent.get_weather` (TOOL, input.value = arguments JSON)."
)
PACKAGES = ["autogen-agentchat", "autogen-core", "autogen-ext", "openinference-instrumentation-autogen-agentchat",
            "openinference-instrumentation", "openinference-semantic-conventions"]


def main(scenario: str, outdir: str) -> None:
    base = fake_openai.start()
    provider, exporter = groundtruth.start_tracing("gen-autogen")
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    AutogenAgentChatInstrumentor().instrument(tracer_provider=provider)
    from autogen_agentchat.agents import AssistantAgent
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=base, api_key="sk-test", temperature=0)
    agent = AssistantAgent("terse_agent", model_client=client, system_message=groundtruth.SYSTEM,
                           tools=[groundtruth.get_weather] if scenario == "S3" else [], reflect_on_tool_use=True,
                           model_client_stream=scenario == "S4")
    asyncio.run(run(agent, scenario))
    groundtruth.write_capture(provider, exporter, outdir, scenario, groundtruth.expected(scenario), PACKAGES, NOTES)


async def run(agent: Any, scenario: str) -> None:
    """One agent run; S4 streams the model's answer."""
    if scenario == "S4":
        async for _ in agent.run_stream(task=groundtruth.PROMPTS[scenario]):
            pass
    else:
        await agent.run(task=groundtruth.PROMPTS[scenario])


if __name__ == "__main__":
    main(*sys.argv[1:3])
