"""Capture an Agno agent with OpenInference: ``python capture_agno.py SCENARIO OUTDIR``.

Needs agno, openinference-instrumentation-agno, openai and the OpenTelemetry SDK (a
throwaway environment). Agno's ``OpenAIChat`` model talks to `fake_openai`; telemetry to
Agno's servers is switched off.
"""

from __future__ import annotations

import os
import sys

import fake_openai
import groundtruth

NOTES = (
    "`terse_agent.run` (AGENT, agent.name, input.value = the user's text, output.value = the answer) -> "
    "`OpenAIChat.invoke` (LLM, llm.input_messages / llm.output_messages, one per model request) and "
    "`get_weather` (TOOL, input.value = the arguments JSON, output.value = the result; no call id), all "
    "children of the agent span. The system prompt is the agent's instructions as sent."
)
PACKAGES = ["agno", "openinference-instrumentation-agno", "openinference-instrumentation",
            "openinference-semantic-conventions"]


def main(scenario: str, outdir: str) -> None:
    os.environ["AGNO_TELEMETRY"] = "false"
    base = fake_openai.start()
    provider, exporter = groundtruth.start_tracing("gen-agno")
    from openinference.instrumentation.agno import AgnoInstrumentor

    AgnoInstrumentor().instrument(tracer_provider=provider)
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat

    model = OpenAIChat(id="gpt-4o-mini", base_url=base, api_key="sk-test", temperature=0)
    agent = Agent(name="terse_agent", model=model, instructions=groundtruth.SYSTEM,
                  tools=[groundtruth.get_weather] if scenario == "S3" else [], telemetry=False)
    if scenario == "S4":
        for _ in agent.run(groundtruth.PROMPTS[scenario], stream=True):
            pass
    else:
        agent.run(groundtruth.PROMPTS[scenario])
    groundtruth.write_capture(provider, exporter, outdir, scenario, groundtruth.expected(scenario), PACKAGES, NOTES)


if __name__ == "__main__":
    main(*sys.argv[1:3])
