"""Capture a Microsoft Agent Framework agent on the Responses API: ``python capture_agent_framework.py SCENARIO OUTDIR``.

An ``Agent`` with ``OpenAIChatClient`` (agent-framework-openai's Responses API client) on
`fake_openai`, the ``get_weather`` function as its tool and the agent's ``instructions`` as
system prompt, with the framework's OpenTelemetry instrumentation on and sensitive data
included (``enable_instrumentation(enable_sensitive_data=True)``, as ``ENABLE_SENSITIVE_DATA=true``
does). The Responses API keeps the conversation on the server: the tool loop's second request
is chained by ``previous_response_id`` and sends only the tool result. S2 runs two turns on one
``AgentSession``; the capture holds the second. Needs agent-framework-core,
agent-framework-openai and opentelemetry-exporter-otlp-proto-common.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import fake_openai
import groundtruth

PACKAGES = ["agent-framework-core", "agent-framework-openai", "opentelemetry-api",
            "opentelemetry-semantic-conventions"]
NOTES = (
    "`invoke_agent terse_agent` (INTERNAL, scope agent_framework: gen_ai.agent.name/id, gen_ai.input.messages = "
    "the messages passed to run(), gen_ai.output.messages = every message of the run's response, "
    "gen_ai.system_instructions, gen_ai.conversation.id = the session's service session id, i.e. the previous "
    "response's id) -> `chat gpt-4o-mini` (CLIENT, one per model request: gen_ai.input.messages = what the "
    "request sent (after a tool call, only the tool result: the request is chained by previous_response_id), "
    "gen_ai.output.messages, gen_ai.conversation.id) and `execute_tool get_weather` (gen_ai.tool.call.id, "
    "gen_ai.tool.call.arguments, gen_ai.tool.call.result)."
)


async def run(scenario: str, base: str) -> tuple[Any, Any, list[dict[str, str]]]:
    provider, exporter = groundtruth.start_tracing("gen-agent-framework")
    from agent_framework import Agent
    from agent_framework.observability import enable_instrumentation
    from agent_framework.openai import OpenAIChatClient

    enable_instrumentation(enable_sensitive_data=True)
    client = OpenAIChatClient(model="gpt-4o-mini", api_key="sk-test", base_url=base)
    tools = [groundtruth.get_weather] if scenario == "S3" else []
    agent = Agent(client=client, name="terse_agent", instructions=groundtruth.SYSTEM, tools=tools)
    session = agent.create_session()
    remembered: list[dict[str, str]] = []
    if scenario == "S2":  # the first turn of the session, left out of the capture
        await agent.run(groundtruth.HISTORY[0]["content"], session=session)
        provider.force_flush()
        exporter.clear()
        fake_openai.LOG.clear()
        remembered = groundtruth.HISTORY
    await agent.run(groundtruth.PROMPTS[scenario], session=session)
    return provider, exporter, remembered


def main(scenario: str, outdir: str) -> None:
    fake_openai.ANSWERS[groundtruth.HISTORY[0]["content"]] = groundtruth.HISTORY[1]["content"]
    base = fake_openai.start()
    provider, exporter, remembered = asyncio.run(run(scenario, base))
    truth = groundtruth.expected(scenario, remembered)
    if remembered:
        truth["not_in_trace"] = {"remembered": "the Responses API keeps the first turn on the server: the second "
                                               "turn's request goes on from it by previous_response_id"}
    groundtruth.write_capture(provider, exporter, outdir, scenario, truth, PACKAGES, NOTES)


if __name__ == "__main__":
    main(*sys.argv[1:3])
