"""Capture a Semantic Kernel agent, spans only: ``python capture_semantic_kernel.py SCENARIO OUTDIR``.

A ``ChatCompletionAgent`` (``OpenAIChatCompletion`` on `fake_openai`, a ``WeatherPlugin`` with
``get_weather``, the agent's ``instructions`` as system prompt) with Semantic Kernel's
OpenTelemetry diagnostics on, sensitive data included
(``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true``), and no
log-record exporter: the chat messages Semantic Kernel logs as ``gen_ai.*`` log records are
not in the capture, only what its spans carry. S2 runs two turns on one
``ChatHistoryAgentThread``; the capture holds the second. Needs semantic-kernel and
opentelemetry-exporter-otlp-proto-common.
"""

from __future__ import annotations

import asyncio
import os
import sys

import fake_openai
import groundtruth

PACKAGES = ["semantic-kernel", "opentelemetry-api", "opentelemetry-semantic-conventions"]
NOTES = (
    "`invoke_agent terse_agent` (scope semantic_kernel.utils.telemetry.agent_diagnostics.decorators; "
    "gen_ai.agent.name/id, gen_ai.input.messages = JSON of the ChatMessageContent dicts passed in (the user's "
    "message only, not the thread's history), gen_ai.output.messages = the answer) -> `chat gpt-4o-mini` "
    "(CLIENT, one per model request: model, usage, finish reason, no messages: Semantic Kernel logs them as "
    "gen_ai.* log records, left out here) and `execute_tool WeatherPlugin-get_weather` (gen_ai.tool.name = the "
    "plugin-qualified name, gen_ai.tool.call.id, gen_ai.tool.call.arguments = JSON of the arguments, "
    "gen_ai.tool.call.result). No span carries the system prompt, the thread's history or a thread id."
)


async def run(scenario: str, base: str) -> tuple[object, object, list[dict[str, str]]]:
    provider, exporter = groundtruth.start_tracing("gen-semantic-kernel")
    from openai import AsyncOpenAI
    from semantic_kernel.agents import ChatCompletionAgent, ChatHistoryAgentThread
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
    from semantic_kernel.functions import kernel_function

    class WeatherPlugin:
        @kernel_function(description="Get the current weather in a city.")
        def get_weather(self, city: str) -> str:
            return groundtruth.get_weather(city)

    service = OpenAIChatCompletion(ai_model_id="gpt-4o-mini",
                                   async_client=AsyncOpenAI(api_key="sk-test", base_url=base))
    plugins = [WeatherPlugin()] if scenario == "S3" else []
    agent = ChatCompletionAgent(service=service, name="terse_agent", instructions=groundtruth.SYSTEM,
                                plugins=plugins)
    thread = ChatHistoryAgentThread(thread_id="thread-ada-1")
    remembered: list[dict[str, str]] = []
    if scenario == "S2":  # the first turn of the session, left out of the capture
        await agent.get_response(groundtruth.HISTORY[0]["content"], thread=thread)
        provider.force_flush()
        exporter.clear()
        fake_openai.LOG.clear()
        remembered = groundtruth.HISTORY
    # positionally: SK 1.45's agent span records ``args[1]`` only, so ``messages=...`` leaves its input empty
    await agent.get_response(groundtruth.PROMPTS[scenario], thread=thread)
    return provider, exporter, remembered


def main(scenario: str, outdir: str) -> None:
    os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"] = "true"
    fake_openai.ANSWERS[groundtruth.HISTORY[0]["content"]] = groundtruth.HISTORY[1]["content"]
    base = fake_openai.start()
    provider, exporter, remembered = asyncio.run(run(scenario, base))
    truth = groundtruth.expected(scenario, remembered)
    truth["not_in_trace"] = {"system": "Semantic Kernel logs the chat messages it sends (the agent's instructions "
                                       "among them) as log records, not on spans"}
    if remembered:
        truth["not_in_trace"]["remembered"] = ("the invoke_agent span records only the messages passed in, and "
                                               "the thread's history is sent in the log records")
    groundtruth.write_capture(provider, exporter, outdir, scenario, truth, PACKAGES, NOTES)


if __name__ == "__main__":
    main(*sys.argv[1:3])
