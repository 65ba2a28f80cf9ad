"""Capture a weather agent traced by the Langfuse Python SDK: ``python capture_langfuse.py SCENARIO OUTDIR [typed|plain]``.

Needs langfuse (v3 or later: OpenTelemetry-native) and openai (a throwaway environment).
The agent is traced as a Langfuse user traces one: ``@observe(as_type="agent")`` on the
agent function, ``@observe(as_type="tool")`` on the tool, and the ``langfuse.openai``
drop-in client for the model calls, inside ``propagate_attributes(session_id=...)`` (3.x:
``update_current_trace(session_id=...)`` in the agent function). ``plain`` leaves ``as_type``
out, as many users do: plain ``@observe()`` makes ``span`` observations.
Langfuse's own span processor exports to an in-memory exporter (``span_exporter=``)
instead of a Langfuse server; the keys are dummies and nothing leaves the machine.

Scenarios: ``S1`` is the tool round trip (``What is the weather in Paris?``); ``S2`` is the
second turn of a two-turn session (turn one, ``My name is Ada.``, is run first in the same
session and left out of the capture; its messages are the second turn's history).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from contextlib import nullcontext
from typing import Any

import fake_openai
import groundtruth


def _notes(typed: bool, propagated: bool) -> str:
    """What the spans of this capture carry where."""
    return (
        f"Every span is scope `langfuse-sdk` with `langfuse.observation.type`. `weather_agent` "
        f"({'agent' if typed else 'span'}: `langfuse.observation.input` = `{{\"args\": [question, history], "
        f"\"kwargs\": {{}}}}` JSON, `.output` = the answer as plain text) -> `OpenAI-generation` per model request "
        "(generation: `.input` = JSON `{\"tools\": [...], \"messages\": [...]}` as sent, `.output` = the assistant "
        "message JSON, `langfuse.observation.model.name`, `.usage_details` (OpenAI's usage), `.model.parameters`) and "
        f"`get_weather` ({'tool' if typed else 'span'}: `.input` = `{{\"args\": [], \"kwargs\": "
        "{\"city\": \"Paris\"}}`, `.output` = the result as plain text; no call id). `session.id` "
        + ("(from `propagate_attributes`) is on every span." if propagated else
           "(from `update_current_trace` in the agent function) is on the agent span only.")
    )

PACKAGES = ["langfuse", "opentelemetry-api", "httpx"]
SESSION = "langfuse-session-1"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
FIRST_TURN = {"My name is Ada.": "Nice to meet you, Ada."}


def _first_turn(body: dict[str, Any]) -> dict[str, Any] | None:
    """The fake server's answer to turn one of S2 (it has no fixed answer for that text)."""
    last = fake_openai.last_user(body.get("messages", []))
    return {"role": "assistant", "content": FIRST_TURN[last]} if last in FIRST_TURN else None


def main(scenario: str, outdir: str, mode: str = "typed") -> None:
    base = fake_openai.start()
    fake_openai.CHAT_HOOK = _first_turn
    os.environ["OPENAI_API_KEY"] = "sk-test"
    os.environ["OPENAI_BASE_URL"] = base
    os.environ["OTEL_SERVICE_NAME"] = "gen-langfuse"
    from langfuse import Langfuse, observe, propagate_attributes
    from langfuse.openai import OpenAI
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    # dummy keys and a dead loopback address: nothing leaves the machine
    keys = {"public_key": "pk-lf-test", "secret_key": "sk-lf-test", "host": "http://127.0.0.1:9"}
    if "span_exporter" in inspect.signature(Langfuse).parameters:  # 4.x and later: Langfuse's processor
        langfuse = Langfuse(**keys, span_exporter=exporter)
    else:  # 3.x: our processor beside Langfuse's on the provider it uses (its own export blocked)
        provider = TracerProvider(resource=Resource.create())
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        langfuse = Langfuse(**keys, tracer_provider=provider, blocked_instrumentation_scopes=["langfuse-sdk"])
    client = OpenAI()

    typed = mode == "typed"

    @observe(as_type="tool" if typed else None)
    def get_weather(city: str) -> str:
        return groundtruth.get_weather(city)

    @observe(as_type="agent" if typed else None)
    def weather_agent(question: str, history: list[dict[str, Any]]) -> str:
        if hasattr(langfuse, "update_current_trace"):  # 3.x: the trace's session, set from inside it
            langfuse.update_current_trace(session_id=SESSION)
        messages: list[Any] = [{"role": "system", "content": groundtruth.SYSTEM}, *history,
                               {"role": "user", "content": question}]
        for _ in range(3):
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS,
                                                   temperature=0)
            message = reply.choices[0].message
            if not message.tool_calls:
                return str(message.content)
            messages.append({"role": "assistant", "content": message.content, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                              "arguments": c.function.arguments}}
                for c in message.tool_calls]})
            for call in message.tool_calls:
                result = get_weather(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise RuntimeError("no answer after three model requests")

    history: list[dict[str, Any]] = []
    # 4.x and later: propagate_attributes puts the session on every span made inside it
    session = nullcontext() if hasattr(langfuse, "update_current_trace") else propagate_attributes(session_id=SESSION)
    with session:
        if scenario == "S2":
            question = next(iter(FIRST_TURN))
            weather_agent(question, [])
            (first,) = fake_openai.LOG  # turn one as the model saw and answered it: turn two's history
            history = [first["request"]["messages"][-1], first["response"]["choices"][0]["message"]]
            langfuse.flush()
            exporter.clear()  # the capture holds the second turn only
            fake_openai.LOG.clear()
        prompt = groundtruth.PROMPTS["S3" if scenario == "S1" else "S2"]
        weather_agent(prompt, history)
    langfuse.flush()
    truth = groundtruth.expected("S3" if scenario == "S1" else "S2", remembered=history)
    truth["session_id"] = SESSION
    notes = _notes(typed, propagated=not hasattr(langfuse, "update_current_trace"))
    groundtruth.write_capture(trace.get_tracer_provider(), exporter, outdir, scenario, truth, PACKAGES, notes)


if __name__ == "__main__":
    main(*sys.argv[1:4])
