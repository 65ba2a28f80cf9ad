"""Capture a smolagents ToolCallingAgent: ``python capture_smolagents.py scripted|openai SCENARIO OUTDIR``.

Needs smolagents, openinference-instrumentation-smolagents, openai and the OpenTelemetry SDK
(a throwaway environment, never the project's).

``openai`` (S1, S3, S4 streamed): smolagents' own ``OpenAIServerModel`` against `fake_openai` (the
instrumentation wraps it: one LLM span per model call). ``scripted`` (S1, S3): a `Model` subclass
of our own that asks the same fake server through a plain OpenAI client; the
instrumentation only wraps the model classes of ``smolagents.models``, so the trace has the
AGENT, step (CHAIN) and TOOL spans and no model-call span. The model ends each run with a
``final_answer`` tool call, as smolagents asks it to.
"""

from __future__ import annotations

import sys
from typing import Any

import fake_openai
import groundtruth

PACKAGES = ["smolagents", "openinference-instrumentation-smolagents", "openinference-instrumentation",
            "openinference-semantic-conventions"]
NOTES = (
    "`<agent>.run` (AGENT, input.value = JSON of the run() arguments: task, stream, reset, images, "
    "additional_args, max_steps; smolagents.task) -> `Step N` (CHAIN) -> `OpenAIServerModel.generate` (LLM, "
    "openai mode only; input roles include smolagents' `tool-call` / `tool-response`, the task prefixed "
    "`New task:\\n`) and TOOL spans `GetWeather` / `FinalAnswerTool` (tool.name, input.value = JSON "
    "{args, sanitize_inputs_outputs, kwargs}, output.value = the result; no tool-call id). The model "
    "answers by calling `final_answer`; expected output gives that answer as the assistant's text."
)


def scripted_model(base: str) -> Any:
    """A model class the instrumentation does not know: same requests as OpenAIServerModel."""
    import openai
    from smolagents import ChatMessage, Model

    class ScriptedModel(Model):
        def __init__(self) -> None:
            super().__init__(model_id="gpt-4o-mini")
            self.client = openai.OpenAI(base_url=base, api_key="sk-test")

        def generate(self, messages: list[Any], stop_sequences: list[str] | None = None,
                     response_format: dict[str, str] | None = None, tools_to_call_from: list[Any] | None = None,
                     **kwargs: Any) -> ChatMessage:
            completion_kwargs = self._prepare_completion_kwargs(
                messages=messages, stop_sequences=stop_sequences, response_format=response_format,
                tools_to_call_from=tools_to_call_from, model=self.model_id, convert_images_to_image_urls=True,
                **kwargs)
            response = self.client.chat.completions.create(**completion_kwargs)
            message = response.choices[0].message
            return ChatMessage.from_dict(message.model_dump(include={"role", "content", "tool_calls"}), raw=response)

    return ScriptedModel()


def main(mode: str, scenario: str, outdir: str) -> None:
    base = fake_openai.start()
    provider, exporter = groundtruth.start_tracing(f"gen-smolagents-{mode}")
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city.

        Args:
            city: the city's name
        """
        return groundtruth.get_weather(city)

    if mode == "openai":
        model: Any = OpenAIServerModel(model_id="gpt-4o-mini", api_base=base, api_key="sk-test")
    else:
        model = scripted_model(base)
    agent = ToolCallingAgent(tools=[get_weather] if scenario == "S3" else [], model=model, name="terse_agent",
                             instructions=groundtruth.SYSTEM, max_steps=4, verbosity_level=0,
                             stream_outputs=mode == "openai" and scenario == "S4")
    agent.run(groundtruth.PROMPTS[scenario])
    truth = groundtruth.expected(scenario)
    if mode == "scripted":  # what this set-up leaves out of the trace, whatever reads it
        truth["not_in_trace"] = {
            "system": "no model-call span: the system prompt exists only in the model requests",
            "tool_call_ids": "the TOOL spans carry no call id; the model's ids exist only in its answers",
        }
    groundtruth.write_capture(provider, exporter, outdir, scenario, truth, PACKAGES, NOTES)


if __name__ == "__main__":
    main(*sys.argv[1:4])
