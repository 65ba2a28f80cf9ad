"""Tracing set-up and ground truth shared by the agent-framework capture scripts.

`start_tracing` installs an SDK tracer provider with an in-memory exporter; `write_capture`
encodes the finished spans as one ``ExportTraceServiceRequest`` (``<SCENARIO>.pb``) and
writes ``<SCENARIO>.expected.json`` in the format of ``tests/fixtures/README.md``.

The ground truth never comes from the spans: system prompt and tool calls are what the fake
OpenAI server (`fake_openai.LOG`) saw and answered, tool results are what the generator's
tool functions returned (`TOOL_RESULTS`), and the user's words are the scenario's text.
A ``final_answer`` tool call (smolagents ends a run that way) is the assistant's answer.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from typing import Any

import fake_openai

SYSTEM = "You are a terse assistant."
PROMPTS = {
    "S1": "What is the capital of France?",
    "S2": "What is my name?",
    "S3": "What is the weather in Paris?",
    "S4": "Count from one to five.",
}
HISTORY = [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": "Nice to meet you, Ada."}]
WEATHER = "sunny and 21 degrees Celsius"
#: What the generator's tool functions returned, in call order: (tool name, result).
TOOL_RESULTS: list[tuple[str, str]] = []
FINAL_TOOLS = frozenset({"final_answer"})


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    TOOL_RESULTS.append(("get_weather", WEATHER))  # the tool of every capture: its results are ground truth
    return WEATHER


def start_tracing(service: str) -> tuple[Any, Any]:
    """A global SDK tracer provider with a simple in-memory exporter: ``(provider, exporter)``."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider, exporter


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("text"))
    return content or ""


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        out.append({"id": call.get("id"), "type": "function", "name": fn.get("name"),
                    "arguments": json.loads(fn.get("arguments") or "{}"), "arguments_json": fn.get("arguments")})
    return out


def _responses_output(resp: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses API answer as chat messages."""
    calls = [{"id": item["call_id"], "type": "function", "name": item["name"],
              "arguments": json.loads(item["arguments"]), "arguments_json": item["arguments"]}
             for item in resp.get("output", []) if item.get("type") == "function_call"]
    texts = [c.get("text", "") for item in resp.get("output", []) if item.get("type") == "message"
             for c in item.get("content", [])]
    return [{"role": "assistant", "content": "\n".join(texts) or None, "tool_calls": calls}]


def expected(scenario: str, remembered: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ground truth of the run just captured, from `fake_openai.LOG` and `TOOL_RESULTS`."""
    llm_calls: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []
    results = list(TOOL_RESULTS)
    system: list[str] = []
    for i, entry in enumerate(fake_openai.LOG):
        request, response = entry["request"], entry["response"]
        if entry["path"].endswith("/responses"):
            messages = request.get("input") if isinstance(request.get("input"), list) else []
            replies = _responses_output(response)
            if i == 0 and request.get("instructions"):
                system.append(request["instructions"])
        else:
            messages = request.get("messages", [])
            replies = [c["message"] for c in response["choices"]]
        if i == 0:
            system += [_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")]
        llm_calls.append({"request_messages": messages, "response": replies})
        for reply in replies:
            calls = _calls(reply) if "choices" in response else reply["tool_calls"]
            final = [c for c in calls if c["name"] in FINAL_TOOLS]
            if final:
                output.append({"role": "assistant", "content": final[0]["arguments"]["answer"], "tool_calls": []})
                continue
            output.append({"role": "assistant", "content": _text(reply.get("content")) or "", "tool_calls": calls})
            for call in calls:
                name, result = results.pop(0)
                assert call["name"].endswith(name), (name, call)  # Semantic Kernel: "<Plugin>-get_weather"
                output.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": result})
    return {
        "system": system,
        "remembered": remembered or [],
        "input": [{"role": "user", "content": PROMPTS[scenario]}],
        "output": output,
        "final_output": next((m["content"] for m in reversed(output) if m["role"] == "assistant"), ""),
        "tagged_system": {},
        "content_in_trace": True,
        "llm_calls": llm_calls,
    }


def write_capture(provider: Any, exporter: Any, outdir: str, scenario: str, truth: dict[str, Any],
                  packages: list[str], notes: str = "") -> None:
    """Write ``OUTDIR/<SCENARIO>.pb`` and ``OUTDIR/<SCENARIO>.expected.json``."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    provider.force_flush()
    spans = exporter.get_finished_spans()
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{scenario}.pb"), "wb") as fh:
        fh.write(encode_spans(spans).SerializeToString())
    truth["span_kind_notes"] = notes
    truth["capture"] = {"export_requests": 1, "content_type": "application/x-protobuf",
                        "spans": [f"{s.name} [{s.instrumentation_scope.name}]" for s in spans]}
    versions = {}
    for name in ["opentelemetry-sdk", "openai", *packages]:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    truth["generator"] = {"script": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                          "python": sys.version.split()[0], "packages": versions}
    with open(os.path.join(outdir, f"{scenario}.expected.json"), "w") as fh:
        json.dump(truth, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print(outdir, scenario, len(spans), "spans", len(fake_openai.LOG), "model requests")
